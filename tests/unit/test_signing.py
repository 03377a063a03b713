"""Signing secrets in a worker container: KMS Decrypts are bounded by a per-container budget,
opened secrets are kept per tenant and ciphertext, and the header shapes are the specification's."""
import base64
import hashlib
import hmac

import pytest

from jobsched.domain.clock import FakeClock
from jobsched.service import signing
from jobsched.service.signing import SigningSecrets, SigningUnavailable, signing_key, standard_headers
from jobsched.store.signing import SealedSecrets


class SealedByTenant:
    """A store whose every tenant has one KMS-sealed secret of its own; counts Decrypts."""

    def __init__(self) -> None:
        self.opened: list[str] = []

    def read_copy(self, tenant_id: str, k: int):
        return SealedSecrets(1, f"kms:{tenant_id}", None, None)

    def open(self, tenant_id: str, sealed: str) -> str:
        self.opened.append(sealed)
        return f"secret of {tenant_id}"


def test_a_container_decrypts_at_most_its_burst_then_its_steady_rate():
    store, clock = SealedByTenant(), FakeClock(0)
    secrets = SigningSecrets(store, clock, pick_copy=lambda: 0)
    for n in range(signing.DECRYPT_BURST):
        assert secrets.in_use(f"t{n}") == [f"secret of t{n}"]
    with pytest.raises(SigningUnavailable):
        secrets.in_use("one-too-many")
    assert len(store.opened) == signing.DECRYPT_BURST
    assert secrets.in_use("t0") == ["secret of t0"]  # an opened secret needs no budget
    clock.advance_ms(1000 // signing.DECRYPT_PER_SECOND)
    assert secrets.in_use("one-too-many") == ["secret of one-too-many"]
    with pytest.raises(SigningUnavailable):
        secrets.in_use("and-another")


def test_the_specifications_example_signature():
    # The example of the Standard Webhooks specification (and of its reference libraries).
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    headers = standard_headers([secret], "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330,
                               b'{"test": 2432232314}')
    assert headers == {"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
                       "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}


def test_a_new_secret_is_whsec_and_32_random_bytes_and_a_round_2_secret_signs_only_the_old_header():
    secret = signing.new_secret()
    assert secret.startswith("whsec_") and len(signing_key(secret)) == 32
    legacy = "whsec_legacy-secret_made-in-round-2"
    assert signing_key(legacy) is None and standard_headers([legacy], "id", 1, b"") == {}
    header = signing.signature_header([legacy], 7, b"{}")
    assert header == "t=7,v1=" + hmac.new(legacy.encode(), b"7.{}", hashlib.sha256).hexdigest()
    assert base64.b64decode(secret[6:]) == signing_key(secret)


def test_a_secret_sealed_with_the_stacks_key_is_unavailable_not_a_crash_where_the_deployment_has_no_key():
    """A stack deployed with its KMS key sealed its tenants' secrets with it; deployed again without
    one (`-c encryption=aws-owned`), opening such a secret says signing is unavailable (the call is
    then retried, and the alarm says why) instead of failing on a missing client."""
    from types import SimpleNamespace

    import pytest

    from jobsched.store.signing import SigningSecretsStore, SigningUnavailable

    store = SigningSecretsStore(SimpleNamespace(Table=lambda name: None), "jobs")
    assert store.open("tenant-a", "plain:whsec_abc") == "whsec_abc"
    with pytest.raises(SigningUnavailable, match="encryption=kms"):
        store.open("tenant-a", "kms:AAAA")
