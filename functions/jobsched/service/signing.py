"""Signed calls: every HTTP target call of a tenant that has a signing secret carries
`X-Jobsched-Signature: t=<unix seconds>,v1=<hex>` (HMAC-SHA256 with the secret over
"<t>.<raw body>"); while a rotation is in grace, a second `v1=` signs with the previous secret.

A secret is shown once, when it is made (`POST /v1/signing-secrets/rotate`), and kept encrypted
under the stack's KMS key (store/signing.py); it is never logged nor returned again. A worker
container decrypts a tenant's secrets once and keeps them for SECRETS_TTL_MS (a rotation reaches
every container within that time; the previous secret keeps signing meanwhile, for its grace)."""
from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from dataclasses import dataclass

from jobsched.domain.clock import Clock
from jobsched.domain.errors import UnprocessableRequest

SIGNATURE_HEADER = "X-Jobsched-Signature"
DEFAULT_GRACE_SEC = 86_400
MAX_GRACE_SEC = 7 * 86_400
SECRETS_TTL_MS = 60_000
SECRET_PREFIX = "whsec_"


def signature_header(secrets_in_use: list[str], unix_seconds: int, body: bytes) -> str:
    """The header's value: one v1= entry per secret, the current one first."""
    signed = f"{unix_seconds}.".encode() + body
    entries = [f"v1={hmac.new(s.encode(), signed, hashlib.sha256).hexdigest()}" for s in secrets_in_use]
    return ",".join([f"t={unix_seconds}", *entries])


@dataclass(frozen=True)
class Rotation:
    secret: str
    created_ms: int
    previous_valid_until_ms: int | None


class SigningSecrets:
    def __init__(self, store, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self._cache: dict[str, tuple[int, list[str]]] = {}
        self._lock = threading.Lock()

    def rotate(self, tenant_id: str, grace_sec: int = DEFAULT_GRACE_SEC) -> Rotation:
        """A new secret; the one it replaces keeps signing for `grace_sec`."""
        if not 0 <= grace_sec <= MAX_GRACE_SEC:
            raise UnprocessableRequest.for_field("graceSec", f"must be 0..{MAX_GRACE_SEC}")
        now = self._clock.now_ms()
        secret = SECRET_PREFIX + secrets.token_urlsafe(32)
        had_previous = self._store.rotate(tenant_id, secret, now, now + grace_sec * 1000)
        return Rotation(secret, now, now + grace_sec * 1000 if had_previous else None)

    def in_use(self, tenant_id: str) -> list[str]:
        """The secrets that sign a call now (current first; the previous one while in grace);
        empty if the tenant has none."""
        now = self._clock.now_ms()
        with self._lock:
            cached = self._cache.get(tenant_id)
        if cached is not None and cached[0] > now:
            return cached[1]
        current, previous, previous_until = self._store.secrets(tenant_id)
        found = [s for s in (current,) if s]
        if previous and previous_until is not None and previous_until > now:
            found.append(previous)
        expires = now + SECRETS_TTL_MS
        if previous_until is not None and now < previous_until:
            expires = min(expires, previous_until)  # stop signing with the previous one on time
        with self._lock:
            self._cache[tenant_id] = (expires, found)
        return found
