"""Signed calls, as the Standard Webhooks specification defines them: every HTTP target call of a
tenant that has a signing secret carries `webhook-id: <executionId>:<attempt>`,
`webhook-timestamp: <unix seconds>` and `webhook-signature: v1,<base64 HMAC-SHA256 over
"<id>.<timestamp>.<raw body>">`, one entry per secret in use (space-separated: the current one,
and the previous one while a rotation is in grace). Signing the id binds the signature to the
execution and attempt, so a captured call cannot be replayed as another execution's.
The round-2 header `X-Jobsched-Signature: t=<t>,v1=<hex>` is still sent beside them (deprecated).

A secret is shown once, when it is made (`POST /v1/signing-secrets/rotate`), as `whsec_<base64>`,
and kept encrypted under the stack's KMS key (store/signing.py); it is never logged nor returned
again. Before each call the worker reads one copy of the tenant's sealed secrets (strongly
consistent: a rotation takes effect for the next call) and opens them from a cache keyed by
tenant and ciphertext (a ciphertext never changes), so KMS is called only when a container meets a
ciphertext it has not opened yet, never for a previous secret whose grace has ended, and at most
DECRYPT_BURST at once and DECRYPT_PER_SECOND after that per container."""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import random
import re
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass

from jobsched.domain.clock import Clock
from jobsched.domain.errors import UnprocessableRequest
from jobsched.store.signing import COPIES, SealedSecrets, SigningUnavailable

__all__ = ["SigningUnavailable", "SigningSecrets", "Rotation", "standard_headers", "signature_header",
           "SIGNED_CALL_HEADERS"]

SIGNATURE_HEADER = "X-Jobsched-Signature"  # round 2's, deprecated: sent until v2
SIGNED_CALL_HEADERS = frozenset({"webhook-id", "webhook-timestamp", "webhook-signature"})
DEFAULT_GRACE_SEC = 86_400
MAX_GRACE_SEC = 7 * 86_400
SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32  # the specification asks for 24 to 64 random bytes
# A tenant whose secret was made before copies existed has only the record: it is read at most
# once a minute per container (nothing newer can hide there: every rotation writes the copies).
RECORD_TTL_MS = 60_000
# Opened secrets kept per container: two per signing tenant a container serves.
OPENED_MAX = 4096
# KMS Decrypts per container: a burst for a cold container's first batch (10 records, each up
# to two secrets), then a steady rate. Bounded this way the account's Decrypt rate stays below
# its 10,000/s quota whatever the tenants do (docs/architecture.md, "Signed calls").
DECRYPT_BURST = 20
DECRYPT_PER_SECOND = 2
_STANDARD_SECRET = re.compile(r"whsec_([A-Za-z0-9+/]{32,88}={0,2})")


def signing_key(secret: str) -> bytes | None:
    """The HMAC key of a `whsec_<base64>` secret; None for a round-2 secret (another shape),
    which signs only the deprecated header until the tenant rotates."""
    match = _STANDARD_SECRET.fullmatch(secret)
    if not match:
        return None
    try:
        return base64.b64decode(match.group(1), validate=True)
    except binascii.Error:
        return None


def standard_headers(secrets_in_use: list[str], message_id: str, unix_seconds: int, body: bytes) -> dict[str, str]:
    """Standard Webhooks headers: one `v1,<base64>` per secret in use, the current one first."""
    signed = f"{message_id}.{unix_seconds}.".encode() + body
    keys = [k for k in (signing_key(s) for s in secrets_in_use) if k]
    if not keys:
        return {}
    entries = [f"v1,{base64.b64encode(hmac.new(k, signed, hashlib.sha256).digest()).decode()}" for k in keys]
    return {"webhook-id": message_id, "webhook-timestamp": str(unix_seconds), "webhook-signature": " ".join(entries)}


def signature_header(secrets_in_use: list[str], unix_seconds: int, body: bytes) -> str:
    """The deprecated round-2 header: one v1= hex entry per secret (the secret's text is the key)."""
    signed = f"{unix_seconds}.".encode() + body
    entries = [f"v1={hmac.new(s.encode(), signed, hashlib.sha256).hexdigest()}" for s in secrets_in_use]
    return ",".join([f"t={unix_seconds}", *entries])


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


@dataclass(frozen=True)
class Rotation:
    secret: str
    created_ms: int
    previous_valid_until_ms: int | None


class _DecryptBudget:
    """A token bucket on the container's KMS Decrypts."""

    def __init__(self, burst: int, per_second: float, now_ms: int) -> None:
        self._burst = burst
        self._per_ms = per_second / 1000
        self._tokens = float(burst)
        self._at_ms = now_ms

    def take(self, now_ms: int) -> bool:
        self._tokens = min(self._burst, self._tokens + max(0, now_ms - self._at_ms) * self._per_ms)
        self._at_ms = max(self._at_ms, now_ms)
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True


class SigningSecrets:
    def __init__(self, store, clock: Clock, pick_copy=None) -> None:
        self._store = store
        self._clock = clock
        self._pick_copy = pick_copy or (lambda: random.randrange(COPIES))
        self._opened: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._records: dict[str, tuple[int, SealedSecrets | None]] = {}
        self._lock = threading.Lock()
        self._decrypting = threading.Lock()
        self._budget = _DecryptBudget(DECRYPT_BURST, DECRYPT_PER_SECOND, clock.now_ms())
        self.decrypts = 0

    def rotate(self, tenant_id: str, grace_sec: int = DEFAULT_GRACE_SEC) -> Rotation:
        """A new secret; the one it replaces keeps signing for `grace_sec` (0: revoked at once)."""
        if not 0 <= grace_sec <= MAX_GRACE_SEC:
            raise UnprocessableRequest.for_field("graceSec", f"must be 0..{MAX_GRACE_SEC}")
        now = self._clock.now_ms()
        secret = new_secret()
        had_previous = self._store.rotate(tenant_id, secret, now, now + grace_sec * 1000)
        return Rotation(secret, now, now + grace_sec * 1000 if had_previous else None)

    def in_use(self, tenant_id: str) -> list[str]:
        """The secrets that sign a call now (current first; the previous one while in grace);
        empty if the tenant has none. Raises SigningUnavailable."""
        sealed = self._store.read_copy(tenant_id, self._pick_copy())
        if sealed is None:
            sealed = self._record(tenant_id)
        if sealed is None:
            return []
        now = self._clock.now_ms()
        in_use = [sealed.current]
        # A previous secret past its grace is never opened (nor decrypted): it signs nothing.
        if sealed.previous and sealed.previous_until_ms is not None and sealed.previous_until_ms > now:
            in_use.append(sealed.previous)
        return [self._open(tenant_id, s) for s in in_use]

    def _record(self, tenant_id: str) -> SealedSecrets | None:
        now = self._clock.now_ms()
        with self._lock:
            cached = self._records.get(tenant_id)
        if cached is not None and cached[0] > now:
            return cached[1]
        sealed = self._store.read_record(tenant_id)
        with self._lock:
            self._records[tenant_id] = (now + RECORD_TTL_MS, sealed)
        return sealed

    def _open(self, tenant_id: str, sealed: str) -> str:
        # Keyed by tenant too: KMS checks the tenant in the encryption context on Decrypt, and a
        # cache hit must not skip that check for a ciphertext found under another tenant.
        key = (tenant_id, sealed)
        with self._lock:
            if key in self._opened:
                self._opened.move_to_end(key)
                return self._opened[key]
        with self._decrypting:  # one Decrypt per ciphertext even when a batch's threads meet it at once
            with self._lock:
                if key in self._opened:
                    return self._opened[key]
            if not sealed.startswith("plain:"):
                if not self._budget.take(self._clock.now_ms()):
                    raise SigningUnavailable("this container's KMS Decrypt budget is spent for now")
                self.decrypts += 1
            secret = self._store.open(tenant_id, sealed)
            with self._lock:
                self._opened[key] = secret
                while len(self._opened) > OPENED_MAX:
                    self._opened.popitem(last=False)
        return secret
