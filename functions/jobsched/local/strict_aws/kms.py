"""KMS: requests per second against the account's quota, and SSE-KMS's implicit calls
(local/strict_aws/sse_kms.py) checked with the sender's credentials."""
from __future__ import annotations

import functools
import re
from typing import Any

from jobsched.local.strict_aws import sse_kms
from jobsched.local.strict_aws.base import ACCOUNT, REGION, _Call, _error, _internal, _raw_bytes


KMS_CRYPTO_OPERATIONS = frozenset({"Decrypt", "Encrypt", "GenerateDataKey", "GenerateDataKeyWithoutPlaintext",
                                   "GenerateDataKeyPair", "GenerateDataKeyPairWithoutPlaintext", "GenerateMac",
                                   "GenerateRandom", "ReEncrypt", "VerifyMac"})


class KmsChecks:
    """KMS for the strict layer (a mixin of StrictAws): the account's request quota, and the
    implicit KMS calls of a send to a queue or topic under a customer-managed key (sse_kms)."""

    def _check_sse_kms(self, client, call: _Call, caller: tuple | None) -> None:
        """A send to a queue or topic under a customer-managed key: the key must be usable, and the
        caller allowed kms:GenerateDataKey and kms:Decrypt on it through the service (sse_kms.py);
        a caller allowed once is not asked again within SQS's data-key reuse period."""
        address = sse_kms.address_of(call.service, call.params)
        who = caller[0] if caller else None
        if not address or self._sse_reuse.get((who, address), 0) > self.now_ms():
            return
        token = _internal.set(True)
        try:
            key = sse_kms.sse_key(self._tag_client, call.service, address, REGION, ACCOUNT,
                                  {**self.template.own_keys, **self._kms_ids})
        finally:
            _internal.reset(token)
        if key is None:  # not asked again for a while either (the layer's shortcut: encryption set later waits)
            self._sse_reuse[(who, address)] = self.now_ms() + sse_kms.unencrypted_recheck_ms(call.service)
            return
        refused = sse_kms.key_state_refusal(client, call.operation, call.service, key)
        if refused is not None:
            raise refused
        if caller is not None:
            who, statements, principal, tags = caller
            context = {**self._condition_context(call, principal, tags),
                       **sse_kms.condition_keys(call.service, address, key, REGION, ACCOUNT)}
            for action in sse_kms.SSE_KEY_ACTIONS:
                self._decide(client, f"{who}(via {call.service})", statements, action, key.arn, context, call,
                             refuse=functools.partial(sse_kms.refusal, client, call.operation, call.service,
                                                      "denied"))
        self._sse_reuse[(who, address)] = self.now_ms() + key.reuse_seconds * 1000

    def _check_kms(self, client, call: _Call) -> None:
        if call.operation not in KMS_CRYPTO_OPERATIONS:
            return
        if self.ledger.count_kms(call.second) > self.limits.kms_per_second:
            raise _error(client, call.operation, "ThrottlingException",
                         "You have exceeded the rate at which you may call KMS. Reduce the frequency of your calls.",
                         400)


def _moto_ciphertext_key(blob: Any) -> str | None:
    # The emulator's ciphertext starts with the key id (moto's own format; AWS's is opaque).
    raw = _raw_bytes(blob) if not isinstance(blob, (bytes, bytearray)) else bytes(blob)
    try:
        text = raw[:36].decode("ascii")
    except UnicodeDecodeError:
        return None
    return text if re.fullmatch(r"[0-9a-f-]{36}", text) else None
