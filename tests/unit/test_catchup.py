"""Catch-up that does not flood: the plan for a RUN_ALL job's missed occurrences (newest maxCatchUp
kept, released at catchUpPerMinute, the older ones one MISSED_WINDOW record) and the API's forms."""
import json
import re

import pytest

from jobsched.api.mapping import misfire_policy_to_json, to_spec
from jobsched.api.models import JobRequest, parse_body
from jobsched.domain.catchup import CATCH_UP_LOOKBACK_MS, plan_catch_up, release_offset_ms
from jobsched.domain.errors import InvalidRequest, UnprocessableRequest
from jobsched.domain.jobs import CatchUp, Job, JobSpec, JobState, MisfirePolicy, Target, TargetType
from jobsched.domain.schedule import rate_schedule

MINUTE = 60_000
T0 = 1_893_456_000_000  # 2030-01-01T00:00:00Z


def job(max_catch_up=100, per_minute=10) -> Job:
    spec = JobSpec(name="j", schedule=rate_schedule("PT1M", T0), target=Target(TargetType.SQS, {"queueUrl": "q"}),
                   misfire_policy=MisfirePolicy.RUN_ALL, catch_up=CatchUp(max_catch_up, per_minute))
    return Job("t", "job_1", spec, JobState.ACTIVE, 1, 1, T0, T0)


def test_three_hours_missed_keeps_the_newest_100_spread_at_10_a_minute():
    # Given a once-a-minute job whose occurrences from 00:01 on were missed, now 03:00:30
    now = T0 + 180 * MINUTE + 30_000
    plan = plan_catch_up(job(), T0 + MINUTE, now, 60_000)
    # Then 00:01 .. 02:59 were missed (03:00 is within the grace minute): 179
    occurrences = [o for o, _ in plan.releases]
    assert len(occurrences) == 100
    assert occurrences == [T0 + m * MINUTE for m in range(80, 180)]  # the newest, oldest first
    assert (plan.skipped_count, plan.skipped_from_ms, plan.skipped_through_ms) == (79, T0 + MINUTE, T0 + 79 * MINUTE)
    assert plan.resume_nominal == T0 + 180 * MINUTE
    releases = [r for _, r in plan.releases]
    assert releases[0] == now and releases[-1] == now + 604_000 + 999  # ceil(99 x 6.1 s)
    # No 60-second window holds more than 10 releases
    assert max(sum(1 for r in releases if start <= r < start + MINUTE) for start in releases) == 10


def test_fewer_missed_than_max_runs_them_all_and_skips_none():
    now = T0 + 5 * MINUTE + 30_000
    plan = plan_catch_up(job(), T0 + MINUTE, now, 60_000)
    assert [o for o, _ in plan.releases] == [T0 + m * MINUTE for m in range(1, 5)]
    assert plan.skipped_count == 0 and plan.skipped_from_ms is None


@pytest.mark.parametrize("per_minute", [1, 7, 10, 59, 60, 61, 599, 600])
def test_release_offsets_are_whole_seconds_and_no_minute_holds_more_than_the_rate(per_minute):
    offsets = [release_offset_ms(i, per_minute) for i in range(3 * per_minute)]
    assert all(o % 1000 == 0 for o in offsets) and offsets == sorted(offsets)
    # Even with the first picked up a second late: per_minute + 1 of them span more than 60 s
    assert all(offsets[i + per_minute] - offsets[i] >= 61_000 for i in range(2 * per_minute))
    assert offsets[per_minute] <= 62_000  # and the pace is the rate, less a second a minute


def test_a_year_missed_walks_only_the_lookback_and_says_the_rest_is_uncounted():
    now = T0 + 365 * 86_400_000
    plan = plan_catch_up(job(max_catch_up=10), T0 + MINUTE, now, 60_000)
    assert len(plan.releases) == 10
    assert plan.skipped_from_ms == T0 + MINUTE
    assert plan.uncounted_before_ms == now - CATCH_UP_LOOKBACK_MS
    assert plan.skipped_count == 7 * 1440 - 1 - 10  # the week walked, less the grace minute and the 10 kept


def request(misfire) -> JobRequest:
    return parse_body(JobRequest, json.dumps({"name": "j", "type": "RATE", "schedule": "PT1M",
                                              "target": {"type": "SQS", "queueUrl": "https://q/1/x"},
                                              "misfirePolicy": misfire}))


def test_the_object_form_is_stored_and_answered_as_an_object():
    spec = to_spec(request({"policy": "RUN_ALL", "maxCatchUp": 100, "catchUpPerMinute": 10}), T0)
    assert spec.misfire_policy is MisfirePolicy.RUN_ALL and spec.catch_up == CatchUp(100, 10)
    assert misfire_policy_to_json(spec) == {"policy": "RUN_ALL", "maxCatchUp": 100, "catchUpPerMinute": 10}
    assert Job.from_item(Job("t", "job_1", spec, JobState.ACTIVE, 1, 1, T0, T0).to_item()).spec.catch_up == CatchUp(100, 10)


@pytest.mark.parametrize("form", ["RUN_ALL", "RUN_ONCE", "SKIP"])
def test_a_string_form_keeps_its_meaning_and_answers_with_the_string(form):
    spec = to_spec(request(form), T0)
    assert spec.catch_up is None and misfire_policy_to_json(spec) == form
    assert "catchUp" not in Job("t", "job_1", spec, JobState.ACTIVE, 1, 1, T0, T0).to_item()


@pytest.mark.parametrize("misfire,field", [
    ({"policy": "RUN_ALL", "maxCatchUp": 0}, "misfirePolicy.maxCatchUp"),
    ({"policy": "RUN_ALL", "maxCatchUp": 10_001}, "misfirePolicy.maxCatchUp"),
    ({"policy": "RUN_ALL", "catchUpPerMinute": 0}, "misfirePolicy.catchUpPerMinute"),
    ({"policy": "RUN_ALL", "catchUpPerMinute": 601}, "misfirePolicy.catchUpPerMinute"),
    ({"policy": "SKIP", "maxCatchUp": 5}, "misfirePolicy.maxCatchUp"),
    ({"policy": "RUN_ONCE", "catchUpPerMinute": 5}, "misfirePolicy.catchUpPerMinute"),
])
def test_bounds_and_policy_are_422_naming_the_field(misfire, field):
    with pytest.raises(UnprocessableRequest) as caught:
        to_spec(request(misfire), T0)
    assert [p.field for p in caught.value.details] == [field]


@pytest.mark.parametrize("misfire", ["RUN_SOME", {"policy": "RUN_ALL", "maxCatchUp": "5"},
                                     {"policy": "RUN_ALL", "burst": 5}, {"maxCatchUp": 5}])
def test_a_malformed_policy_is_400_naming_misfire_policy(misfire):
    with pytest.raises(InvalidRequest) as caught:
        request(misfire)
    assert [p.field for p in caught.value.details] == ["misfirePolicy"]


# --- the CLI ---------------------------------------------------------------------------------
def cli_body(*flags: str) -> dict:
    from jobsched.cli.main import build_parser, job_body
    args = build_parser().parse_args(["jobs", "create", "--name", "j", "--type", "RATE", "--schedule", "PT1M",
                                      "--target-url", "https://example.com/hook", *flags])
    return job_body(args)


def test_cli_create_sends_the_object_form_with_the_catch_up_flags():
    assert cli_body("--max-catch-up", "100", "--catch-up-per-minute", "10")["misfirePolicy"] == \
        {"policy": "RUN_ALL", "maxCatchUp": 100, "catchUpPerMinute": 10}
    assert cli_body("--misfire-policy", "SKIP")["misfirePolicy"] == "SKIP"  # the string form alone
    assert "misfirePolicy" not in cli_body()


def test_cli_get_shows_the_catch_up_policy():
    from io import StringIO

    from jobsched.cli.main import JOB_KEYS, details
    out = StringIO()
    details({"jobId": "job_1", "misfirePolicy": {"policy": "RUN_ALL", "maxCatchUp": 100, "catchUpPerMinute": 10}},
            JOB_KEYS, out)
    assert re.search(r'^misfirePolicy +\{"policy": "RUN_ALL", "maxCatchUp": 100, "catchUpPerMinute": 10\}$',
                     out.getvalue(), re.M), out.getvalue()  # the label column is as wide as the widest label


def test_a_missed_window_record_counts_its_occurrences_in_a_jobs_stats():
    from jobsched.domain.executions import ExecutionStatus
    from jobsched.domain.stats import ExecutionSummary, job_stats

    records = [ExecutionSummary(ExecutionStatus.SUCCEEDED, 3_600_000, 61_000, False),
               ExecutionSummary(ExecutionStatus.SKIPPED, 60_000, None, False, skipped_count=79)]
    stats = job_stats(records, "24h", 4_000_000, True)
    assert stats["skipped"] == 79 and stats["fires"] == 1
