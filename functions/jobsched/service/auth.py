"""API keys: stored hashed, never in plain text; a key decides the tenant."""
from __future__ import annotations

import hashlib
import secrets

from jobsched.domain.clock import Clock
from jobsched.domain.errors import ConditionLost, Unauthorized

KEY_PREFIX = "jsk_"
# A revoked key may keep working in a warm container for at most this long.
CACHE_TTL_MS = 60_000
# A key that is not valid is remembered this briefly (a new key works within seconds), so a
# client retrying with a bad key costs no read per request; the cache holds at most CACHE_SIZE
# keys (the oldest entries go first), so random keys cannot grow it without bound.
NEGATIVE_TTL_MS = 5_000
CACHE_SIZE = 10_000


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_api_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


class Authenticator:
    """`ttl_ms`: how long a valid key's tenant is remembered (the authorizer remembers none: API
    Gateway caches its answers, and two caches in a row would keep a revoked key working twice as long)."""

    def __init__(self, api_keys, clock: Clock, ttl_ms: int = CACHE_TTL_MS) -> None:
        self._keys = api_keys
        self._clock = clock
        self._ttl_ms = ttl_ms
        self._cache: dict[str, tuple[str | None, int]] = {}

    def tenant_for(self, authorization: str | None) -> str:
        scheme, _, key = (authorization or "").strip().partition(" ")
        key = key.strip()
        if scheme.lower() != "bearer" or not key:
            raise Unauthorized("send 'Authorization: Bearer <api key>'")
        digest = hash_key(key)
        now = self._clock.now_ms()
        cached = self._cache.get(digest)
        if cached and cached[1] > now:
            tenant = cached[0]
        else:
            tenant = self._keys.tenant_for(digest)
            self._remember(digest, tenant, now + (self._ttl_ms if tenant is not None else NEGATIVE_TTL_MS))
        if tenant is None:
            raise Unauthorized("the API key is not valid")
        return tenant

    def _remember(self, digest: str, tenant: str | None, until_ms: int) -> None:
        self._cache.pop(digest, None)
        while len(self._cache) >= CACHE_SIZE:
            self._cache.pop(next(iter(self._cache)))  # insertion order: the oldest entry
        self._cache[digest] = (tenant, until_ms)


class ApiKeys:
    def __init__(self, api_keys, clock: Clock) -> None:
        self._keys = api_keys
        self._clock = clock

    def register(self, tenant_id: str, key: str) -> str:
        """Store a key (hashed) for a tenant; registering the same key again is a no-op.
        Returns the key id, a short public handle (the hash's prefix) for listing and revoking."""
        digest = hash_key(key)
        key_id = "key_" + digest[:12]
        try:
            self._keys.put(digest, tenant_id, key_id, self._clock.now_ms())
        except ConditionLost:
            if self._keys.tenant_for(digest) != tenant_id:
                raise ValueError("that key already belongs to another tenant") from None
        return key_id

    def issue(self, tenant_id: str) -> tuple[str, str]:
        key = new_api_key()
        return self.register(tenant_id, key), key
