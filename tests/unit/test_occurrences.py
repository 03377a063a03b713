"""The occurrence ledger's domain (a page's first occurrences explained by records before it) and
its CLI; absence alerts' CLI flag."""
from io import StringIO

from jobsched.domain.executions import Execution, ExecutionStatus, execution_id_for
from jobsched.domain.jobs import Job, JobSpec, JobState, Target, TargetType
from jobsched.domain.occurrences import Outcome, Reason, ledger, occurrence_times
from jobsched.domain.schedule import parse_instant, rate_schedule

T0 = parse_instant("2030-01-01T00:00:00Z", "t")
MINUTE = 60_000


def every_minute_job() -> Job:
    spec = JobSpec(name="j", schedule=rate_schedule("PT1M", T0 - MINUTE), target=Target(TargetType.HTTP, {"url": "x"}))
    return Job("t", "job_1", spec, JobState.ACTIVE, 1, 1, T0 - MINUTE, T0 - MINUTE)


def test_a_missed_window_record_before_the_page_covers_its_first_occurrences():
    # Given a catch-up's one MISSED_WINDOW record, under an occurrence before the page, reaching into it
    job = every_minute_job()
    times = occurrence_times(job, T0 + 10 * MINUTE, T0 + 14 * MINUTE, 100)
    record = Execution("job_1", execution_id_for("job_1", T0), "t", T0, ExecutionStatus.SKIPPED, 0,
                       skip_reason="MISSED_WINDOW", skipped_count=12, skipped_through_ms=T0 + 11 * MINUTE)
    # When the page is answered with that record among those just before it
    rows = ledger(job, times, [], [record], now_ms=T0 + 20 * MINUTE)
    # Then the covered occurrences say so, and the next ones are unexplained
    assert [(r.outcome, r.reason) for r in rows] == [(Outcome.SKIPPED, Reason.MISSED_WINDOW)] * 2 + [
        (Outcome.NOT_FIRED, None)] * 2
    assert rows[0].execution_id == record.execution_id


def test_the_cli_asks_for_the_window_and_prints_each_occurrence():
    from jobsched.cli.main import build_parser, run_command

    from .api_answers import FakeApi

    api = FakeApi(lambda method, path, query: {
        "items": [{"scheduledAt": "2030-01-01T00:05:00Z", "outcome": "SKIPPED", "reason": "PAUSED",
                   "executionId": None, "lateMs": None, "status": None, "expectation": None,
                   "detail": "paused from 2030-01-01T00:04:00Z to 2030-01-01T00:09:00Z"}],
        "nextCursor": None, "from": query["from"], "to": query["to"]})
    args = build_parser().parse_args(["jobs", "occurrences", "job_1", "--from", "2030-01-01T00:00:00Z",
                                      "--to", "2030-01-01T01:00:00Z"])
    out = StringIO()
    assert run_command(args, api.client, out) == 0
    assert api.calls == [("GET", "/v1/jobs/job_1/occurrences",
                          {"from": "2030-01-01T00:00:00Z", "to": "2030-01-01T01:00:00Z", "limit": "20"})]
    assert "SKIPPED  PAUSED" in out.getvalue() and "paused from 2030-01-01T00:04:00Z" in out.getvalue()


def test_the_cli_sends_expect():
    from jobsched.cli.main import build_parser, job_body

    args = build_parser().parse_args(["jobs", "create", "--name", "j", "--type", "RATE", "--schedule", "PT1M",
                                      "--target-url", "https://example.com/hook", "--expect-success-within", "600"])
    assert job_body(args)["expect"] == {"successWithinSec": 600}
