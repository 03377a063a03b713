"""The wire format written and read by hand (store/wire.py) agrees with boto3's own."""
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from jobsched.domain.timers import Timer, TimerKind
from jobsched.store.dynamo import plain
from jobsched.store.wire import from_wire, item_from_wire, to_wire, values_to_wire

SAMPLES = ["text", "", 0, -7, 2**62, True, False, None, {"a": [1, "b", {"c": None}]}, [], {}, ["x", 3]]


def test_every_value_we_write_matches_boto3s_serializer():
    serializer = TypeSerializer()
    for value in SAMPLES:
        assert to_wire(value) == serializer.serialize(value), value


def test_reading_matches_boto3s_deserializer_after_plain():
    serializer, deserializer = TypeSerializer(), TypeDeserializer()
    for value in SAMPLES:
        wire = serializer.serialize(value)
        assert from_wire(wire) == plain(deserializer.deserialize(wire)) == value
    assert from_wire({"N": "1.5"}) == 1.5 and from_wire({"N": "2.0"}) == 2
    assert from_wire({"SS": ["a", "b"]}) == {"a", "b"} and from_wire({"NS": ["1", "2"]}) == {1, 2}
    assert item_from_wire(None) is None and item_from_wire({}) is None
    assert values_to_wire({":a": 1, ":b": "x"}) == {":a": {"N": "1"}, ":b": {"S": "x"}}


def test_a_timer_read_from_the_wire_equals_the_one_read_through_boto3():
    serializer = TypeSerializer()
    for timer in (Timer(1_800_000_000_123, TimerKind.FIRE, "t", "job_1", 3, 7),
                  Timer(1_800_000_000_123, TimerKind.RETRY, "t", "job_1", 3, 7, "job_1.x", 4)):
        wire = {k: serializer.serialize(v) for k, v in timer.to_item().items()}
        assert Timer.from_wire(wire) == Timer.from_item(timer.to_item()) == timer


def test_a_hand_off_view_of_a_job_holds_what_a_hand_off_reads_and_is_never_written():
    import pytest

    from jobsched.domain.jobs import Job, JobSpec, JobState, MisfirePolicy, Priority, Target, TargetType
    from jobsched.domain.schedule import rate_schedule
    from jobsched.store.jobs import HAND_OFF_ATTRIBUTES
    spec = JobSpec(name="n", schedule=rate_schedule("PT5M", 1_800_000_000_000),
                   target=Target(TargetType.HTTP, {"url": "https://example.com"}), payload={"p": 1},
                   priority=Priority.HIGH, misfire_policy=MisfirePolicy.SKIP, jitter_sec=30)
    job = Job("t", "job_1", spec, JobState.ACTIVE, 4, 9, 1, 2)
    item = job.to_item()
    view = Job.for_hand_off({k: v for k, v in item.items() if k in HAND_OFF_ATTRIBUTES})
    assert (view.tenant_id, view.job_id, view.generation, view.state) == ("t", "job_1", 4, JobState.ACTIVE)
    assert (view.spec.priority, view.spec.misfire_policy, view.spec.jitter_sec) == (Priority.HIGH, MisfirePolicy.SKIP,
                                                                                     30)
    assert view.spec.schedule == spec.schedule and view.fires()
    assert view.fire_at(1_800_000_300_000) == job.fire_at(1_800_000_300_000)
    with pytest.raises(ValueError, match="never written"):
        view.to_item()
