"""The local runtime's narrow fixes to the emulator answer exactly as the code they replace."""
import moto.backends
from moto.sqs.models import Message, SQSBackend

from jobsched.local import emulator


def test_the_module_list_is_the_directory_listing_once():
    listed = list(moto.backends.list_of_moto_modules())
    emulator.speed_up_moto()
    assert list(moto.backends.list_of_moto_modules()) == listed
    assert "dynamodb" in moto.backends.list_of_moto_modules() and "sqs" in moto.backends.list_of_moto_modules()


def test_retention_is_read_from_the_queue_as_before(monkeypatch):
    original = SQSBackend.is_message_valid_based_on_retention_period
    backend = SQSBackend("us-east-1", "123456789012")
    backend.create_queue("q", MessageRetentionPeriod="60")
    fresh, old = Message("m1", "body"), Message("m2", "body")
    fresh.mark_sent()
    old.mark_sent()
    old.sent_timestamp -= 61_000
    expected = [original(backend, "q", m) for m in (fresh, old)]
    emulator.speed_up_moto()
    fast = SQSBackend.is_message_valid_based_on_retention_period
    assert fast is not original or expected == [True, False]
    assert [fast(backend, "q", m) for m in (fresh, old)] == expected == [True, False]
