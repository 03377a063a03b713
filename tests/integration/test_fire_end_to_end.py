"""API → tick → SQS → worker on moto with a fake clock: jobs fire once, at their instant."""
from jobsched.domain.schedule import format_instant, parse_instant

from .harness import FAIL, KEY_B


def http_job(**fields):
    return {"name": "t", "target": {"type": "HTTP", "url": "http://127.0.0.1:9/hook"},
            "payload": {"n": 1}, **fields}


def test_one_time_job_fires_once_at_its_instant(harness):
    # Given a one-time job due 2 min 30.5 s from now
    due = harness.clock.now_ms() + 150_500
    job = harness.create_job(http_job(type="ONE_TIME", runAt=format_instant(due)))
    assert job["state"] == "ACTIVE" and job["nextFireAt"] == format_instant(due)

    # When time passes well beyond it
    harness.advance(300)

    # Then the target was called exactly once, at the due millisecond
    calls = harness.target.calls_for(job["jobId"])
    assert [(c.attempt, c.at_ms) for c in calls] == [(1, due)]
    status, execution = harness.request("GET", f"/v1/executions/{calls[0].execution_id}")
    assert status == 200
    assert execution["status"] == "SUCCEEDED" and execution["lateMs"] == 0
    assert execution["attempts"][0]["status"] == "SUCCEEDED"
    status, again = harness.request("GET", f"/v1/jobs/{job['jobId']}")
    assert again["state"] == "COMPLETED" and again["nextFireAt"] is None


def test_delayed_job_fires_after_its_delay(harness):
    created = harness.clock.now_ms()
    job = harness.create_job(http_job(type="DELAYED", delaySeconds=95))
    harness.advance(240)
    assert [c.at_ms for c in harness.target.calls_for(job["jobId"])] == [created + 95_000]


def test_cron_job_fires_each_matching_minute_in_its_time_zone(harness):
    # Every 2 minutes, in a zone 5 h 30 min off UTC: wall minutes are even there as here.
    job = harness.create_job(http_job(type="CRON", schedule="*/2 * * * *", timezone="Asia/Kolkata"))
    harness.advance(7 * 60)
    fired = [format_instant(c.at_ms) for c in harness.target.calls_for(job["jobId"])]
    assert fired == ["2030-01-01T00:02:00Z", "2030-01-01T00:04:00Z", "2030-01-01T00:06:00Z"]


def test_rate_job_shorter_than_a_minute_fires_every_period(harness):
    job = harness.create_job(http_job(type="RATE", schedule="PT20S"))
    created = harness.clock.now_ms()
    harness.advance(150)
    fired = [c.at_ms - created for c in harness.target.calls_for(job["jobId"])]
    assert fired == [20_000 * k for k in range(1, 8)]


def test_job_created_inside_an_already_claimed_bucket_fires_on_time(harness):
    # Given the ticks have claimed this minute and the next
    harness.advance(60)
    assert harness.clock.now_ms() % 60_000 == 5_000
    # When a job is created 10 s before it is due, in a claimed bucket
    due = harness.clock.now_ms() + 10_000
    job = harness.create_job(http_job(type="ONE_TIME", runAt=format_instant(due)))
    harness.advance(30)
    # Then the writer dispatched it directly and it fired at its instant
    assert [c.at_ms for c in harness.target.calls_for(job["jobId"])] == [due]


def test_duplicate_sqs_delivery_runs_the_target_once(harness):
    job = harness.create_job(http_job(type="DELAYED", delaySeconds=70))
    harness.advance(60)  # the tick has sent the dispatch, delayed until due
    # Duplicate every message in the lanes (at-least-once delivery)
    for url in harness.lane_urls:
        for message in harness.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                                   VisibilityTimeout=0).get("Messages", []):
            harness.sqs.send_message(QueueUrl=url, MessageBody=message["Body"])
            harness.sqs.send_message(QueueUrl=url, MessageBody=message["Body"])
    harness.advance(60)
    assert len(harness.target.calls_for(job["jobId"])) == 1


def test_two_ticks_on_one_segment_run_each_job_once(harness):
    jobs = [harness.create_job(http_job(type="DELAYED", delaySeconds=80 + i)) for i in range(6)]
    # Two ticks of every segment race over the same buckets
    harness.clock.set_ms(harness.clock.now_ms() + 55_000)
    harness.tick_all()
    from jobsched.domain.timers import minute_of
    for segment in range(harness.settings.segments):
        # the second tick re-reads the bucket as if the first had crashed before marking it done
        harness.stores.watermarks._table.update_item(
            Key={"segment": segment}, UpdateExpression="SET doneThrough = :m",
            ExpressionAttributeValues={":m": minute_of(harness.clock.now_ms()) - 1})
    harness.tick_all()
    assert harness.queue_depth() == 12  # every dispatch sent twice
    harness.advance(120)
    for job in jobs:
        assert len(harness.target.calls_for(job["jobId"])) == 1


def test_failed_attempts_retry_with_backoff_then_go_dead(harness):
    job = harness.create_job(http_job(type="DELAYED", delaySeconds=30,
                                      retryPolicy={"maxAttempts": 3, "initialDelayMs": 4000}))
    harness.target.script[job["jobId"]] = [FAIL, FAIL, FAIL]
    harness.advance(120)
    calls = harness.target.calls_for(job["jobId"])
    assert [c.attempt for c in calls] == [1, 2, 3]
    gaps = [b.at_ms - a.at_ms for a, b in zip(calls, calls[1:])]
    assert 2000 <= gaps[0] <= 5000 and 4000 <= gaps[1] <= 9000  # full jitter in [cap/2, cap]
    status, execution = harness.request("GET", f"/v1/executions/{calls[0].execution_id}")
    assert execution["status"] == "DEAD"
    assert [a["status"] for a in execution["attempts"]] == ["FAILED", "FAILED", "FAILED"]


def test_a_retry_that_succeeds_ends_succeeded(harness):
    job = harness.create_job(http_job(type="DELAYED", delaySeconds=30))
    harness.target.script[job["jobId"]] = [FAIL]
    harness.advance(90)
    calls = harness.target.calls_for(job["jobId"])
    assert [c.attempt for c in calls] == [1, 2]
    _, page = harness.request("GET", f"/v1/jobs/{job['jobId']}/executions")
    assert [e["status"] for e in page["items"]] == ["SUCCEEDED"]
    assert page["items"][0]["attempt"] == 2


def test_another_tenants_job_and_execution_answer_404(harness):
    job = harness.create_job(http_job(type="DELAYED", delaySeconds=30))
    harness.advance(60)
    execution_id = harness.target.calls_for(job["jobId"])[0].execution_id
    for path in (f"/v1/jobs/{job['jobId']}", f"/v1/jobs/{job['jobId']}/executions",
                 f"/v1/executions/{execution_id}"):
        status, body = harness.request("GET", path, key=KEY_B)
        assert status == 404, path
        assert body["error"]["code"] == "NOT_FOUND"
