"""Absence alerts: a job's `expect: {successWithinSec}` not met marks the occurrence MISSING once
and alerts once (its onFailure hook, the deployment's alert topic, a metric), under duplicate
delivery too; a later success marks it LATE; an occurrence that never fired is alerted NOT_FIRED."""
import json

from jobsched.domain.executions import Dispatch, DispatchKind
from jobsched.domain.jobs import Priority
from jobsched.domain.schedule import format_instant
from jobsched.settings import Env
from jobsched.store.queues import Outgoing

from .harness import ACCEPTED

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/work"}
ON_FAILURE = {"type": "HTTP", "url": "http://127.0.0.1:9/failed"}
MINUTE = 60_000


def alert_hook_calls(harness, job_id):
    return [c for c in harness.target.calls_for(job_id) if ".hook.missing" in c.execution_id
            or ".hook.notfired" in c.execution_id]


def subscribe_to_alerts(harness) -> str:
    """An SQS queue subscribed to the deployment's alert topic: what an operator would receive."""
    sqs, sns = harness.session.client("sqs"), harness.session.client("sns")
    url = sqs.create_queue(QueueName="alerts-seen")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=harness.envs["worker"][Env.ALERT_TOPIC_ARN], Protocol="sqs", Endpoint=arn,
                  Attributes={"RawMessageDelivery": "true"})
    return url


def alerts_seen(harness, url) -> list[dict]:
    messages = harness.session.client("sqs").receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                                              VisibilityTimeout=0).get("Messages", [])
    return [json.loads(m["Body"]) for m in messages]


def deliver_check_again(harness, job: dict, execution_id: str, deadline_ms: int) -> None:
    """The CHECK dispatch delivered once more (SQS is at-least-once)."""
    dispatch = Dispatch(DispatchKind.CHECK, "tenant-a", job["jobId"], execution_id, deadline_ms, 1)
    harness.stores.lanes.send([Outgoing(Priority.NORMAL, dispatch, 0)])
    harness.deliver()


def test_a_missed_expectation_is_marked_and_alerted_once_under_duplicate_delivery(harness):
    # Given a job that must succeed within a minute, whose target takes the work and never reports
    alerts = subscribe_to_alerts(harness)
    job = harness.create_job({"name": "nightly-export", "type": "DELAYED", "delaySeconds": 70, "target": HOOK,
                              "heartbeatTimeoutSec": 3600, "expect": {"successWithinSec": 60},
                              "onFailure": ON_FAILURE})
    assert job["expect"] == {"successWithinSec": 60}
    harness.target.script[job["jobId"]] = [ACCEPTED]
    harness.advance(70 + 65)
    [execution] = harness.executions_of(job["jobId"])
    # Then, past the deadline, it is marked MISSING and alerted: hook, topic (the metric is counted)
    assert execution["status"] == "RUNNING" and execution["expectation"] == "MISSING"
    [hook] = alert_hook_calls(harness, job["jobId"])
    assert hook.payload["alert"] == "MISSING" and hook.payload["executionId"] == execution["executionId"]
    [sent] = alerts_seen(harness, alerts)
    assert sent["alert"] == "MISSING" and sent["executionId"] == execution["executionId"]
    assert sent["deadline"] == format_instant(execution_deadline(execution))
    # When the same check is delivered twice more
    for _ in range(2):
        deliver_check_again(harness, job, execution["executionId"], execution_deadline(execution))
    harness.advance(30)
    # Then nothing more goes out
    assert len(alert_hook_calls(harness, job["jobId"])) == 1 and alerts_seen(harness, alerts) == [sent]
    # And a success after the deadline marks it LATE (nothing is alerted for it)
    status, _ = harness.request("POST", f"/v1/executions/{execution['executionId']}/complete", {},
                                key=None, headers={"X-Callback-Token": harness.target.tokens[execution["executionId"]]})
    assert status == 200
    assert harness.execution(execution["executionId"])["expectation"] == "LATE"
    _, page = harness.request("GET", f"/v1/jobs/{job['jobId']}/occurrences")
    assert [(r["outcome"], r["expectation"]) for r in page["items"]] == [("FIRED", "LATE")]
    assert harness.request("GET", f"/v1/jobs/{job['jobId']}/stats")[1]["missing"] == 1


def test_two_checks_that_read_before_either_marked_alert_once(harness, monkeypatch):
    """Concurrent duplicates both read the execution unmarked: the conditional mark lets one through."""
    from dataclasses import replace

    from jobsched.store.executions import ExecutionsStore

    alerts = subscribe_to_alerts(harness)
    job = harness.create_job({"name": "racing", "type": "DELAYED", "delaySeconds": 70, "target": HOOK,
                              "heartbeatTimeoutSec": 3600, "expect": {"successWithinSec": 60}})
    harness.target.script[job["jobId"]] = [ACCEPTED]
    harness.advance(80)
    [execution] = harness.executions_of(job["jobId"])
    original = ExecutionsStore.get
    monkeypatch.setattr(ExecutionsStore, "get", lambda self, job_id, execution_id: (
        lambda found: found and replace(found, expectation=None, expectation_at_ms=None, alerted_ms=None))(
        original(self, job_id, execution_id)))
    harness.advance(60)  # the check comes due and is delivered ...
    deliver_check_again(harness, job, execution["executionId"], execution_deadline(execution))  # ... and again
    monkeypatch.setattr(ExecutionsStore, "get", original)
    assert len(alerts_seen(harness, alerts)) == 1
    assert harness.execution(execution["executionId"])["expectation"] == "MISSING"


def execution_deadline(execution: dict) -> int:
    from jobsched.domain.executions import scheduled_ms_of
    return scheduled_ms_of(execution["executionId"]) + 60_000


def test_a_success_in_time_or_a_heartbeat_with_ok_alerts_nothing(harness):
    alerts = subscribe_to_alerts(harness)
    quick = harness.create_job({"name": "q", "type": "RATE", "schedule": "PT1M", "target": HOOK,
                                "expect": {"successWithinSec": 60}, "onFailure": ON_FAILURE})
    slow = harness.create_job({"name": "s", "type": "DELAYED", "delaySeconds": 70, "target": HOOK,
                               "heartbeatTimeoutSec": 3600, "expect": {"successWithinSec": 120},
                               "onFailure": ON_FAILURE})
    harness.target.script[slow["jobId"]] = [ACCEPTED]
    harness.advance(80)
    [running] = harness.executions_of(slow["jobId"])
    status, _ = harness.request("POST", f"/v1/executions/{running['executionId']}/heartbeat", {"ok": True},
                                key=None, headers={"X-Callback-Token": harness.target.tokens[running["executionId"]]})
    assert status == 200
    harness.advance(5 * 60)
    assert all(e["expectation"] is None for e in harness.executions_of(quick["jobId"]) + harness.executions_of(
        slow["jobId"]))
    assert len(harness.executions_of(quick["jobId"])) >= 5
    assert alerts_seen(harness, alerts) == [] and not alert_hook_calls(harness, quick["jobId"] + slow["jobId"])


def test_an_occurrence_that_never_fired_is_alerted_not_fired_once(harness):
    # Given a once-a-minute job with an expectation, whose FIRE timer of 00:03 the tick loses
    alerts = subscribe_to_alerts(harness)
    start = harness.clock.now_ms() // MINUTE * MINUTE
    job = harness.create_job({"name": "lost", "type": "CRON", "schedule": "* * * * *", "target": HOOK,
                              "expect": {"successWithinSec": 60}, "onFailure": ON_FAILURE})
    timers = harness.session.resource("dynamodb").Table(harness.envs["worker"][Env.TIMERS_TABLE])
    lost = [t for t in timers.scan()["Items"] if t["kind"] == "FIRE" and t["jobId"] == job["jobId"]
            and int(t["dueMs"]) == start + 3 * MINUTE]
    assert len(lost) == 1
    for t in lost:
        timers.delete_item(Key={"bucket": t["bucket"], "sk": t["sk"]})
    # When its deadline passes
    harness.advance(5 * 60)
    missing_id = f"{job['jobId']}.{start + 3 * MINUTE:013d}"
    # Then its own check (written with the lost timer's) alerted NOT_FIRED, and once only when it
    # is delivered again; the ledger says so
    [sent] = alerts_seen(harness, alerts)
    assert sent["alert"] == "NOT_FIRED" and sent["executionId"] == missing_id
    deliver_check_again(harness, job, missing_id, start + 4 * MINUTE)
    assert alerts_seen(harness, alerts) == [sent]
    [hook] = alert_hook_calls(harness, job["jobId"])
    assert hook.payload["alert"] == "NOT_FIRED"
    rows = harness.request("GET", f"/v1/jobs/{job['jobId']}/occurrences?from={format_instant(start)}"
                                  f"&to={format_instant(start + 4 * MINUTE)}")[1]["items"]
    assert [(r["outcome"], r["expectation"]) for r in rows] == [("FIRED", None)] * 2 + [("NOT_FIRED", "NOT_FIRED")]
    stats = harness.request("GET", f"/v1/jobs/{job['jobId']}/stats?window=1h")[1]
    assert stats["missing"] == 1 and stats["running"] == 0


def test_a_paused_job_is_not_alerted_for_what_it_did_not_fire(harness):
    alerts = subscribe_to_alerts(harness)
    job = harness.create_job({"name": "p", "type": "CRON", "schedule": "* * * * *", "target": HOOK,
                              "expect": {"successWithinSec": 60}, "onFailure": ON_FAILURE})
    harness.advance(2 * 60)
    assert harness.request("POST", f"/v1/jobs/{job['jobId']}/pause")[0] == 200
    harness.advance(5 * 60)
    assert alerts_seen(harness, alerts) == [] and not alert_hook_calls(harness, job["jobId"])


def test_expect_is_validated_naming_the_field(harness):
    base = {"name": "v", "type": "RATE", "schedule": "PT5M", "target": HOOK}
    for expect, code, field in (({"successWithinSec": 10}, 422, "expect.successWithinSec"),
                                ({"successWithinSec": 8 * 86_400}, 422, "expect.successWithinSec"),
                                ({"successWithinSec": "soon"}, 400, "expect.successWithinSec"),
                                ({"within": 60}, 400, "expect.within")):
        status, body = harness.request("POST", "/v1/jobs", {**base, "expect": expect})
        assert status == code and field in [d["field"] for d in body["error"]["details"]], (expect, body)
