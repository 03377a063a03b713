"""A crowd arriving in one second at a rate-limited key (issue 28, item 3): once a container has
found the second's counters used up it does not write them again that second, so the counters
take a few failed writes per container, not one per execution."""
import random
from types import SimpleNamespace

from jobsched.domain.clock import FakeClock
from jobsched.domain.executions import Dispatch, DispatchKind
from jobsched.domain.jobs import FlowControl, Job, JobSpec, JobState, Target, TargetType
from jobsched.domain.schedule import one_time_schedule
from jobsched.service.flow import FlowGate

START_MS = 1_700_000_000_000


class Counters:
    """Rate counters with their conditions, counting the writes made."""

    def __init__(self) -> None:
        self.used: dict[tuple, int] = {}
        self.writes = 0

    def take_rate(self, tenant_id, key, second, shard, limit, expires_at) -> bool:
        self.writes += 1
        counter = (tenant_id, key, second, shard)
        if self.used.get(counter, 0) >= limit:
            return False
        self.used[counter] = self.used.get(counter, 0) + 1
        return True


def test_a_crowd_in_one_second_writes_a_used_up_counter_about_once():
    counters = Counters()
    clock = FakeClock(START_MS)
    gate = FlowGate(SimpleNamespace(flow=counters, jobs=None, lanes=None), clock, random.Random(2).random)
    spec = JobSpec(name="r", schedule=one_time_schedule(START_MS),
                   target=Target(TargetType.HTTP, {"url": "https://example.com/r", "method": "POST"}),
                   flow_control=FlowControl("partner", rate_per_second=2))
    job = Job("tenant-a", "job_000000000002" + "0" * 20, spec, JobState.ACTIVE, 1, 1, START_MS, START_MS)
    crowd = [Dispatch(DispatchKind.FIRE, job.tenant_id, job.job_id, f"{job.job_id}.{n}", n, 1) for n in range(500)]
    admitted = sum(gate.admit(job, d, START_MS + 60_000)[0] for d in crowd)
    assert admitted == 2
    assert counters.writes <= 3  # two starts and one failed condition, not 500
    clock.set_ms(START_MS + 1_000)  # the next second has its own counter
    assert gate.admit(job, crowd[0], START_MS + 60_000)[0]
