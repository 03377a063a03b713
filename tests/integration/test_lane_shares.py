"""Lane shares (issue 26, item 4): a slow or hung partner of one tenant delays only its own jobs.

Twelve jobs of tenant A aimed at a partner that answers after 60 s, triggered together with one
job of tenant B, used to fill every container of the lane (the local stack's 8) and make B's job
52 s late. The lane is modelled over the real handlers on a fake clock (bench/lanes.py): a
container runs one invocation at a time, and the slow partner's calls hold theirs."""
import threading

from bench.lanes import FAST_URL, SLOW_URL, run
from jobsched.domain.executions import Dispatch, DispatchKind
from jobsched.domain.jobs import Priority
from jobsched.domain.lane_shares import format_caps, share_of
from jobsched.handlers import worker as worker_handler
from jobsched.local.events import Function, sqs_event
from jobsched.service.lane_shares import LaneGate, slot_lease
from jobsched.settings import Env
from jobsched.store.flow import LANE_HOST_SPACE, LANE_TENANT_SPACE

from .harness import KEY_A, KEY_B, TENANT_A, TENANT_B

LANE_ARN = "arn:aws:sqs:us-east-1:123456789012:lane-normal"
CAPS = {Priority.NORMAL: 8, Priority.HIGH: 8, Priority.LOW: 8}


def deployed_percent(harness) -> int:
    """The share the stack deploys (CDK context laneTenantPercent and laneHostPercent)."""
    worker_env = harness.envs["worker"]
    assert worker_env[Env.LANE_TENANT_PERCENT] == worker_env[Env.LANE_HOST_PERCENT] == "50"
    return 50


def test_a_tenants_slow_partner_does_not_make_another_tenants_job_late(harness):
    # Given a lane of 8 containers under the stack's lane shares (4 containers per tenant and per host)
    # When A's 12 jobs on a partner answering after 60 s and B's job are triggered together
    figures = run(harness, KEY_A, KEY_B, containers=8, slow_jobs=12, slow_s=60, percent=deployed_percent(harness),
                  horizon_s=600)
    # Then B's job is called within a second of its trigger
    assert figures.b_late_ms is not None and figures.b_late_ms <= 1_000, figures
    # and A's jobs wait for their own share: every one succeeds on its first attempt (a record held
    # back uses none), four at a time
    assert figures.a_succeeded == 12 and figures.a_attempts == 12, figures
    assert figures.a_held >= 8, figures
    assert figures.a_done_s is not None and figures.a_done_s >= 180, figures


def test_without_lane_shares_the_slow_partner_stalls_the_lane(harness):
    # The model reproduces the issue: with no bound, A's calls hold all 8 containers for 60 s.
    figures = run(harness, KEY_A, KEY_B, containers=8, slow_jobs=12, slow_s=60, percent=0, horizon_s=300)
    assert figures.b_late_ms is not None and figures.b_late_ms >= 50_000, figures
    assert figures.a_succeeded == 12 and figures.a_held == 0, figures


def _batch(harness, spec: list[tuple[str, str]]) -> list[dict]:
    """One message per (key, url): a triggered job each, received from the NORMAL lane."""
    for n, (key, url) in enumerate(spec):
        status, job = harness.request("POST", "/v1/jobs", {"name": f"j{n}", "type": "DELAYED", "delaySeconds": 86_400,
                                                           "target": {"type": "HTTP", "url": url}}, key)
        assert status == 201, job
        status, _ = harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger", key=key)
        assert status == 202
    url = harness.envs["worker"][Env.LANE_URL[Priority.NORMAL]]
    messages = []
    while batch := harness.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        messages += batch
    assert len(messages) == len(spec)
    return messages


def _container(harness, percent: int = 50):
    env = {**harness.envs["worker"], Env.LANE_CAPS: format_caps({p.value: c for p, c in CAPS.items()}),
           Env.LANE_TENANT_PERCENT: str(percent), Env.LANE_HOST_PERCENT: str(percent)}
    return Function("worker", worker_handler.make_handler(env, harness.clock, harness.session, harness.target))


def _job(harness, tenant: str, url: str):
    from jobsched.domain.jobs import Job, JobSpec, JobState, Target, TargetType
    from jobsched.domain.schedule import one_time_schedule

    spec = JobSpec(name="x", schedule=one_time_schedule(harness.clock.now_ms()),
                   target=Target(TargetType.HTTP, {"url": url}))
    return Job(tenant, "job_" + "0" * 32, spec, JobState.ACTIVE, 1, 1, 0, 0)


def test_records_of_a_saturated_tenant_leave_a_mixed_batch_at_once_and_the_others_run(harness):
    # Given A's whole share held by four other containers (their slow calls in flight)
    others = [LaneGate(harness.stores.flow, harness.clock, CAPS, 50, 50, f"other{n}") for n in range(4)]
    held = [gate.admit(_job(harness, TENANT_A, SLOW_URL), harness.clock.now_ms() + 120_000) for gate in others]
    assert all(held)
    messages = _batch(harness, [(KEY_A, SLOW_URL)] * 9 + [(KEY_B, FAST_URL)])
    # When a batch of nine records of A and one of B reaches a container
    result = _container(harness).invoke(sqs_event(messages, LANE_ARN))
    # Then B's record runs, A's nine are not called (they would hold the invocation) and are
    # handed back for later without an attempt: sent again with a delay, and reported done (no
    # batch item failure), so their messages are deleted and never count toward maxReceiveCount
    assert result == {"batchItemFailures": []}
    called = {c.job_id for c in harness.target.calls}
    assert len(called) == 1
    assert harness.stores.jobs.get(TENANT_B, next(iter(called)), consistent=True) is not None
    url = harness.envs["worker"][Env.LANE_URL[Priority.NORMAL]]
    attrs = harness.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert int(attrs["ApproximateNumberOfMessagesDelayed"]) == 9


def test_a_container_takes_one_slot_for_all_its_attempts_of_a_tenant_and_gives_it_back(harness):
    # Given a container that has run one record of the tenant (its slot maps exist: a map's
    # first slot costs a failed take and its creation; the container, which ran that tenant and
    # host alone, keeps the slots: service/lane_shares.py LINGER_MS), and a batch of ten more, all
    # to one host
    container = _container(harness)
    assert container.invoke(sqs_event(_batch(harness, [(KEY_A, FAST_URL)]), LANE_ARN)) == {"batchItemFailures": []}
    messages = _batch(harness, [(KEY_A, FAST_URL)] * 10)
    before = _lane_units(harness)
    # The batch's attempts run at once, each in its thread, and in AWS the due second's wait keeps
    # them together; here the fake clock's wait is none, and on a loaded machine a thread could
    # start after another had ended and take the slot again (a take it rightly pays): the calls
    # meet before any ends, so every attempt holds its slots while the others do.
    together = threading.Barrier(10, timeout=30)
    call = harness.target.invoke

    def meeting(*args, **kwargs):
        together.wait()
        return call(*args, **kwargs)

    harness.target.invoke = meeting
    # When the container runs the batch
    assert container.invoke(sqs_event(messages, LANE_ARN)) == {"batchItemFailures": []}
    harness.target.invoke = call
    # Then all ten ran on the slots it kept: no write for either bound (tenant, host)
    assert len(harness.target.calls) == 11
    assert _lane_units(harness) - before == 0
    limit = share_of(8, 50)
    bounds = ((LANE_TENANT_SPACE, TENANT_A), (LANE_HOST_SPACE, "fast.other.test:80"))
    for space, owner in bounds:
        held = [harness.stores.flow.held("NORMAL", owner, shard, space) for shard in range(limit)]
        assert sum(len(h) for h in held) == 1, space  # this container's one slot, no attempt in flight
    # and when the container runs another tenant's record, towards another host, it gives them back
    assert container.invoke(sqs_event(_batch(harness, [(KEY_B, SLOW_URL)]), LANE_ARN)) == {"batchItemFailures": []}
    for space, owner in bounds:
        assert all(harness.stores.flow.held("NORMAL", owner, shard, space) == {} for shard in range(limit)), space


def test_a_held_slot_is_not_written_again_for_each_later_attempt_within_its_minute(harness):
    # Given a container holding A's slot for an attempt leased until some instant
    gate = LaneGate(harness.stores.flow, harness.clock, {Priority.NORMAL: 8}, 50, 0, "one")
    lease = (harness.clock.now_ms() // 60_000 + 2) * 60_000 + 1
    first = gate.admit(_job(harness, TENANT_A, SLOW_URL), lease)
    assert first is not None
    units = _lane_units(harness)
    # When more attempts start, each a little later (records due at other sub-second instants)
    later = [gate.admit(_job(harness, TENANT_A, SLOW_URL), lease + step) for step in (250, 500, 59_998)]
    # Then none of them writes: the slot's lease is already on the minute that covers them
    assert all(admission is not None for admission in later)
    assert _lane_units(harness) == units
    # and one that outlasts that minute extends it once
    assert gate.admit(_job(harness, TENANT_A, SLOW_URL), lease + 60_000) is not None
    assert _lane_units(harness) == units + 1
    assert harness.stores.flow.held("NORMAL", TENANT_A, 0, LANE_TENANT_SPACE) == {"one": slot_lease(lease + 60_000)}


def test_a_slot_of_a_container_that_died_comes_back_after_its_lease(harness):
    # Given a lane of 2 (share 1) whose one slot for A is held by a container that then died
    caps = {Priority.NORMAL: 2}
    dead = LaneGate(harness.stores.flow, harness.clock, caps, 50, 0, "dead")
    lease = harness.clock.now_ms() + 90_000
    assert dead.admit(_job(harness, TENANT_A, SLOW_URL), lease) is not None
    alive = LaneGate(harness.stores.flow, harness.clock, caps, 50, 0, "alive")
    # Then another container is held back while the lease lasts, and admitted once it has ended
    assert alive.admit(_job(harness, TENANT_A, SLOW_URL), lease + 90_000) is None
    # (the slot's lease is the attempt's, rounded up to the minute: no write for each new record)
    assert harness.stores.flow.held("NORMAL", TENANT_A, 0, LANE_TENANT_SPACE) == {"dead": slot_lease(lease)}
    harness.clock.set_ms(slot_lease(lease) + 1)
    admitted = alive.admit(_job(harness, TENANT_A, SLOW_URL), lease + 90_000)
    assert admitted is not None
    # and another tenant is never held back by A's slot
    assert alive.admit(_job(harness, TENANT_B, SLOW_URL), lease + 90_000) is not None


def _lane_units(harness) -> float:
    return sum(use.write_units for key, use in harness.strict.report().hottest
               if "lanetenant#" in key or "lanehost#" in key)


class _RacedTable:
    """The store's table, with another container making the shard's slot map between this
    container's failed take and its own creation of the map (the race of two first takers)."""

    def __init__(self, table, racer: str, lease: int) -> None:
        self._table, self._racer, self._lease, self.raced = table, racer, lease, False

    def update_item(self, **kwargs):
        if kwargs.get("UpdateExpression") == "SET slots = :one" and not self.raced:
            self.raced = True
            self._table.update_item(Key=kwargs["Key"], UpdateExpression="SET slots = :one",
                                    ConditionExpression="attribute_not_exists(slots)",
                                    ExpressionAttributeValues={":one": {self._racer: self._lease}})
        return self._table.update_item(**kwargs)

    def __getattr__(self, name):
        return getattr(self._table, name)


def test_a_taker_that_loses_the_race_to_make_a_slot_map_takes_its_slot_in_it(harness):
    # Given a shard with no slot map yet, made by another container between our take and our creation
    flow = harness.stores.flow
    lease = harness.clock.now_ms() + 90_000
    raced = _RacedTable(flow._table, "racer", lease)
    flow._table = raced
    # When we take a slot with room for two
    taken = flow.take_slot("NORMAL", TENANT_A, 0, "us", 2, lease, space=LANE_TENANT_SPACE)
    # Then we hold one beside the racer's, not "full" (that held the record back behind a map with room)
    assert raced.raced and taken.outcome == "new"
    assert flow.held("NORMAL", TENANT_A, 0, LANE_TENANT_SPACE) == {"racer": lease, "us": lease}
