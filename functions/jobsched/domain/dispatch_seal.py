"""Sealed dispatches: the worker runs only what the scheduler itself sent.

A lane message is the dispatch's JSON with an HMAC-SHA256 over it, keyed with a secret that only
the stack's functions can read. A message anyone else put on a lane (a tenant's SQS target aimed
at a lane, with a forged dispatch naming another tenant's job) has no valid seal and is dropped."""
from __future__ import annotations

import hashlib
import hmac
import json

from jobsched.domain.executions import Dispatch
from jobsched.domain.packs import Pack


class ForgedDispatch(ValueError):
    """A lane message without a valid seal: not sent by the scheduler."""


class DispatchSeal:
    def __init__(self, key: bytes) -> None:
        if len(key) < 32:
            raise ValueError("a dispatch key has at least 32 bytes")
        self._key = key

    def _mac(self, body: str) -> str:
        return hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()

    def seal(self, dispatch: Dispatch) -> str:
        return self.seal_text(dispatch.to_json())

    def seal_text(self, body: str) -> str:
        return json.dumps({"d": body, "mac": self._mac(body)}, separators=(",", ":"))

    def seal_pack(self, pack: Pack) -> str:
        return self.seal_text(pack.to_json())

    def open(self, message: str) -> Dispatch:
        """The one dispatch of a message this scheduler sealed (a pack of several: ValueError)."""
        pack = self.open_pack(message)
        if len(pack.entries) != 1:
            raise ValueError(f"a pack of {len(pack.entries)} entries")
        return pack.entries[0]

    def open_pack(self, message: str) -> Pack:
        """The pack (or the one dispatch) of a message this scheduler sealed; ForgedDispatch for
        anything else. Raises ValueError (not ForgedDispatch) only for what is not JSON at all."""
        envelope = json.loads(message)
        body = envelope.get("d") if isinstance(envelope, dict) else None
        mac = envelope.get("mac") if isinstance(envelope, dict) else None
        if not isinstance(body, str) or not isinstance(mac, str):
            raise ForgedDispatch("no seal")
        if not hmac.compare_digest(mac, self._mac(body)):
            raise ForgedDispatch("a seal that does not match")
        return Pack.from_json(body)
