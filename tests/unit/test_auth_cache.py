"""The API key cache: positives for a minute, negatives for seconds, bounded in size."""
import pytest

from jobsched.domain.clock import FakeClock
from jobsched.domain.errors import Unauthorized
from jobsched.service import auth
from jobsched.service.auth import Authenticator, hash_key


class CountingKeys:
    def __init__(self, known: dict[str, str]) -> None:
        self.known = {hash_key(k): t for k, t in known.items()}
        self.reads = 0

    def tenant_for(self, digest: str):
        self.reads += 1
        return self.known.get(digest)


def test_a_bad_key_costs_one_read_per_few_seconds_not_one_per_request():
    keys, clock = CountingKeys({"good": "tenant"}), FakeClock(0)
    authenticator = Authenticator(keys, clock)
    for _ in range(50):
        with pytest.raises(Unauthorized):
            authenticator.tenant_for("Bearer bad")
    assert keys.reads == 1
    keys.known[hash_key("bad")] = "new-tenant"  # a key registered meanwhile works within seconds
    clock.advance_ms(auth.NEGATIVE_TTL_MS + 1)
    assert authenticator.tenant_for("Bearer bad") == "new-tenant"


def test_the_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(auth, "CACHE_SIZE", 100)
    keys = CountingKeys({})
    authenticator = Authenticator(keys, FakeClock(0))
    for n in range(1000):
        with pytest.raises(Unauthorized):
            authenticator.tenant_for(f"Bearer random-{n}")
    assert len(authenticator._cache) <= 100
