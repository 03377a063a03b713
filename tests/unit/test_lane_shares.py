"""Lane shares' arithmetic and settings (service/lane_shares.py)."""
import pytest

from jobsched.domain.jobs import Job, JobSpec, JobState, Priority, Target, TargetType
from jobsched.domain.lane_shares import parse_caps, share_of, target_host
from jobsched.domain.schedule import one_time_schedule
from jobsched.settings import Env, Settings, SettingsError


@pytest.mark.parametrize("cap,percent,share", [(8, 50, 4), (200, 50, 100), (2, 50, 1), (8, 100, 8), (8, 0, 0),
                                               (8, 99, 7), (1, 50, 1), (400, 1, 4)])
def test_a_share_is_at_least_one_and_below_the_cap_unless_the_whole_lane_is_given(cap, percent, share):
    assert share_of(cap, percent) == share


@pytest.mark.parametrize("text", ["HIGH=8\n", "HIGH=0", "high=8", "HIGH=8,", "MEDIUM=8", "HIGH=1000000", ""])
def test_caps_are_matched_to_their_true_end(text):
    with pytest.raises(ValueError):
        parse_caps(text)


@pytest.mark.parametrize("name,value", [(Env.LANE_TENANT_PERCENT, "101"), (Env.LANE_HOST_PERCENT, "-1"),
                                        (Env.LANE_TENANT_PERCENT, "5\n"), (Env.LANE_CAPS, "NORMAL=x"),
                                        (Env.ATTEMPT_LOG_PERCENT, "100\n"), (Env.ATTEMPT_LOG_PERCENT, "0.5")])
def test_bad_lane_settings_name_the_variable(name, value):
    env = {Env.JOBS_TABLE: "j", Env.TIMERS_TABLE: "t", Env.EXECUTIONS_TABLE: "e", Env.SEGMENTS_TABLE: "s",
           Env.LANE_URL[Priority.HIGH]: "h", Env.LANE_URL[Priority.NORMAL]: "n", Env.LANE_URL[Priority.LOW]: "l",
           Env.SEGMENTS: "1", Env.ALLOW_PRIVATE_TARGETS: "false", Env.EXECUTION_RETENTION_DAYS: "30",
           Env.TARGETS_ROLE_ARN: "arn:aws:iam::123456789012:role/targets", name: value}
    with pytest.raises(SettingsError, match=name):
        Settings.from_env(env, "worker")


def _job(target: Target | None) -> Job:
    return Job("t", "job_" + "0" * 32, JobSpec(name="x", schedule=one_time_schedule(0), target=target),
               JobState.ACTIVE, 1, 1, 0, 0)


def test_the_host_bound_is_the_http_targets_host_and_port():
    assert target_host(_job(Target(TargetType.HTTP, {"url": "https://API.Example.com/x"}))) == "api.example.com:443"
    assert target_host(_job(Target(TargetType.HTTP, {"url": "http://a.test:8080/x"}))) == "a.test:8080"
    assert target_host(_job(Target(TargetType.SQS, {"queueUrl": "https://sqs/x"}))) is None


class DeniedSlots:
    """A slot store whose every write is refused (a role without UpdateItem, or a throttle)."""

    def take_slot(self, *args, **kwargs):
        from botocore.exceptions import ClientError

        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "denied"}}, "UpdateItem")

    give_back = extend = take_slot


def test_a_refused_slot_write_loses_the_bound_for_the_attempt_never_the_attempt():
    from jobsched.domain.clock import FakeClock
    from jobsched.service.lane_shares import LaneGate

    gate = LaneGate(DeniedSlots(), FakeClock(0), {Priority.NORMAL: 8}, 50, 50, "c1")
    admission = gate.admit(_job(Target(TargetType.HTTP, {"url": "https://a.test/"})), 90_000)
    assert admission is not None and admission.bounds == [] and gate.faults == 2
    gate.release(admission)  # nothing held: no write


class CountingSlots:
    """Slot maps in memory, as store/flow.py keeps them (a map per key, an entry per container with
    its lease), counting each write."""

    def __init__(self):
        self.maps: dict[tuple, dict[str, int]] = {}
        self.writes: list[tuple[str, str]] = []

    def take_slot(self, lane, owner, shard, container, limit, lease, space):
        from jobsched.store.flow import SlotTaken

        self.writes.append(("take", owner))
        slots = self.maps.setdefault((space, lane, owner, shard), {})
        if container in slots:
            return SlotTaken("held")
        if len(slots) >= limit:
            return SlotTaken("full", held=dict(slots))
        slots[container] = lease
        return SlotTaken("new")

    def give_back(self, lane, owner, shard, container, if_lease=None, space=None):
        self.writes.append(("give_back", owner))
        slots = self.maps.get((space, lane, owner, shard), {})
        if container in slots and (if_lease is None or slots[container] == if_lease):
            del slots[container]
            return True
        return False

    def extend(self, lane, owner, shard, container, lease, space):
        self.writes.append(("extend", owner))
        slots = self.maps.get((space, lane, owner, shard), {})
        if container in slots:
            slots[container] = lease

    def holders(self, owner) -> set[str]:
        return {c for (space, lane, o, shard), slots in self.maps.items() if o == owner for c in slots}


def _gate(slots, clock, container="c1"):
    from jobsched.service.lane_shares import LaneGate

    return LaneGate(slots, clock, {Priority.NORMAL: 8}, 50, 50, container)


def _tenant_job(tenant: str, url: str = "https://a.test/") -> Job:
    return Job(tenant, "job_" + "0" * 32, JobSpec(name="x", schedule=one_time_schedule(0),
                                                  target=Target(TargetType.HTTP, {"url": url})),
               JobState.ACTIVE, 1, 1, 0, 0)


def test_a_container_running_one_tenant_keeps_its_slots_between_batches():
    # A quiet deployment: one record a second, one tenant, one host. A take and a give-back per
    # bound per record were 4 of its 4.2 write units on Jobs per execution.
    from jobsched.domain.clock import FakeClock

    clock, slots = FakeClock(1_000), CountingSlots()
    gate = _gate(slots, clock)
    for _ in range(120):
        admission = gate.admit(_tenant_job("t"), clock.now_ms() + 90_000)
        assert admission is not None and len(admission.bounds) == 2
        clock.advance_ms(100)
        gate.release(admission)
        clock.advance_ms(900)
    # two takes, then an extension per bound when the lease grid moves (once a minute): no give-back
    assert [w for w, _ in slots.writes].count("take") == 2
    assert [w for w, _ in slots.writes].count("give_back") == 0
    assert len(slots.writes) <= 2 + 2 * 3
    assert slots.holders("t") == {"c1"} and slots.holders("a.test:443") == {"c1"}


def test_a_lingering_slot_goes_back_when_the_container_runs_another_tenant_or_stays_idle():
    from jobsched.domain.clock import FakeClock
    from jobsched.service.lane_shares import LINGER_MS

    clock, slots = FakeClock(1_000), CountingSlots()
    gate = _gate(slots, clock)
    gate.release(gate.admit(_tenant_job("t"), clock.now_ms() + 90_000))
    assert slots.holders("t") == {"c1"}  # lingering: no attempt of t in flight
    other = gate.admit(_tenant_job("u", "https://b.test/"), clock.now_ms() + 90_000)
    # The container no longer runs only t: t's slot and a.test's go back before u's are taken
    assert slots.holders("t") == set() and slots.holders("a.test:443") == set()
    assert slots.holders("u") == {"c1"} and slots.holders("b.test:443") == {"c1"}
    gate.release(other)
    clock.advance_ms(LINGER_MS + 1)
    gate.release(gate.admit(_tenant_job("u", "https://b.test/"), clock.now_ms() + 90_000))
    assert ("give_back", "u") in slots.writes  # idle past LINGER_MS: given back, then taken again
    assert slots.holders("u") == {"c1"}


def test_a_batch_of_two_tenants_gives_back_what_it_no_longer_runs_alone():
    from jobsched.domain.clock import FakeClock

    clock, slots = FakeClock(1_000), CountingSlots()
    gate = _gate(slots, clock)
    a = gate.admit(_tenant_job("t"), clock.now_ms() + 90_000)
    b = gate.admit(_tenant_job("u"), clock.now_ms() + 90_000)
    gate.release(a)  # u still runs: t goes back at once, as before
    assert slots.holders("t") == set() and slots.holders("u") == {"c1"}
    gate.release(b)  # u alone: it lingers (the host a.test, shared by both, too)
    assert slots.holders("u") == {"c1"} and slots.holders("a.test:443") == {"c1"}


def test_a_slot_lingering_past_its_lease_is_taken_again_not_assumed():
    # Another container may have reclaimed the expired entry (it finds the map full): the next
    # attempt takes the slot again, conditionally, instead of extending an entry that is gone.
    from jobsched.domain.clock import FakeClock

    clock, slots = FakeClock(1_000), CountingSlots()
    gate = _gate(slots, clock)
    gate.release(gate.admit(_tenant_job("t"), clock.now_ms() + 90_000))
    clock.advance_ms(4_000)
    for space_map in slots.maps.values():
        space_map.clear()  # reclaimed by others
    full = {f"other{i}": clock.now_ms() + 600_000 for i in range(4)}
    for (space, lane, owner, shard), space_map in slots.maps.items():
        if owner == "t":
            space_map.update(full)
    gate._held[next(b for b in gate._held if b.owner == "t")].lease_until_ms = clock.now_ms() - 1
    assert gate.admit(_tenant_job("t"), clock.now_ms() + 90_000) is None  # t's map is full: held back
