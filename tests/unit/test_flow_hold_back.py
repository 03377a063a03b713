"""Hold-back without a poll storm (issue 28, item 3): a held execution comes back after a delay
that grows with how long it has been held, up to a bound, and a crowd held at the same instant
spreads out instead of retrying together every second."""
import random
from collections import Counter
from types import SimpleNamespace

from jobsched.domain.clock import FakeClock
from jobsched.domain.executions import Dispatch, DispatchKind
from jobsched.domain.jobs import FlowControl, Job, JobSpec, JobState, Target, TargetType
from jobsched.domain.schedule import one_time_schedule
from jobsched.service.flow import HOLD_MAX_MS, FlowGate

START_MS = 1_700_000_000_000


class SentLater:
    def __init__(self) -> None:
        self.sent = []

    def send(self, outgoing) -> int:
        self.sent.extend(outgoing)
        return 1


def held_job() -> Job:
    spec = JobSpec(name="h", schedule=one_time_schedule(START_MS),
                   target=Target(TargetType.HTTP, {"url": "https://example.com/h", "method": "POST"}),
                   flow_control=FlowControl("partner", max_concurrency=1))
    return Job("tenant-a", "job_000000000001" + "0" * 20, spec, JobState.ACTIVE, 1, 1, START_MS, START_MS)


def rounds_held(gate, lanes, clock, job, dispatch, until_ms: int) -> list[int]:
    """Hold one execution back again each time it comes back, until `until_ms`: its visible times."""
    times = []
    while True:
        gate.hold_back(job, dispatch)
        out = lanes.sent[-1]
        if out.visible_at_ms > until_ms:
            return times
        times.append(out.visible_at_ms)
        clock.set_ms(out.visible_at_ms)
        dispatch = out.dispatch


def test_a_held_execution_backs_off_instead_of_coming_back_every_second():
    clock, lanes = FakeClock(START_MS), SentLater()
    gate = FlowGate(SimpleNamespace(flow=None, jobs=None, lanes=lanes), clock, random.Random(5).random)
    job = held_job()
    dispatch = Dispatch(DispatchKind.FIRE, job.tenant_id, job.job_id, f"{job.job_id}.{START_MS}", START_MS, 1)
    times = rounds_held(gate, lanes, clock, job, dispatch, START_MS + 3_600_000)
    # An hour held: about 140 rounds at the bound (22 to 30 s), not 3,200 at one a second
    assert len(times) <= 180, len(times)
    gaps = [b - a for a, b in zip([START_MS] + times, times)]
    assert gaps[0] >= 1_000 and max(gaps) <= HOLD_MAX_MS
    assert all(d.dispatch.throttled_from_ms == START_MS for d in lanes.sent)  # throttledMs counts from the first


def test_a_crowd_held_together_spreads_out():
    lanes, unit_random = SentLater(), random.Random(9).random
    job = held_job()
    crowd = [Dispatch(DispatchKind.BACKFILL, job.tenant_id, job.job_id, f"{job.job_id}.{n}", n, 1) for n in range(200)]
    # Held at the same instant, each held again whenever it comes back: where is each after 8 rounds?
    fifth = []
    for dispatch in crowd:
        clock = FakeClock(START_MS)
        gate = FlowGate(SimpleNamespace(flow=None, jobs=None, lanes=lanes), clock, unit_random)
        fifth.append(rounds_held(gate, lanes, clock, job, dispatch, START_MS + 3_600_000)[7])
    per_second = Counter(t // 1000 for t in fifth)
    # 200 back within one second every second would be 200 failed writes a second on one key
    assert max(per_second.values()) <= 20, per_second.most_common(3)
