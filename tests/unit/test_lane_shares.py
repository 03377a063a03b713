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
