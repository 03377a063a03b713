"""SQS SendMessageBatch entries reported Failed (issue 28, item 12): retried with growing,
jittered waits as DynamoDB's unprocessed batches are, not once at once; an entry refused as the
sender's fault is not retried."""
import pytest

from jobsched.domain.clock import FakeClock
from jobsched.domain.executions import Dispatch, DispatchKind
from jobsched.domain.jobs import Priority
from jobsched.store.queues import SEND_RETRIES, LaneQueues, Outgoing, SendFailed

URLS = {p: f"https://sqs.us-east-1.amazonaws.com/123456789012/{p.value.lower()}" for p in Priority}


class ThrottledQueue:
    """A queue that reports every entry Failed (as a throttled or unavailable queue does) for its
    first `failing` calls, noting the clock at each call."""

    def __init__(self, clock, failing: int, sender_fault: bool = False) -> None:
        self.clock, self.failing, self.sender_fault = clock, failing, sender_fault
        self.calls_at: list[int] = []

    def send_message_batch(self, QueueUrl, Entries):  # noqa: N803 - boto3's names
        self.calls_at.append(self.clock.now_ms())
        if len(self.calls_at) <= self.failing:
            return {"Successful": [], "Failed": [{"Id": e["Id"], "SenderFault": self.sender_fault,
                                                  "Code": "InternalError" if not self.sender_fault else "InvalidParameterValue",
                                                  "Message": "try again"} for e in Entries]}
        return {"Successful": [{"Id": e["Id"], "MessageId": "m"} for e in Entries], "Failed": []}


def outgoing(n: int) -> list[Outgoing]:
    return [Outgoing(Priority.NORMAL, Dispatch(DispatchKind.FIRE, "t", "job_x", f"job_x.{i}", i, 1), 0) for i in range(n)]


def lanes(queue, clock) -> LaneQueues:
    return LaneQueues(queue, URLS, clock, lambda: b"k" * 32, unit_random=lambda: 1.0)


def test_failed_entries_are_sent_again_after_growing_waits():
    clock = FakeClock(1_700_000_000_000)
    queue = ThrottledQueue(clock, failing=3)
    lanes(queue, clock).send(outgoing(10))
    assert len(queue.calls_at) == 4  # three throttled answers, then accepted
    waits = [b - a for a, b in zip(queue.calls_at, queue.calls_at[1:])]
    assert waits[0] > 0 and waits == sorted(waits) and waits[-1] > waits[0]


def test_failed_entries_that_never_go_through_fail_the_send_after_bounded_tries():
    clock = FakeClock(1_700_000_000_000)
    queue = ThrottledQueue(clock, failing=10_000)
    with pytest.raises(SendFailed):
        lanes(queue, clock).send(outgoing(3))
    assert len(queue.calls_at) == SEND_RETRIES + 1


def test_entries_refused_as_the_senders_fault_are_not_sent_again():
    clock = FakeClock(1_700_000_000_000)
    queue = ThrottledQueue(clock, failing=1, sender_fault=True)
    with pytest.raises(SendFailed, match="InvalidParameterValue"):
        lanes(queue, clock).send(outgoing(3))
    assert len(queue.calls_at) == 1


class SlowPartlyFailingQueue:
    """Fails entry "0" of its first call (not the sender's fault), answering 3 s later; notes the
    entries of each call."""

    def __init__(self, clock) -> None:
        self.clock = clock
        self.calls: list[list[dict]] = []

    def send_message_batch(self, QueueUrl, Entries):  # noqa: N803 - boto3's names
        self.calls.append(Entries)
        if len(self.calls) == 1:
            self.clock.advance_ms(3_000)
            return {"Successful": [{"Id": e["Id"], "MessageId": "m"} for e in Entries if e["Id"] != "0"],
                    "Failed": [{"Id": "0", "SenderFault": False, "Code": "InternalError", "Message": "again"}]}
        return {"Successful": [{"Id": e["Id"], "MessageId": "m"} for e in Entries], "Failed": []}


def test_an_entry_sent_again_later_gets_its_delay_from_its_due_instant_at_that_try():
    clock = FakeClock(1_700_000_000_000)
    queue = SlowPartlyFailingQueue(clock)
    due = clock.now_ms() + 60_000
    # Two due seconds: two packs, two messages.
    sent = [Outgoing(Priority.NORMAL, Dispatch(DispatchKind.FIRE, "t", "job_x", f"job_x.{i}", i * 1000, 1), due)
            for i in range(2)]
    lanes(queue, clock).send(sent)
    assert [e["DelaySeconds"] for e in queue.calls[0]] == [60, 60]
    assert [(e["Id"], e["DelaySeconds"]) for e in queue.calls[1]] == [("0", 57)]
    assert queue.calls[1][0]["MessageBody"] == queue.calls[0][0]["MessageBody"]
