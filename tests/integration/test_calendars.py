"""Exclusion calendars (issue 22): the calendar routes, a job's excludeCalendars, the hand-off's
SKIPPED (EXCLUDED) records, the reference count that keeps a used calendar from being deleted,
and the schedule preview's `skipped`. The real handlers on moto, under the strict AWS layer."""
from __future__ import annotations

import re

import pytest

from jobsched.domain.clock import FakeClock
from jobsched.domain.schedule import parse_instant
from jobsched.domain.timers import minute_of
from jobsched.service.handoff import LOOK_AHEAD_MINUTES
from jobsched.store.calendars import CalendarsStore

from jobsched.api.mapping import to_spec
from jobsched.api.models import JobRequest
from jobsched.domain.jobs import Job, JobState, new_job_id

from .harness import KEY_B, TENANT_A

# 2026-12-24T07:50:05Z: ten minutes before 09:00 in Paris (UTC+1 in winter).
START_MS = parse_instant("2026-12-24T07:50:05Z", "start")
HTTP = {"type": "HTTP", "url": "http://127.0.0.1:9/x"}


@pytest.fixture
def clock():
    return FakeClock(START_MS)


def daily_paris(**extra) -> dict:
    return {"name": "daily", "type": "CRON", "schedule": "0 9 * * *", "timezone": "Europe/Paris", "target": HTTP,
            **extra}


def put_calendar(harness, name: str, dates: list[str], key: str = "default", description: str = "") -> tuple:
    return harness.request("PUT", f"/v1/calendars/{name}", {"description": description, "dates": dates}, key)


def jump_to(harness, instant: str) -> None:
    """Move the clock over quiet hours in one step, as if every tick in between had run over empty
    buckets (ticking minute by minute through a day would take minutes of test time). Only for
    spans in which no timer is due."""
    target = parse_instant(instant, "jump")
    assert target > harness.clock.now_ms()
    harness.clock.set_ms(target)
    done = minute_of(target) - 1 + LOOK_AHEAD_MINUTES
    for segment in range(harness.settings.segments):
        harness.stores.watermarks.claim(segment, done)
        harness.stores.watermarks.mark_done(segment, done)


def by_scheduled(harness, job_id: str) -> dict[str, dict]:
    return {e["scheduledAt"]: e for e in harness.executions_of(job_id)}


def test_a_daily_paris_job_skips_the_excluded_day_and_fires_the_days_around_it(harness):
    # Given a calendar with Christmas and a job every day at 09:00 in Paris that excludes it
    status, calendar = put_calendar(harness, "holidays", ["2026-12-25"], description="office closed")
    assert status == 200, calendar
    assert calendar["dates"] == ["2026-12-25"] and calendar["description"] == "office closed"
    job = harness.create_job(daily_paris(excludeCalendars=["holidays"]))
    assert job["excludeCalendars"] == ["holidays"]
    # When the 24th, the 25th and the 26th pass
    harness.advance(15 * 60, step_ms=5000)
    for day in ("25", "26"):
        jump_to(harness, f"2026-12-{day}T07:50:05Z")
        harness.advance(15 * 60, step_ms=5000)
    # Then it fired on the 24th and the 26th, and the 25th is SKIPPED with reason EXCLUDED
    runs = by_scheduled(harness, job["jobId"])
    assert set(runs) == {"2026-12-24T08:00:00Z", "2026-12-25T08:00:00Z", "2026-12-26T08:00:00Z"}
    assert runs["2026-12-24T08:00:00Z"]["status"] == "SUCCEEDED"
    assert runs["2026-12-26T08:00:00Z"]["status"] == "SUCCEEDED"
    skipped = runs["2026-12-25T08:00:00Z"]
    assert skipped["status"] == "SKIPPED" and skipped["reason"] == "EXCLUDED", skipped
    assert skipped["attempt"] == 0 and skipped["attempts"] == []
    called = sorted(c.execution_id for c in harness.target.calls_for(job["jobId"]))
    assert called == [runs["2026-12-24T08:00:00Z"]["executionId"], runs["2026-12-26T08:00:00Z"]["executionId"]]


def test_a_calendar_replaced_before_the_hand_off_applies_to_that_occurrence(harness):
    # Given a job excluding a calendar that does not hold the 24th yet
    put_calendar(harness, "ad-hoc", ["2027-01-01"])
    job = harness.create_job(daily_paris(excludeCalendars=["ad-hoc"]))
    # When the calendar is replaced with the 24th before that occurrence's hand-off
    status, replaced = put_calendar(harness, "ad-hoc", ["2026-12-24", "2027-01-01"])
    assert status == 200 and replaced["version"] == 2
    harness.advance(15 * 60, step_ms=5000)
    # Then the 24th does not fire
    run = by_scheduled(harness, job["jobId"])["2026-12-24T08:00:00Z"]
    assert run["status"] == "SKIPPED" and run["reason"] == "EXCLUDED"
    assert harness.target.calls_for(job["jobId"]) == []
    # And when the 24th is taken out again, the 25th fires
    put_calendar(harness, "ad-hoc", [])
    jump_to(harness, "2026-12-25T07:50:05Z")
    harness.advance(15 * 60, step_ms=5000)
    assert by_scheduled(harness, job["jobId"])["2026-12-25T08:00:00Z"]["status"] == "SUCCEEDED"


def test_a_rate_job_reads_its_dates_in_its_own_time_zone(harness):
    # Given an hourly job in Tokyo excluding the 25th (Tokyo is 9 hours ahead of UTC)
    put_calendar(harness, "tokyo-holiday", ["2026-12-25"])
    job = harness.create_job({"name": "hourly", "type": "RATE", "schedule": "PT1H", "timezone": "Asia/Tokyo",
                              "startAt": "2026-12-24T14:30:00Z", "target": HTTP,
                              "excludeCalendars": ["tokyo-holiday"]})
    assert job["timezone"] == "Asia/Tokyo"
    # When 14:30Z (23:30 on the 24th in Tokyo) and 15:30Z (00:30 on the 25th) pass
    jump_to(harness, "2026-12-24T14:20:05Z")
    harness.advance(80 * 60, step_ms=10_000)
    runs = by_scheduled(harness, job["jobId"])
    # Then the first fires and the second, already the 25th in Tokyo, is skipped
    assert runs["2026-12-24T14:30:00Z"]["status"] == "SUCCEEDED"
    assert runs["2026-12-24T15:30:00Z"]["status"] == "SKIPPED"
    assert runs["2026-12-24T15:30:00Z"]["reason"] == "EXCLUDED"


def test_a_job_may_name_only_calendars_that_exist(harness):
    put_calendar(harness, "known", ["2026-12-25"])
    # Given no calendar "nope": creating a job that names it answers 422 naming the entry
    status, body = harness.request("POST", "/v1/jobs", daily_paris(excludeCalendars=["known", "nope"]))
    assert status == 422, body
    assert body["error"]["details"][0]["field"] == "excludeCalendars.1"
    # And nothing was created
    assert harness.request("GET", "/v1/jobs")[1]["items"] == []
    # A replace that names it answers the same
    job = harness.create_job(daily_paris(excludeCalendars=["known"]))
    status, body = harness.request("PUT", f"/v1/jobs/{job['jobId']}", daily_paris(excludeCalendars=["nope"]))
    assert status == 422 and body["error"]["details"][0]["field"] == "excludeCalendars.0", body
    assert harness.request("GET", f"/v1/jobs/{job['jobId']}")[1]["excludeCalendars"] == ["known"]
    # Another tenant's calendar of the same name is not this tenant's
    put_calendar(harness, "theirs", ["2026-12-25"], key=KEY_B)
    status, body = harness.request("POST", "/v1/jobs", daily_paris(excludeCalendars=["theirs"]))
    assert status == 422 and body["error"]["details"][0]["field"] == "excludeCalendars.0"
    # A one-time job has no occurrences to exclude
    status, body = harness.request("POST", "/v1/jobs", {"name": "once", "type": "ONE_TIME", "target": HTTP,
                                                        "runAt": "2026-12-30T00:00:00Z", "excludeCalendars": ["known"]})
    assert status == 422 and body["error"]["details"][0]["field"] == "excludeCalendars"


def test_a_calendar_in_use_cannot_be_deleted_until_no_job_names_it(harness):
    put_calendar(harness, "used", ["2026-12-25"])
    first = harness.create_job(daily_paris(excludeCalendars=["used"]))
    second = harness.create_job(daily_paris(excludeCalendars=["used"]))
    # While two jobs use it: 409
    status, body = harness.request("DELETE", "/v1/calendars/used")
    assert status == 409 and "2 jobs" in body["error"]["message"], body
    # A paused job still uses it; a replace that drops it releases it
    harness.request("POST", f"/v1/jobs/{first['jobId']}/pause")
    assert harness.request("DELETE", "/v1/calendars/used")[0] == 409
    assert harness.request("PUT", f"/v1/jobs/{second['jobId']}", daily_paris())[0] == 200
    status, body = harness.request("DELETE", "/v1/calendars/used")
    assert status == 409 and "1 jobs" in body["error"]["message"], body
    # Deleting the last job that uses it lets it go
    assert harness.request("DELETE", f"/v1/jobs/{first['jobId']}")[0] == 200
    status, deleted = harness.request("DELETE", "/v1/calendars/used")
    assert status == 200 and deleted["name"] == "used"
    # Then it is gone, and no job can name it any more
    assert harness.request("GET", "/v1/calendars/used")[0] == 404
    assert harness.request("DELETE", "/v1/calendars/used")[0] == 404
    assert harness.request("GET", "/v1/calendars")[1]["items"] == []
    status, body = harness.request("POST", "/v1/jobs", daily_paris(excludeCalendars=["used"]))
    assert status == 422 and body["error"]["details"][0]["field"] == "excludeCalendars.0"
    # And a calendar created again under the name starts afresh
    assert put_calendar(harness, "used", ["2026-12-31"])[1]["version"] == 1
    harness.create_job(daily_paris(excludeCalendars=["used"]))
    assert harness.request("DELETE", "/v1/calendars/used")[0] == 409


def test_a_job_created_while_its_calendar_is_being_deleted_keeps_the_calendar(harness, monkeypatch):
    # Given a delete that has read the calendar (no job uses it yet) and not yet written
    put_calendar(harness, "racy", ["2026-12-25"])
    created = {}
    original_get = CalendarsStore.get

    def get_then_a_job_is_created(self, tenant_id, name):
        found = original_get(self, tenant_id, name)
        if not created:  # the job's own write, as the API makes it (an API request cannot nest here)
            now = harness.clock.now_ms()
            spec = to_spec(JobRequest.model_validate(daily_paris(excludeCalendars=["racy"])), now)
            created["job"] = Job(TENANT_A, new_job_id(now), spec, JobState.ACTIVE, 1, 1, now, now)
            harness.stores.jobs.put_new(created["job"])
        return found

    monkeypatch.setattr(CalendarsStore, "get", get_then_a_job_is_created)
    # When the delete goes on
    status, body = harness.request("DELETE", "/v1/calendars/racy")
    monkeypatch.setattr(CalendarsStore, "get", original_get)
    # Then it answers 409, and the job's calendar is still there
    assert status == 409, body
    assert harness.request("GET", "/v1/calendars/racy")[0] == 200
    job = harness.request("GET", f"/v1/jobs/{created['job'].job_id}")[1]
    assert job["excludeCalendars"] == ["racy"]


def test_calendar_routes_list_read_and_check_their_input(harness):
    assert put_calendar(harness, "b-cal", ["2026-12-31", "2026-12-25", "2026-12-25"])[0] == 200
    assert put_calendar(harness, "a-cal", [])[0] == 200
    status, page = harness.request("GET", "/v1/calendars?limit=1")
    assert status == 200 and [c["name"] for c in page["items"]] == ["a-cal"] and page["nextCursor"]
    status, rest = harness.request("GET", f"/v1/calendars?limit=1&cursor={page['nextCursor']}")
    assert [c["name"] for c in rest["items"]] == ["b-cal"]
    # Dates come back sorted, each once
    assert rest["items"][0]["dates"] == ["2026-12-25", "2026-12-31"]
    assert harness.request("GET", "/v1/calendars/b-cal")[1]["dates"] == ["2026-12-25", "2026-12-31"]
    # Another tenant sees none of them
    assert harness.request("GET", "/v1/calendars", key=KEY_B)[1]["items"] == []
    assert harness.request("GET", "/v1/calendars/b-cal", key=KEY_B)[0] == 404
    # Bad input names its field
    status, body = put_calendar(harness, "x", ["2026-02-30"])
    assert status == 422 and body["error"]["details"][0]["field"] == "dates.0"
    status, body = put_calendar(harness, "x", ["2026-12-25", "25/12/2026"])
    assert status == 422 and body["error"]["details"][0]["field"] == "dates.1"
    status, body = put_calendar(harness, "x", ["2026-12-25\n"])
    assert status == 422 and body["error"]["details"][0]["field"] == "dates.0"
    status, body = put_calendar(harness, "bad%20name", ["2026-12-25"])
    assert status == 400 and body["error"]["details"][0]["field"] == "name"
    status, body = harness.request("PUT", "/v1/calendars/x", {"dates": "2026-12-25"})
    assert status == 400 and body["error"]["details"][0]["field"] == "dates"


def test_a_calendar_holds_up_to_1000_dates(harness):
    from datetime import date, timedelta

    days = [(date(2027, 1, 1) + timedelta(days=i)).isoformat() for i in range(1001)]
    # 1,001 dates are refused, naming the field
    status, body = put_calendar(harness, "many", days)
    assert status == 400 and body["error"]["details"][0]["field"] == "dates", body
    # 1,000 are kept, and a job that names the calendar fires around them
    status, calendar = put_calendar(harness, "many", days[:1000], description="\U0001F600" * 1024)
    assert status == 200 and len(calendar["dates"]) == 1000
    job = harness.create_job(daily_paris(excludeCalendars=["many"]))
    harness.advance(15 * 60, step_ms=5000)
    assert by_scheduled(harness, job["jobId"])["2026-12-24T08:00:00Z"]["status"] == "SUCCEEDED"


def test_the_preview_lists_the_occurrences_a_calendar_skips(harness):
    put_calendar(harness, "holidays", ["2026-12-25", "2027-01-01"])
    status, body = harness.request(
        "GET", "/v1/schedule-preview?type=CRON&schedule=0%209%20*%20*%20*&timezone=Europe/Paris&count=3"
               "&after=2026-12-24T12:00:00Z&excludeCalendars=holidays")
    assert status == 200, body
    assert body["fireTimes"] == ["2026-12-26T08:00:00Z", "2026-12-27T08:00:00Z", "2026-12-28T08:00:00Z"]
    assert body["skipped"] == [{"at": "2026-12-25T08:00:00Z", "reason": "EXCLUDED"}]
    # Without calendars nothing is skipped
    status, body = harness.request("GET", "/v1/schedule-preview?type=CRON&schedule=0%209%20*%20*%20*&count=1"
                                          "&after=2026-12-24T12:00:00Z")
    assert body["skipped"] == [] and body["fireTimes"] == ["2026-12-25T09:00:00Z"]
    # An unknown calendar is a 422 naming it
    status, body = harness.request("GET", "/v1/schedule-preview?type=RATE&schedule=PT1H"
                                          "&excludeCalendars=holidays,nope")
    assert status == 422 and body["error"]["details"][0]["field"] == "excludeCalendars.1", body


def test_a_tick_reads_a_calendar_once_per_run_whatever_the_number_of_jobs_naming_it(harness, monkeypatch):
    # Given ten jobs naming the same calendar, due in five different minutes (five buckets), and
    # ticks that stopped, so that one run per segment hands all five buckets off
    put_calendar(harness, "shared", ["2026-12-25"])
    for minute in range(55, 60):
        for _ in range(2):
            harness.create_job({**daily_paris(excludeCalendars=["shared"]), "schedule": f"{minute} 8 * * *"})
    harness.ticks_enabled = False
    harness.clock.set_ms(parse_instant("2026-12-24T07:54:30Z", "t"))
    reads = []
    original = CalendarsStore.dates_many

    def counted(self, keys):
        reads.append(list(keys))
        return original(self, keys)

    monkeypatch.setattr(CalendarsStore, "dates_many", counted)
    # When the ticks come back: each segment's run hands off the buckets of 07:53 to 07:56 (its
    # pages: one per bucket that holds timers of its segment)
    harness.ticks_enabled = True
    harness.clock.set_ms(parse_instant("2026-12-24T07:58:30Z", "t"))
    harness.tick_all()
    # Then each run read the calendar once, not once per page
    assert 1 <= len(reads) <= harness.settings.segments, reads
    assert all(keys == [("tenant-a", "shared")] for keys in reads)
    harness.advance(120, step_ms=5000)
    fired = [harness.executions_of(j["jobId"]) for j in harness.request("GET", "/v1/jobs?limit=100")[1]["items"]]
    assert sum(len(runs) for runs in fired) == 10


def test_a_transaction_is_allowed_only_when_the_role_allows_each_of_its_items(harness):
    from botocore.exceptions import ClientError

    from jobsched.local.strict_aws import acting_as

    client = harness.session.client("dynamodb")
    table = harness.settings.jobs_table
    update = {"Update": {"TableName": table, "Key": {"tenantId": {"S": "t"}, "jobId": {"S": "calref#x"}},
                        "UpdateExpression": "ADD refCount :one", "ExpressionAttributeValues": {":one": {"N": "1"}}}}
    with acting_as("tick"):  # the tick may batch-read jobs and put executions, never update a job item
        with pytest.raises(ClientError) as refused:
            client.transact_write_items(TransactItems=[update])
        assert refused.value.response["Error"]["Code"] == "AccessDeniedException"
        assert "dynamodb:UpdateItem" in str(refused.value)
    with acting_as("api"):  # the API holds UpdateItem on the Jobs table: its transaction passes
        client.transact_write_items(TransactItems=[update])


def run_cli(harness, *argv) -> tuple[int, str]:
    from io import StringIO

    from jobsched.cli.main import build_parser, exit_code_for, run_command
    from jobsched.client import ApiError

    out = StringIO()
    try:  # the CLI's client (jobsched.client), answered by the in-process API
        code = run_command(build_parser().parse_args(list(argv)), harness.client(), out)
    except ApiError as exc:
        return exit_code_for(exc), str(exc)
    return code, out.getvalue()


def test_the_cli_puts_lists_reads_and_deletes_calendars_and_jobs_exclude_them(harness):
    code, out = run_cli(harness, "calendars", "put", "us-holidays", "--date", "2026-12-25", "--date", "2027-01-01",
                        "--description", "US federal holidays")
    assert code == 0 and "2026-12-25" in out and "US federal holidays" in out, out
    code, out = run_cli(harness, "calendars", "list")
    assert code == 0 and "us-holidays" in out and "2 " in out, out
    code, out = run_cli(harness, "--json", "calendars", "get", "us-holidays")
    assert code == 0 and '"2027-01-01"' in out
    # A job created with --exclude-calendar names it; `jobs get` shows it; an update keeps it
    code, out = run_cli(harness, "--json", "jobs", "create", "--name", "cli", "--type", "CRON", "--schedule",
                        "0 9 * * *", "--timezone", "Europe/Paris", "--target-url", "http://127.0.0.1:9/x",
                        "--exclude-calendar", "us-holidays")
    assert code == 0, out
    job_id = __import__("json").loads(out)["jobId"]
    code, out = run_cli(harness, "jobs", "get", job_id)
    assert code == 0 and re.search(r'^excludeCalendars +\["us-holidays"\]$', out, re.M), out
    code, out = run_cli(harness, "--json", "jobs", "update", job_id, "--schedule", "0 10 * * *")
    assert code == 0 and __import__("json").loads(out)["excludeCalendars"] == ["us-holidays"], out
    # The preview shows what the calendar skips
    code, out = run_cli(harness, "preview", "0 9 * * *", "--timezone", "Europe/Paris", "--count", "2",
                        "--after", "2026-12-24T12:00:00Z", "--exclude-calendar", "us-holidays")
    assert code == 0 and out.splitlines() == ["2026-12-26T08:00:00Z", "2026-12-27T08:00:00Z",
                                              "skipped 2026-12-25T08:00:00Z (EXCLUDED)"], out
    # Deleting it while the job uses it is a conflict (exit 4), after the job is deleted it goes
    assert run_cli(harness, "calendars", "delete", "us-holidays")[0] == 4
    assert run_cli(harness, "jobs", "delete", job_id)[0] == 0
    assert run_cli(harness, "calendars", "delete", "us-holidays") == (0, "us-holidays deleted\n")
    assert run_cli(harness, "calendars", "get", "us-holidays")[0] == 3


def test_next_fire_at_skips_the_excluded_dates_as_the_hand_off_does(harness):
    # Given a daily 09:00 Paris job, and Christmas and Boxing Day excluded (now: the 24th, 08:50 UTC)
    put_calendar(harness, "holidays", ["2026-12-25", "2026-12-26"])
    job = harness.create_job(daily_paris(excludeCalendars=["holidays"]))
    assert job["nextFireAt"] == "2026-12-24T08:00:00Z"
    # When the 24th's fire has passed, then the next one shown is the 27th's, as in a list too
    harness.advance(15 * 60, step_ms=5000)
    assert harness.request("GET", f"/v1/jobs/{job['jobId']}")[1]["nextFireAt"] == "2026-12-27T08:00:00Z"
    listed = harness.request("GET", "/v1/jobs")[1]["items"]
    assert [j["nextFireAt"] for j in listed if j["jobId"] == job["jobId"]] == ["2026-12-27T08:00:00Z"]
    # A job naming no calendar is unchanged
    plain = harness.create_job(daily_paris())
    assert plain["nextFireAt"] == "2026-12-25T08:00:00Z"


def test_the_ledger_shows_an_occurrence_to_come_on_an_excluded_date_as_skipped(harness):
    put_calendar(harness, "holidays", ["2026-12-25"])
    job = harness.create_job(daily_paris(excludeCalendars=["holidays"]))
    status, page = harness.request("GET", f"/v1/jobs/{job['jobId']}/occurrences?from=2026-12-24T08:30:00Z"
                                          "&to=2026-12-27T00:00:00Z")
    assert status == 200, page
    assert [(o["scheduledAt"], o["outcome"], o["reason"]) for o in page["items"]] == [
        ("2026-12-25T08:00:00Z", "SKIPPED", "EXCLUDED"), ("2026-12-26T08:00:00Z", "PENDING", None)]
