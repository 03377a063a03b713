"""The job lifecycle over the API, against the tick and the worker."""
import pytest

from jobsched.domain.schedule import format_instant

from .harness import ACCEPTED, FAIL, KEY_B, TENANT_A
from jobsched.store.jobs import job_key
from jobsched.domain.jobs import job_partition
from jobsched.store.jobs_state_index import STATE_SHARD_ATTRIBUTE, state_shard

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}


def rate_job(harness, period="PT1M", **extra):
    return harness.create_job({"name": "r", "type": "RATE", "schedule": period, "target": HOOK, **extra})


def fired(harness, job):
    return [format_instant(c.at_ms) for c in harness.target.calls_for(job["jobId"])]


def test_list_filters_by_state_and_pages_stably_while_jobs_are_added(harness):
    jobs = []
    for _ in range(5):
        jobs.append(rate_job(harness))
        harness.clock.advance_ms(1)
    harness.clock.advance_ms(1)
    harness.request("POST", f"/v1/jobs/{jobs[1]['jobId']}/pause")
    status, first = harness.request("GET", "/v1/jobs?limit=2")
    assert status == 200 and [j["jobId"] for j in first["items"]] == [j["jobId"] for j in jobs[:2]]
    late = rate_job(harness)  # created while the client pages
    seen = [j["jobId"] for j in first["items"]]
    cursor = first["nextCursor"]
    while cursor:
        _, page = harness.request("GET", f"/v1/jobs?limit=2&cursor={cursor}")
        seen += [j["jobId"] for j in page["items"]]
        cursor = page["nextCursor"]
    assert seen == [j["jobId"] for j in jobs] + [late["jobId"]]
    _, paused = harness.request("GET", "/v1/jobs?state=PAUSED")
    assert [j["jobId"] for j in paused["items"]] == [jobs[1]["jobId"]]
    assert harness.request("GET", "/v1/jobs?state=SLEEPING")[0] == 400
    _, other = harness.request("GET", "/v1/jobs", key=KEY_B)
    assert other == {"items": [], "nextCursor": None}


def test_replacing_the_schedule_fires_on_the_new_schedule_only(harness):
    job = rate_job(harness, "PT1M")  # would fire at :05 past each minute
    harness.advance(70)
    assert fired(harness, job) == ["2030-01-01T00:01:05Z"]
    status, updated = harness.request("PUT", f"/v1/jobs/{job['jobId']}",
                                      {"name": "r2", "type": "CRON", "schedule": "*/2 * * * *", "target": HOOK},
                                      headers={"If-Match": str(job["version"])})
    assert status == 200 and updated["version"] == 2 and updated["name"] == "r2"
    harness.advance(300)
    assert fired(harness, job) == ["2030-01-01T00:01:05Z", "2030-01-01T00:02:00Z", "2030-01-01T00:04:00Z",
                                   "2030-01-01T00:06:00Z"]


def test_replace_with_a_stale_version_answers_409(harness):
    job = rate_job(harness)
    body = {"name": "x", "type": "RATE", "schedule": "PT5M", "target": HOOK}
    status, answer = harness.request("PUT", f"/v1/jobs/{job['jobId']}", body, headers={"If-Match": "7"})
    assert status == 409 and answer["error"]["code"] == "CONFLICT"
    assert harness.request("PUT", f"/v1/jobs/{job['jobId']}", body, headers={"If-Match": "one"})[0] == 400


def test_cancel_stops_future_fires_and_keeps_history(harness):
    job = rate_job(harness, "PT20S")
    harness.advance(45)
    assert len(fired(harness, job)) == 2
    status, cancelled = harness.request("DELETE", f"/v1/jobs/{job['jobId']}")
    assert status == 200 and cancelled["state"] == "CANCELLED" and cancelled["nextFireAt"] is None
    harness.advance(180)
    assert len(fired(harness, job)) == 2
    _, history = harness.request("GET", f"/v1/jobs/{job['jobId']}/executions")
    assert [e["status"] for e in history["items"]] == ["SUCCEEDED", "SUCCEEDED"]
    assert harness.request("DELETE", f"/v1/jobs/{job['jobId']}")[0] == 200  # idempotent
    assert harness.request("POST", f"/v1/jobs/{job['jobId']}/resume")[0] == 409


def test_paused_job_does_not_fire_and_resume_starts_from_now(harness):
    job = rate_job(harness, "PT30S")  # grid: :35, :05, :35, ...
    harness.advance(40)
    assert fired(harness, job) == ["2030-01-01T00:00:35Z"]
    status, paused = harness.request("POST", f"/v1/jobs/{job['jobId']}/pause")
    assert status == 200 and paused["state"] == "PAUSED" and paused["nextFireAt"] is None
    harness.advance(160)  # 00:03:25
    assert fired(harness, job) == ["2030-01-01T00:00:35Z"]
    status, resumed = harness.request("POST", f"/v1/jobs/{job['jobId']}/resume")
    assert status == 200 and resumed["state"] == "ACTIVE"
    assert resumed["nextFireAt"] == "2030-01-01T00:03:35Z"  # the next grid point after now
    harness.advance(40)  # 00:04:05
    assert fired(harness, job)[1:] == ["2030-01-01T00:03:35Z", "2030-01-01T00:04:05Z"]


def test_one_time_jobs_cannot_be_paused(harness):
    job = harness.create_job({"name": "o", "type": "DELAYED", "delaySeconds": 600, "target": HOOK})
    status, answer = harness.request("POST", f"/v1/jobs/{job['jobId']}/pause")
    assert status == 409 and "recurring" in answer["error"]["message"]


def test_trigger_runs_once_now_with_its_own_execution_id(harness):
    job = rate_job(harness, "PT1H")
    status, execution = harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger", headers={"Idempotency-Key": "t1"})
    assert status == 202 and execution["status"] == "PENDING"
    again = harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger", headers={"Idempotency-Key": "t1"})[1]
    assert again["executionId"] == execution["executionId"]
    harness.advance(2)
    calls = harness.target.calls_for(job["jobId"])
    assert [c.execution_id for c in calls] == [execution["executionId"]]
    _, done = harness.request("GET", f"/v1/executions/{execution['executionId']}")
    assert done["status"] == "SUCCEEDED"
    _, job_now = harness.request("GET", f"/v1/jobs/{job['jobId']}")
    assert job_now["state"] == "ACTIVE"  # a manual run does not end the schedule


def test_idempotent_create_returns_the_first_job_and_refuses_another_body(harness):
    body = {"name": "once", "type": "DELAYED", "delaySeconds": 30, "target": HOOK}
    first = harness.request("POST", "/v1/jobs", body, headers={"Idempotency-Key": "k-1"})
    second = harness.request("POST", "/v1/jobs", body, headers={"Idempotency-Key": "k-1"})
    assert first[0] == 201 and second[1]["jobId"] == first[1]["jobId"]
    status, answer = harness.request("POST", "/v1/jobs", {**body, "name": "other"}, headers={"Idempotency-Key": "k-1"})
    assert status == 409
    # the key is the tenant's own: another tenant may use it
    assert harness.request("POST", "/v1/jobs", body, key=KEY_B, headers={"Idempotency-Key": "k-1"})[1]["jobId"] \
        != first[1]["jobId"]
    harness.advance(60)
    assert len(harness.target.calls_for(first[1]["jobId"])) == 1
    _, listed = harness.request("GET", "/v1/jobs")
    assert [j["jobId"] for j in listed["items"]] == [first[1]["jobId"]]


def test_dead_letters_list_and_redrive_runs_again(harness):
    job = harness.create_job({"name": "d", "type": "DELAYED", "delaySeconds": 10, "target": HOOK,
                              "retryPolicy": {"maxAttempts": 2, "initialDelayMs": 1000}})
    harness.target.script[job["jobId"]] = [FAIL, FAIL]
    harness.advance(30)
    _, dead = harness.request("GET", "/v1/dead-letters")
    assert [e["jobId"] for e in dead["items"]] == [job["jobId"]] and dead["items"][0]["status"] == "DEAD"
    assert harness.request("GET", "/v1/dead-letters", key=KEY_B)[1]["items"] == []
    execution_id = dead["items"][0]["executionId"]
    assert harness.request("POST", f"/v1/executions/{execution_id}/redrive", key=KEY_B)[0] == 404
    status, redriven = harness.request("POST", f"/v1/executions/{execution_id}/redrive")
    assert status == 202 and redriven["status"] == "PENDING"
    assert harness.request("POST", f"/v1/executions/{execution_id}/redrive")[0] == 409
    harness.advance(2)
    _, done = harness.request("GET", f"/v1/executions/{execution_id}")
    assert done["status"] == "SUCCEEDED" and done["attempt"] == 3
    assert [a["status"] for a in done["attempts"]] == ["FAILED", "FAILED", "SUCCEEDED"]
    assert harness.request("GET", "/v1/dead-letters")[1]["items"] == []


def test_recurring_job_past_its_end_is_completed(harness):
    job = harness.create_job({"name": "e", "type": "RATE", "schedule": "PT30S", "target": HOOK,
                              "endAt": "2030-01-01T00:01:10Z"})
    harness.advance(120)
    assert fired(harness, job) == ["2030-01-01T00:00:35Z", "2030-01-01T00:01:05Z"]
    assert harness.request("GET", f"/v1/jobs/{job['jobId']}")[1]["state"] == "COMPLETED"


def test_aws_expressions_fire_as_translated(harness):
    # cron(0/2 * ? * 3 *): every 2 minutes on AWS day 3 = Tuesday; 1 January 2030 is a Tuesday
    job = harness.create_job({"name": "a", "type": "CRON", "schedule": "cron(0/2 * ? * 3 *)", "target": HOOK})
    assert job["schedule"] == "cron(0/2 * ? * 3 *)"
    rate = harness.create_job({"name": "b", "type": "RATE", "schedule": "rate(1 minute)", "target": HOOK})
    at = harness.create_job({"name": "c", "type": "ONE_TIME", "schedule": "at(2030-01-01T01:03:00)",
                             "timezone": "Europe/Paris", "target": HOOK})
    assert at["runAt"] == "2030-01-01T00:03:00Z"
    harness.advance(200)
    assert fired(harness, job) == ["2030-01-01T00:02:00Z"]
    assert fired(harness, rate) == ["2030-01-01T00:01:05Z", "2030-01-01T00:02:05Z", "2030-01-01T00:03:05Z"]
    assert fired(harness, at) == ["2030-01-01T00:03:00Z"]


def test_schedule_preview(harness):
    status, body = harness.request(
        "GET", "/v1/schedule-preview?type=CRON&schedule=0%209%20*%20*%201-5&timezone=America/New_York&count=3"
               "&after=2030-01-04T00:00:00Z")
    assert status == 200
    assert body["fireTimes"] == ["2030-01-04T14:00:00Z", "2030-01-07T14:00:00Z", "2030-01-08T14:00:00Z"]
    _, aws = harness.request("GET", "/v1/schedule-preview?type=CRON&schedule=cron(0%209%20?%20*%202-6%20*)"
                                    "&timezone=America/New_York&count=3&after=2030-01-04T00:00:00Z")
    assert aws["fireTimes"] == body["fireTimes"]
    assert harness.request("GET", "/v1/schedule-preview?type=CRON&schedule=bad")[0] == 422
    assert harness.request("GET", "/v1/schedule-preview?type=CRON&schedule=*%20*%20*%20*%20*&count=101")[0] == 400
    assert harness.request("GET", "/v1/schedule-preview?type=CRON&schedule=x", key=None)[0] == 401


@pytest.mark.parametrize("method,path,body", [
    ("GET", "/v1/jobs/{job}", None),
    ("PUT", "/v1/jobs/{job}", {"name": "x", "type": "RATE", "schedule": "PT5M", "target": HOOK}),
    ("DELETE", "/v1/jobs/{job}", None),
    ("POST", "/v1/jobs/{job}/pause", None),
    ("POST", "/v1/jobs/{job}/resume", None),
    ("POST", "/v1/jobs/{job}/trigger", None),
    ("GET", "/v1/jobs/{job}/executions", None),
    ("GET", "/v1/executions/{execution}", None),
    ("POST", "/v1/executions/{execution}/redrive", None),
])
def test_every_route_hides_another_tenants_resources(harness, method, path, body):
    job = rate_job(harness, "PT20S")
    harness.advance(25)
    execution = harness.target.calls_for(job["jobId"])[0].execution_id
    status, answer = harness.request(method, path.format(job=job["jobId"], execution=execution), body, key=KEY_B)
    assert status == 404, answer
    assert harness.request("GET", f"/v1/jobs/{job['jobId']}")[1]["state"] == "ACTIVE"


def test_jitter_spreads_a_crowd_of_hourly_jobs_deterministically(harness):
    from jobsched.domain.jobs import jitter_offset_ms

    jobs = [harness.create_job({"name": f"h{i}", "type": "CRON", "schedule": "*/2 * * * *", "target": HOOK,
                                "jitterSec": 40}) for i in range(6)]
    harness.advance(300)
    for job in jobs:
        offset = jitter_offset_ms(job["jobId"], 40)
        expected = [t + offset for t in (1893456120000, 1893456240000)]
        scheduled = [e["scheduledAt"] for e in reversed(harness.executions_of(job["jobId"]))]
        assert scheduled == [format_instant(t) for t in expected]
        # Under the fake clock, jobs due within one second share a worker and wait for each other
        # there; in AWS each batch record runs concurrently. Either way: well under a second late.
        calls = harness.target.calls_for(job["jobId"])
        assert all(0 <= c.at_ms - t < 1000 for c, t in zip(calls, expected))
    assert len({harness.executions_of(j["jobId"])[0]["scheduledAt"] for j in jobs}) == len(jobs)


def test_a_state_filtered_list_reads_its_matches_not_the_tenants_history(harness, monkeypatch):
    """Issue 28, item 8: `GET /v1/jobs?state=` filtered a query of every job of the tenant, so a
    page of 3 ACTIVE jobs among 80 ended ones read all 83 (100 a round trip: 20 s at a large
    history). It now reads the JobsByState index and the matching jobs only."""
    from .capacity import ReadUnits

    active = [rate_job(harness) for _ in range(3)]
    ended = harness.create_job({"name": "once", "type": "DELAYED", "delaySeconds": 10, "target": HOOK})
    harness.advance(20)
    table = harness.session.resource("dynamodb").Table(harness.settings.jobs_table)
    item = table.get_item(Key=job_key(TENANT_A, ended["jobId"]))["Item"]
    assert item["state"] == "COMPLETED"
    with table.batch_writer() as batch:  # a tenant's history: 80 ended jobs, older than the active ones
        for i in range(80):
            job_id = f"job_{i:012x}k{0:019x}"  # as new_job_id makes them: on the tenant's job keys
            batch.put_item(Item={**item, "tenantId": job_partition(TENANT_A, job_id), "jobId": job_id,
                                 STATE_SHARD_ATTRIBUTE: state_shard(TENANT_A, "COMPLETED", job_id)})
    reads = ReadUnits(harness.settings.jobs_table).install(monkeypatch)
    _, page = harness.request("GET", "/v1/jobs?state=ACTIVE&limit=10")
    monkeypatch.undo()
    assert sorted(j["jobId"] for j in page["items"]) == sorted(j["jobId"] for j in active)
    assert page["nextCursor"] is None
    assert reads.items_read <= 2 * len(active), (reads.items_read, reads.calls)
    _, completed = harness.request("GET", "/v1/jobs?state=COMPLETED&limit=50")
    assert len(completed["items"]) == 50 and completed["nextCursor"]
    _, rest = harness.request("GET", f"/v1/jobs?state=COMPLETED&limit=50&cursor={completed['nextCursor']}")
    assert len(rest["items"]) == 31 and rest["nextCursor"] is None
    assert harness.request("GET", f"/v1/jobs?state=ACTIVE&cursor={completed['nextCursor']}")[0] == 400


def quota_used(harness, tenant=TENANT_A):
    """The tenant's places among the jobs that have not ended (every shard's counter)."""
    table = harness.session.resource("dynamodb").Table(harness.settings.jobs_table)
    items = table.query(KeyConditionExpression="tenantId = :t AND begins_with(jobId, :q)",
                        ExpressionAttributeValues={":t": tenant, ":q": "quota#active"}, ConsistentRead=True)["Items"]
    return sum(int(i["used"]) for i in items)


def assert_ended_one_off(harness, job):
    _, now = harness.request("GET", f"/v1/jobs/{job['jobId']}")
    assert now["state"] == "COMPLETED" and now["nextFireAt"] is None
    _, active = harness.request("GET", "/v1/jobs?state=ACTIVE")
    assert job["jobId"] not in [j["jobId"] for j in active["items"]]
    _, bulk = harness.request("POST", "/v1/jobs/bulk", {"action": "CANCEL", "filter": {"state": "ACTIVE"},
                                                         "dryRun": True})
    assert job["jobId"] not in bulk["jobIds"]
    assert quota_used(harness) == 0


def test_a_one_off_job_whose_waiting_retry_is_cancelled_ends_and_gives_its_quota_back_once(harness):
    job = harness.create_job({"name": "w", "type": "DELAYED", "delaySeconds": 10, "target": HOOK,
                              "retryPolicy": {"maxAttempts": 3, "initialDelayMs": 60000}})
    assert quota_used(harness) == 1
    harness.target.script[job["jobId"]] = [FAIL]
    harness.advance(12)
    [execution] = harness.executions_of(job["jobId"])
    assert execution["status"] == "FAILED"
    status, cancelled = harness.request("POST", f"/v1/executions/{execution['executionId']}/cancel")
    assert status == 202 and cancelled["status"] == "CANCELLED"
    assert_ended_one_off(harness, job)
    harness.advance(120)  # the retry's message comes back: its end is looked at again, nothing twice
    assert len(harness.target.calls_for(job["jobId"])) == 1
    assert_ended_one_off(harness, job)


def test_a_one_off_job_whose_running_execution_is_cancelled_ends(harness):
    job = harness.create_job({"name": "long", "type": "ONE_TIME", "runAt": "2030-01-01T00:00:30Z",
                              "target": HOOK, "heartbeatTimeoutSec": 60})
    harness.target.script[job["jobId"]] = [ACCEPTED]
    harness.advance(31)
    [call] = harness.target.calls_for(job["jobId"])
    assert harness.request("POST", f"/v1/executions/{call.execution_id}/cancel")[0] == 202
    token = harness.target.tokens[call.execution_id]
    status, beat = harness.request("POST", f"/v1/executions/{call.execution_id}/heartbeat", {"progress": {}},
                                   key=None, headers={"X-Callback-Token": token})
    assert status == 200 and beat["status"] == "CANCELLED"
    assert_ended_one_off(harness, job)
    harness.advance(600)  # its lease check comes due: nothing more
    assert_ended_one_off(harness, job)


def test_a_cancelled_trigger_of_a_one_off_job_does_not_end_it(harness):
    job = harness.create_job({"name": "t", "type": "DELAYED", "delaySeconds": 600, "target": HOOK})
    _, pending = harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger")
    assert harness.request("POST", f"/v1/executions/{pending['executionId']}/cancel")[0] == 202
    _, now = harness.request("GET", f"/v1/jobs/{job['jobId']}")
    assert now["state"] == "ACTIVE" and quota_used(harness) == 1
    harness.advance(610)
    assert len(harness.target.calls_for(job["jobId"])) == 1  # its own occurrence ran, then it ended
    assert_ended_one_off(harness, job)


def test_a_crash_after_cancelling_a_waiting_retry_is_completed_by_its_message(harness, monkeypatch):
    from jobsched.service.outcomes import Outcomes

    job = harness.create_job({"name": "w", "type": "DELAYED", "delaySeconds": 10, "target": HOOK,
                              "retryPolicy": {"maxAttempts": 3, "initialDelayMs": 60000}})
    harness.target.script[job["jobId"]] = [FAIL]
    harness.advance(12)
    [execution] = harness.executions_of(job["jobId"])

    def dies(self, job, execution):
        raise RuntimeError("the API process died after the cancel was written")

    monkeypatch.setattr(Outcomes, "after_cancel", dies)
    assert harness.request("POST", f"/v1/executions/{execution['executionId']}/cancel")[0] == 500
    monkeypatch.undo()
    assert harness.execution(execution["executionId"])["status"] == "CANCELLED"
    assert harness.request("GET", f"/v1/jobs/{job['jobId']}")[1]["state"] == "ACTIVE"
    harness.advance(120)  # the retry's message finds it CANCELLED: what follows its end is done then
    assert len(harness.target.calls_for(job["jobId"])) == 1
    assert_ended_one_off(harness, job)


def racing_saves(monkeypatch, harness, times):
    """The next `times` job writes each lose the race: another change of the same job is written
    between their read and their write (as a concurrent request's would be)."""
    from dataclasses import replace

    store = type(harness.stores.jobs)
    original, raced = store.save, []

    def save(self, before, after):
        if len(raced) < times and after is not before:
            raced.append(before.job_id)
            current = self.get(before.tenant_id, before.job_id, consistent=True)
            original(self, current, replace(current, version=current.version + 1))
        return original(self, before, after)

    monkeypatch.setattr(store, "save", save)
    return raced


def test_a_plain_change_retries_a_concurrent_write_and_if_match_keeps_its_409(harness, monkeypatch):
    job = rate_job(harness)
    path = f"/v1/jobs/{job['jobId']}"
    raced = racing_saves(monkeypatch, harness, 1)
    status, paused = harness.request("POST", f"{path}/pause")
    assert status == 200 and paused["state"] == "PAUSED" and raced  # lost once, made again on a fresh read
    racing_saves(monkeypatch, harness, 1)
    assert harness.request("POST", f"{path}/resume")[1]["state"] == "ACTIVE"
    body = {"name": "r2", "type": "RATE", "schedule": "PT5M", "target": HOOK}
    racing_saves(monkeypatch, harness, 1)
    status, replaced = harness.request("PUT", path, body)
    assert status == 200 and replaced["name"] == "r2"
    # With If-Match the client asked for the lock: a concurrent change answers 409 as before
    current = harness.request("GET", path)[1]
    racing_saves(monkeypatch, harness, 1)
    status, answer = harness.request("PUT", path, body, headers={"If-Match": str(current["version"])})
    assert status == 409 and answer["error"]["code"] == "CONFLICT"
    # Bounded: a job changed under every try still answers 409 in the end
    raced = racing_saves(monkeypatch, harness, 100)
    assert harness.request("POST", f"{path}/pause")[0] == 409 and len(raced) == 5
