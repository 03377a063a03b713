"""Lane shares (issue 26, item 4): a slow or hung partner of one tenant delays only its own jobs.

Twelve jobs of tenant A aimed at a partner that answers after 60 s, triggered together with one
job of tenant B, used to fill every container of the lane (the local stack's 8) and make B's job
52 s late. The lane is modelled over the real handlers on a fake clock (bench/lanes.py): a
container runs one invocation at a time, and the slow partner's calls hold theirs."""
import threading
import time

from bench.lanes import FAST_URL, SLOW_URL, run
from jobsched.domain.executions import Dispatch, DispatchKind
from jobsched.domain.jobs import Priority
from jobsched.domain.lane_shares import format_caps, share_of
from jobsched.handlers import worker as worker_handler
from jobsched.local.events import Function, sqs_event
from jobsched.service.lane_shares import FULL_MEMO_MS, SLOT_HOLD_MS, SLOT_RENEW_MS, LaneGate, slot_lease
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


def test_a_container_takes_one_slot_for_all_its_attempts_of_a_tenant_and_its_hold_lapses_without_a_write(harness):
    # Given a container that has run one record of the tenant (its slot maps exist: a map's
    # first slot costs a failed take and its creation), with less than SLOT_RENEW_MS of that hold
    # left, and a batch of ten more, all to one host
    container = _container(harness)
    assert container.invoke(sqs_event(_batch(harness, [(KEY_A, FAST_URL)]), LANE_ARN)) == {"batchItemFailures": []}
    harness.clock.advance_ms(SLOT_HOLD_MS - SLOT_RENEW_MS + 1)
    messages = _batch(harness, [(KEY_A, FAST_URL)] * 10)
    before = _lane_units(harness)
    # The batch's attempts run at once, each in its thread, and in AWS the due second's wait keeps
    # them together; here the fake clock's wait is none: the calls meet before any ends.
    together = threading.Barrier(10, timeout=30)
    call = harness.target.invoke

    def meeting(*args, **kwargs):
        together.wait()
        return call(*args, **kwargs)

    harness.target.invoke = meeting
    # When the container runs the batch
    assert container.invoke(sqs_event(messages, LANE_ARN)) == {"batchItemFailures": []}
    # Then all ten ran, at the cost of one take per bound (tenant, host) and no give-back
    assert len(harness.target.calls) == 11
    assert _lane_units(harness) - before == 2
    # and each slot is held for SLOT_HOLD_MS from the batch's start, then lapses by itself
    hold_until = harness.clock.now_ms() + SLOT_HOLD_MS
    for space, owner in ((LANE_TENANT_SPACE, TENANT_A), (LANE_HOST_SPACE, "fast.other.test:80")):
        limit = share_of(8, 50)
        held = {k: v for shard in range(limit) for k, v in harness.stores.flow.held("NORMAL", owner, shard, space).items()}
        assert list(held.values()) == [hold_until], space
    # and a batch within the hold writes nothing at all
    harness.target.invoke = call
    again = _lane_units(harness)
    assert container.invoke(sqs_event(_batch(harness, [(KEY_A, FAST_URL)] * 3), LANE_ARN)) == {"batchItemFailures": []}
    assert _lane_units(harness) == again


def test_a_containers_hold_serves_its_later_attempts_without_a_write_until_it_nears_its_end(harness):
    # Given a container holding A's slot since an attempt started
    gate = LaneGate(harness.stores.flow, harness.clock, {Priority.NORMAL: 8}, 50, 0, "one")
    start = harness.clock.now_ms()
    lease = start + 90_000
    first = gate.admit(_job(harness, TENANT_A, SLOW_URL), lease)
    assert first is not None
    units = _lane_units(harness)
    # When more attempts start while more than SLOT_RENEW_MS of the hold is left, and end
    later = []
    for at in (start + 250, start + SLOT_HOLD_MS - SLOT_RENEW_MS):
        harness.clock.set_ms(at)
        later.append(gate.admit(_job(harness, TENANT_A, SLOW_URL), lease))
    gate.release(first)
    for admission in later:
        gate.release(admission)
    # Then none of them wrote: no take, and no give-back for a hold that lapses by itself
    assert all(admission is not None for admission in later)
    assert _lane_units(harness) == units
    assert harness.stores.flow.held("NORMAL", TENANT_A, 0, LANE_TENANT_SPACE) == {"one": start + SLOT_HOLD_MS}
    # and one that starts with less left takes it again, once
    harness.clock.set_ms(start + SLOT_HOLD_MS - SLOT_RENEW_MS + 1)
    assert gate.admit(_job(harness, TENANT_A, SLOW_URL), lease) is not None
    assert _lane_units(harness) == units + 1
    assert harness.stores.flow.held("NORMAL", TENANT_A, 0, LANE_TENANT_SPACE) == {
        "one": harness.clock.now_ms() + SLOT_HOLD_MS}


def test_a_slow_attempts_hold_is_extended_to_its_lease_and_given_back_when_it_ends(harness):
    # Given a container with an attempt of A in flight, leased for 90 s
    gate = LaneGate(harness.stores.flow, harness.clock, {Priority.NORMAL: 8}, 50, 0, "one")
    start = harness.clock.now_ms()
    lease = start + 90_000
    admission = gate.admit(_job(harness, TENANT_A, SLOW_URL), lease)
    units = _lane_units(harness)
    # When the invocation's once-a-second beat runs while more than SLOT_RENEW_MS of the hold is left
    harness.clock.set_ms(start + 1_000)
    assert gate.keep_alive() == 0 and _lane_units(harness) == units
    # and again once less is left
    harness.clock.set_ms(start + SLOT_HOLD_MS - SLOT_RENEW_MS + 1)
    assert gate.keep_alive() == 1
    # Then the slot is held for the attempt's lease (rounded up to the minute), in one write
    assert harness.stores.flow.held("NORMAL", TENANT_A, 0, LANE_TENANT_SPACE) == {"one": slot_lease(lease)}
    assert _lane_units(harness) == units + 1
    assert gate.keep_alive() == 0  # extended already
    # and it goes back when the attempt ends
    harness.clock.set_ms(start + 60_000)
    gate.release(admission)
    assert harness.stores.flow.held("NORMAL", TENANT_A, 0, LANE_TENANT_SPACE) == {}


def test_the_invocations_beat_extends_a_slow_attempts_slot_and_its_end_gives_it_back(harness):
    # Given a container whose one attempt of A is in a call that has not answered
    container = _container(harness)
    messages = _batch(harness, [(KEY_A, SLOW_URL)])
    started, answer = threading.Event(), threading.Event()
    call = harness.target.invoke

    def slow(*args, **kwargs):
        started.set()
        assert answer.wait(timeout=30)
        return call(*args, **kwargs)

    harness.target.invoke = slow
    invocation = threading.Thread(target=container.invoke, args=(sqs_event(messages, LANE_ARN),))
    invocation.start()
    assert started.wait(timeout=30)
    share = share_of(8, 50)

    def held() -> dict[str, int]:
        return {k: v for shard in range(share)
                for k, v in harness.stores.flow.held("NORMAL", TENANT_A, shard, LANE_TENANT_SPACE).items()}

    try:
        # When its hold nears its end while the call goes on
        hold = max(held().values())
        harness.clock.set_ms(hold - SLOT_RENEW_MS + 1)
        # Then the invocation's once-a-second beat extends the slot to the attempt's lease
        deadline = time.monotonic() + 10
        while max(held().values()) == hold and time.monotonic() < deadline:
            time.sleep(0.05)
        assert max(held().values()) >= hold + 30_000
    finally:
        answer.set()
        invocation.join(timeout=30)
    # and the attempt's end gives it back
    assert held() == {}


def test_an_invocation_that_leaves_its_attempts_running_holds_their_slots_for_their_leases(harness):
    # Given an attempt in flight, its hold fresh
    gate = LaneGate(harness.stores.flow, harness.clock, {Priority.NORMAL: 8}, 50, 0, "one")
    lease = harness.clock.now_ms() + 300_000
    assert gate.admit(_job(harness, TENANT_A, SLOW_URL), lease) is not None
    # When the invocation nears its time limit and returns without waiting for it
    assert gate.keep_alive(leaving=True) == 1
    # Then its slot is held for its lease (the container may be frozen, with no beat, until it ends)
    assert harness.stores.flow.held("NORMAL", TENANT_A, 0, LANE_TENANT_SPACE) == {"one": slot_lease(lease)}


def test_a_slot_of_a_container_that_died_comes_back_after_its_hold_or_its_lease(harness):
    # Given a lane of 2 (share 1) whose one slot for A is held by a container that then died
    caps = {Priority.NORMAL: 2}
    dead = LaneGate(harness.stores.flow, harness.clock, caps, 50, 0, "dead")
    start = harness.clock.now_ms()
    lease = start + 90_000
    assert dead.admit(_job(harness, TENANT_A, SLOW_URL), lease) is not None
    alive = LaneGate(harness.stores.flow, harness.clock, caps, 50, 0, "alive")
    # Then another container is held back while its hold lasts, and admitted once it has lapsed
    assert alive.admit(_job(harness, TENANT_A, SLOW_URL), lease) is None
    assert harness.stores.flow.held("NORMAL", TENANT_A, 0, LANE_TENANT_SPACE) == {"dead": start + SLOT_HOLD_MS}
    harness.clock.set_ms(start + SLOT_HOLD_MS + 1)
    admitted = alive.admit(_job(harness, TENANT_A, SLOW_URL), lease)
    assert admitted is not None
    # and a container that dies during a slow attempt (its hold extended) keeps it until that lease
    harness.clock.advance_ms(SLOT_HOLD_MS - SLOT_RENEW_MS + 1)
    assert alive.keep_alive() == 1
    again = LaneGate(harness.stores.flow, harness.clock, caps, 50, 0, "again")
    harness.clock.set_ms(slot_lease(lease) - 1)
    assert again.admit(_job(harness, TENANT_A, SLOW_URL), lease) is None
    harness.clock.set_ms(slot_lease(lease) + FULL_MEMO_MS + 1)
    assert again.admit(_job(harness, TENANT_A, SLOW_URL), lease + 90_000) is not None
    # and another tenant is never held back by A's slot
    assert again.admit(_job(harness, TENANT_B, SLOW_URL), lease + 90_000) is not None


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
