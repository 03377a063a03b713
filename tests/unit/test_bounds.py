"""Schedule bounds and self-pausing in the domain: [startAt, endAt), maxRuns, why a job ends,
what resume does with a job that has no run left, and the counts' round trips."""
import pytest

from jobsched.api.answers import preview_schedule
from jobsched.api.mapping import to_spec
from jobsched.api.models import JobRequest
from jobsched.domain.errors import UnprocessableRequest
from jobsched.domain.executions import Dispatch, DispatchKind
from jobsched.domain.jobs import CompletedReason, Job, JobSpec, JobState, Target, TargetType, job_item_sizes
from jobsched.domain.schedule import cron_schedule, format_instant, parse_instant, rate_schedule
from jobsched.domain.timers import Timer, TimerKind
from jobsched.service.outcomes import pause_reason

T0 = parse_instant("2030-01-01T00:00:00Z", "t")
HOOK = Target(TargetType.HTTP, {"url": "https://example.com/h", "method": "POST", "headers": {}})


def at(text: str) -> int:
    return parse_instant(text, "t")


def job_with(schedule, state=JobState.PAUSED, **spec) -> Job:
    return Job("t", "job_1", JobSpec(name="n", schedule=schedule, target=HOOK, **spec), state, 2, 3, T0, T0)


def test_an_occurrence_at_end_at_does_not_fire():
    every_hour = cron_schedule("0 * * * *", "UTC", T0, end_ms=at("2030-01-01T03:00:00Z"))
    assert every_hour.next_fire_after(at("2030-01-01T02:00:00Z")) is None
    assert every_hour.next_fire_after(at("2030-01-01T01:59:59Z")) == at("2030-01-01T02:00:00Z")


def test_an_occurrence_at_start_at_fires_first():
    starting = cron_schedule("*/15 * * * *", "UTC", T0, start_ms=at("2030-01-01T06:15:00Z"))
    assert format_instant(starting.first_fire()) == "2030-01-01T06:15:00Z"
    later = cron_schedule("*/15 * * * *", "UTC", T0, start_ms=at("2030-01-01T06:16:00Z"))
    assert format_instant(later.first_fire()) == "2030-01-01T06:30:00Z"


def test_end_reason_names_max_runs_before_end_and_none_while_runs_are_left():
    job = job_with(rate_schedule("PT1M", T0, end_ms=at("2030-01-01T01:00:00Z")), max_runs=3)
    assert job.end_reason(2, T0) is None
    assert job.end_reason(3, T0) is CompletedReason.MAX_RUNS_REACHED
    assert job.end_reason(0, at("2030-01-01T00:59:30Z")) is CompletedReason.END_REACHED


def test_resume_of_a_job_with_no_run_left_completes_it_with_the_reason():
    job = job_with(rate_schedule("PT1M", T0), max_runs=3)
    done = job.resumed(T0 + 1000, run_count=3)
    assert done.state is JobState.COMPLETED and done.completed_reason is CompletedReason.MAX_RUNS_REACHED
    assert done.run_count == 3 and done.generation == job.generation + 1
    ended = job_with(rate_schedule("PT1M", T0, end_ms=at("2030-01-01T00:10:00Z"))).resumed(at("2030-01-01T00:20:00Z"))
    assert ended.state is JobState.COMPLETED and ended.completed_reason is CompletedReason.END_REACHED


def test_resume_clears_the_failure_count_and_keeps_the_run_count():
    job = job_with(rate_schedule("PT1M", T0), pause_after_failures=2)
    failing = Job(**{**job.__dict__, "consecutive_failures": 2, "last_dead_execution": "job_1.x", "run_count": 5})
    resumed = failing.resumed(T0 + 1000, run_count=4)
    assert resumed.state is JobState.ACTIVE and resumed.consecutive_failures == 0
    assert resumed.last_dead_execution is None and resumed.run_count == 5  # the larger count wins


def test_job_items_round_trip_the_bounds_and_counts():
    job = job_with(rate_schedule("PT1M", T0), state=JobState.COMPLETED, max_runs=7, pause_after_failures=3)
    job = Job(**{**job.__dict__, "run_count": 7, "completed_reason": CompletedReason.MAX_RUNS_REACHED,
                 "consecutive_failures": 1, "last_dead_execution": "job_1.0000000000001"})
    item = job.to_item()
    assert item["maxRuns"] == 7 and item["runCount"] == 7 and item["completedReason"] == "MAX_RUNS_REACHED"
    assert Job.from_item(item) == job
    assert Job.for_hand_off(item).spec.max_runs == 7
    assert {"runCount", "completedReason", "consecutiveFailures", "lastDeadExecution"} <= set(job_item_sizes(job.spec))


def test_fire_timers_and_dispatches_carry_the_count():
    timer = Timer(T0, TimerKind.FIRE, "t", "job_1", 2, 0, runs=41)
    assert Timer.from_wire(timer.to_wire()) == timer and Timer.from_item(timer.to_item()) == timer
    assert "runs" not in Timer(T0, TimerKind.FIRE, "t", "job_1", 2, 0).to_item()  # no bytes for unbounded chains
    dispatch = Dispatch(DispatchKind.FIRE, "t", "job_1", "job_1.x", T0, 2, run=42)
    assert Dispatch.from_json(dispatch.to_json()) == dispatch
    assert '"run"' not in Dispatch(DispatchKind.MANUAL, "t", "job_1", "job_1.x", T0, 2).to_json()


def test_the_pause_reason_names_the_count_the_execution_and_its_error_within_the_reason_limit():
    reason = pause_reason(3, "job_1.0001893456125000", "HTTP 500: " + "x" * 1000)
    assert reason.startswith("paused after 3 consecutive executions ended DEAD; the last: job_1.0001893456125000; "
                             "last error: HTTP 500: ")
    assert len(reason) <= 500


@pytest.mark.parametrize("field,value", [("maxRuns", 2), ("pauseAfterFailures", 1), ("startAt", "2030-01-01T00:00:00Z"),
                                         ("endAt", "2030-02-01T00:00:00Z")])
def test_bounds_on_a_job_that_is_not_recurring_name_the_field(field, value):
    for kind in ({"type": "ONE_TIME", "runAt": "2030-01-01T01:00:00Z"}, {"type": "DELAYED", "delaySeconds": 5}):
        request = JobRequest.model_validate({"name": "o", "target": {"type": "HTTP", "url": "https://e.com/h"},
                                             **kind, field: value})
        with pytest.raises(UnprocessableRequest) as refused:
            to_spec(request, T0)
        assert refused.value.details[0].field == field


def test_the_preview_keeps_inside_the_bounds_and_stops_at_max_runs():
    inside = preview_schedule("RATE", "PT1H", "UTC", 10, T0, start_ms=at("2030-01-01T05:00:00Z"),
                              end_ms=at("2030-01-01T08:00:00Z"))
    assert [format_instant(t) for t in inside] == ["2030-01-01T05:00:00Z", "2030-01-01T06:00:00Z",
                                                   "2030-01-01T07:00:00Z"]
    assert len(preview_schedule("CRON", "0 * * * *", "UTC", 10, T0, max_runs=4)) == 4
    assert preview_schedule("CRON", "0 * * * *", "UTC", 10, T0, end_ms=at("2030-01-01T01:00:00Z")) == []


def test_the_cli_sends_the_bounds_and_shows_the_counts():
    import io

    from jobsched.cli.main import JOB_KEYS, build_parser, details, job_body, request_of

    args = build_parser().parse_args(["jobs", "create", "--name", "n", "--type", "RATE", "--schedule", "PT1M",
                                      "--target-url", "https://e.com/h", "--start-at", "2030-01-01T00:00:00Z",
                                      "--end-at", "2030-02-01T00:00:00Z", "--max-runs", "3",
                                      "--pause-after-failures", "2"])
    body = job_body(args)
    assert (body["maxRuns"], body["pauseAfterFailures"], body["endAt"]) == (3, 2, "2030-02-01T00:00:00Z")
    shown = {"jobId": "job_1", "state": "COMPLETED", "maxRuns": 3, "runCount": 3,
             "completedReason": "MAX_RUNS_REACHED", "pauseAfterFailures": 2}
    out = io.StringIO()
    details(shown, JOB_KEYS, out)
    lines = dict(line.split(None, 1) for line in out.getvalue().splitlines() if len(line.split(None, 1)) == 2)
    assert lines["runCount"] == "3" and lines["completedReason"] == "MAX_RUNS_REACHED" and lines["maxRuns"] == "3"
    assert request_of({**shown, "name": "n", "type": "RATE"})["maxRuns"] == 3  # an update keeps the bound
