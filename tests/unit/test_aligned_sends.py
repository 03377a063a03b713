"""Aligned sends (docs/architecture.md, "Aligned sends"): a small hand-off's messages go out just
before a whole number of seconds ahead of their instants, so SQS makes each visible about
ALIGN_EARLY_MS before it (instead of up to a second before, the worker waiting out the rest); none
ever later than its instant, and only when the worker's wait saved outweighs the sender's."""
import random

from jobsched.domain.clock import FakeClock
from jobsched.domain.executions import Dispatch, DispatchKind
from jobsched.domain.jobs import Priority
from jobsched.service.tick import ALIGN_COST
from jobsched.store.queues import (ALIGN_EARLY_MS, ALIGN_MAX_MESSAGES, ALIGN_WINDOW_MS, SQS_BATCH, LaneQueues,
                                   Outgoing, aligned_plan, delay_seconds, send_plan)

URLS = {p: f"https://sqs.us-east-1.amazonaws.com/123456789012/{p.value.lower()}" for p in Priority}
NOW = 1_700_000_040_370  # 370 ms into a second, as a tick run starts at any instant


class RecordingQueue:
    """Accepts every entry, noting each message's visible instant (the clock at the call plus its
    whole-second delay, as SQS counts it from its receipt) and its body."""

    def __init__(self, clock) -> None:
        self.clock = clock
        self.calls = 0
        self.visible: dict[str, int] = {}  # body -> visible at

    def send_message_batch(self, QueueUrl, Entries):  # noqa: N803 - boto3's names
        self.calls += 1
        now = self.clock.now_ms()
        for e in Entries:
            self.visible[e["MessageBody"]] = now + e["DelaySeconds"] * 1000
        return {"Successful": [{"Id": e["Id"], "MessageId": "m"} for e in Entries], "Failed": []}


def fires(dues: list[int]) -> list[Outgoing]:
    """One-dispatch messages (RETRY: not packed), each visible at its due instant."""
    return [Outgoing(Priority.NORMAL, Dispatch(DispatchKind.RETRY, "t", f"job_{i}", f"job_{i}.{due}", due, 1, 2), due)
            for i, due in enumerate(dues)]


def sent(dues: list[int], align_cost: float | None, now: int = NOW):
    clock = FakeClock(now)
    queue = RecordingQueue(clock)
    lanes = LaneQueues(queue, URLS, clock, lambda: b"k" * 32)
    lanes.send(fires(dues), align_cost=align_cost)
    seal = lanes.seal
    return {seal.open(body).due_ms: at for body, at in queue.visible.items()}, clock.now_ms() - now, queue.calls


def test_a_small_hand_off_on_whole_seconds_surfaces_just_before_each_instant():
    dues = [NOW - 370 + 120_000 + k * 4_000 for k in range(15)]  # whole seconds, two minutes ahead
    visible, waited, calls = sent(dues, ALIGN_COST)
    assert {due - at for due, at in visible.items()} == {ALIGN_EARLY_MS}
    assert waited == 1000 - 370 - ALIGN_EARLY_MS and calls == 2  # one wait, the batches as before
    # Sent as they come, they surfaced 630 ms early (the worker holding its invocation meanwhile)
    visible, waited, calls = sent(dues, None)
    assert {due - at for due, at in visible.items()} == {630} and waited == 0 and calls == 2


def test_no_message_surfaces_after_its_instant_nor_more_than_a_second_before_it():
    rng = random.Random(7)
    for _ in range(300):
        now = 1_700_000_000_000 + rng.randrange(1000)
        dues = [now + rng.choice([-500, 0, 30, ALIGN_EARLY_MS - 1, ALIGN_EARLY_MS, 999, 1_000, 1_099])
                + (rng.randrange(180_000) if rng.random() < 0.5 else 0) for _ in range(rng.randrange(1, 30))]
        plan = send_plan([("u", due) for due in dues], now)
        for start, members in plan:
            assert 0 <= start < 1000 and len(members) <= SQS_BATCH
            for i in members:
                at = now + start + delay_seconds(dues[i], now + start) * 1000
                assert at <= max(dues[i], now)  # never late (one overdue or due at once: at once, as before)
                if dues[i] - now >= ALIGN_EARLY_MS:
                    assert ALIGN_EARLY_MS <= dues[i] - at <= ALIGN_EARLY_MS + ALIGN_WINDOW_MS
                else:
                    assert start == 0  # due within the margin: sent at once


def test_instants_at_any_millisecond_share_a_batch_only_within_the_window():
    rng = random.Random(3)
    dues = [NOW + 60_000 + rng.randrange(60_000) for _ in range(ALIGN_MAX_MESSAGES)]  # jittered instants
    visible, waited, calls = sent(dues, 1.0)
    assert all(ALIGN_EARLY_MS <= due - at <= ALIGN_EARLY_MS + ALIGN_WINDOW_MS for due, at in visible.items())
    assert waited < 1000 and calls >= 4


def test_a_wait_the_workers_saving_does_not_outweigh_is_not_taken():
    # Two messages save the worker 2 x 530 ms at a sixth of the tick's memory: not worth 530 ms of the tick
    dues = [NOW - 370 + 120_000, NOW - 370 + 125_000]
    visible, waited, _ = sent(dues, ALIGN_COST)
    assert waited == 0 and {due - at for due, at in visible.items()} == {630}
    assert aligned_plan([("u", d) for d in dues], NOW, ALIGN_COST) is None
    assert aligned_plan([("u", d) for d in dues], NOW, 1.0) is not None


def test_a_bucket_of_more_messages_than_a_quiet_one_is_sent_as_they_come():
    # (at a higher rate new worker environments start cold, which a message surfacing half a second
    # early on average partly hid)
    dues = [NOW - 370 + 120_000 + k * 1000 for k in range(ALIGN_MAX_MESSAGES + 1)]
    assert aligned_plan([("u", d) for d in dues], NOW, ALIGN_COST) is None
    assert aligned_plan([("u", d) for d in dues[:-1]], NOW, ALIGN_COST) is not None
