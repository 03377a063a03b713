"""The Python client (jobsched.client) against the in-process stack: the same API function, its
answers and its errors, through the client's transport."""
import pytest

from jobsched.api import schemas
from jobsched.client import ConflictError, InvalidRequestError, JobRequest, NotFoundError, RateLimitError, Retries

from .harness import ACCEPTED
from .test_long_running_and_policies import accepted_job
from .test_quotas_and_logs import limited_api

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}


def one_time(name: str) -> dict:
    return {"name": name, "type": "DELAYED", "delaySeconds": 3600, "target": HOOK}


def test_a_create_whose_answer_was_lost_is_sent_again_with_its_key_and_makes_one_job(harness):
    sent = []

    def lose_the_first_answer(method, url, headers, body, timeout):
        sent.append(dict(headers))
        answer = harness.transport(method, url, headers, body, timeout)  # the API creates the job
        if len(sent) == 1:
            raise ConnectionResetError("the connection closed before the answer")
        return answer

    client = harness.client()
    client.session.transport = lose_the_first_answer
    job = client.jobs.create(JobRequest(name="once", type="CRON", schedule="0 3 * * *", target=HOOK))
    assert isinstance(job, schemas.Job) and job.name == "once" and job.state == "ACTIVE"
    keys = [headers["Idempotency-Key"] for headers in sent]
    assert len(keys) == 2 and keys[0] == keys[1] and keys[0].startswith("jobsched-py-")  # made here, sent twice
    assert [j.jobId for j in harness.client().jobs.list(name_prefix="once")] == [job.jobId]  # one job
    # A key given by the caller is used as is; another call makes another key, another job
    again = client.jobs.create(one_time("once-more"), idempotency_key="order-42")
    assert sent[-1]["Idempotency-Key"] == "order-42"
    assert client.jobs.create(one_time("once-more"), idempotency_key="order-42").jobId == again.jobId
    with pytest.raises(ConflictError):  # the same key with another body
        client.jobs.create(one_time("something else"), idempotency_key="order-42")


def test_lists_are_iterators_that_follow_the_cursor_page_by_page(harness):
    client = harness.client()
    answer = client.jobs.create_batch([one_time(f"paged-{n}") for n in range(5)])
    assert [r.status for r in answer.results] == [201] * 5
    pager = client.jobs.list(name_prefix="paged-", limit=2)
    pages = list(pager.pages())
    assert [len(p.items) for p in pages] == [2, 2, 1] and pages[-1].nextCursor is None
    assert sorted(job.name for job in pager) == [f"paged-{n}" for n in range(5)]  # every page, read lazily
    first = pager.first_page()
    rest = client.jobs.list(name_prefix="paged-", limit=2, cursor=first.nextCursor)
    assert len(list(rest)) == 3


def test_a_bulk_action_is_followed_page_by_page_to_its_totals(harness, monkeypatch):
    from jobsched.client import BulkRequest
    from jobsched.service import jobs as jobs_service

    monkeypatch.setattr(jobs_service, "BULK_PAGE_MATCHES", 2)
    client = harness.client()
    ids = [r.job.jobId for r in client.jobs.create_batch(
        [{"name": f"bulk-{n}", "type": "RATE", "schedule": "PT1H", "target": HOOK} for n in range(5)]).results]
    request = BulkRequest(action="PAUSE", filter={"namePrefix": "bulk-"}, reason="freeze")
    first = client.jobs.bulk(request, until_done=False)
    assert (first.applied, first.done) == (2, False) and first.bulkId
    total = client.jobs.bulk(request)  # a new bulk, followed to its end: 3 pages
    assert (total.matched, total.done) == (5, True) and sorted(total.jobIds) == sorted(ids)
    assert {client.jobs.get(i).state for i in ids} == {"PAUSED"}


def test_a_waiter_reads_an_execution_until_it_has_ended(harness):
    from jobsched.client import WaitTimeout

    client = harness.client(retries=Retries(sleep=harness.advance, now=lambda: harness.clock.now_ms() / 1000))
    job = client.jobs.create({"name": "waited", "type": "CRON", "schedule": "0 3 * * *", "target": HOOK})
    started = harness.clock.now_ms()
    done = client.executions.wait(client.jobs.trigger(job.jobId).executionId, interval=0.5)
    assert done.status == "SUCCEEDED" and harness.clock.now_ms() - started < 5_000
    _, running = accepted_job(harness)  # a long-running target's execution: RUNNING until it reports
    with pytest.raises(WaitTimeout) as waited:
        client.executions.wait(running, timeout=5)
    assert waited.value.execution.status == "RUNNING"


def test_an_update_changes_only_what_it_is_given_and_a_stale_version_is_a_conflict(harness):
    client = harness.client()
    job = client.jobs.create({"name": "upd", "type": "CRON", "schedule": "0 3 * * *", "target": HOOK,
                              "flowControl": {"key": "partner", "ratePerSecond": 5}, "tags": {"team": "a"}})
    updated = client.jobs.update(job.jobId, {"schedule": "0 4 * * *"})
    assert (updated.schedule, updated.flowControl, updated.tags) == ("0 4 * * *", job.flowControl, {"team": "a"})
    assert updated.version == job.version + 1
    with pytest.raises(ConflictError):  # written meanwhile: the version read is no longer the job's
        client.jobs.update(job.jobId, {"schedule": "0 5 * * *"}, if_match=job.version)


def test_an_invalid_request_raises_the_apis_envelope_with_its_fields(harness):
    client = harness.client()
    with pytest.raises(InvalidRequestError) as invalid:
        client.jobs.create({"name": "bad", "type": "CRON", "schedule": "61 * * * *", "target": HOOK})
    error = invalid.value
    assert error.status == 422 and error.code and "schedule" in error.fields, repr(error)
    assert error.envelope["error"]["details"][0]["field"] == "schedule"
    with pytest.raises(InvalidRequestError) as malformed:  # a field of the wrong type: 400, named
        client.jobs.create({**one_time("x"), "timeoutSec": "soon"})
    assert malformed.value.status == 400 and "timeoutSec" in malformed.value.fields
    with pytest.raises(NotFoundError):
        client.jobs.get("job_nope")


def test_the_quotas_429_is_retried_after_a_pause_and_the_create_goes_through(harness, monkeypatch):
    monkeypatch.setattr(harness, "api", limited_api(harness, MAX_CREATES_PER_SECOND=1))
    slept = []
    client = harness.client(retries=Retries(jitter=lambda: 0.0, sleep=lambda s: (
        slept.append(s), harness.clock.advance_ms(int(s * 1000)))))
    client.jobs.create(one_time("first"))
    second = client.jobs.create(one_time("second"))  # 429 in this second; the retries reach the next
    assert second.name == "second" and slept and sum(slept) >= 0.5
    quiet = harness.client(retries=Retries(max_retries=0))
    with pytest.raises(RateLimitError) as limited:
        quiet.jobs.create(one_time("third"))
    assert limited.value.status == 429 and limited.value.code == "QUOTA_EXCEEDED"


def test_a_long_running_target_heartbeats_and_completes_with_its_token(harness):
    job, execution_id = accepted_job(harness)
    token = harness.target.tokens[execution_id]
    target_client = harness.client(key=None)  # a target holds no API key: its token is enough
    handle = target_client.callback_for({"X-Execution-Id": execution_id, "X-Callback-Token": token})
    beat = handle.heartbeat({"done": 10})
    assert beat.status == "RUNNING" and beat.cancelRequested is False and beat.leaseUntil
    assert handle.complete({"rows": 42}).status == "SUCCEEDED"
    assert harness.client().executions.get(execution_id).output == {"rows": 42}
    with pytest.raises(Exception) as ended:  # no attempt holds the token any more
        handle.heartbeat()
    assert getattr(ended.value, "status", None) == 401
    # fail: the attempt is retried as the job's policy says
    other, second_id = accepted_job(harness, name="long-2")
    harness.target.script[other["jobId"]] = [ACCEPTED]
    failed = target_client.callback(second_id, harness.target.tokens[second_id]).fail("disk full")
    assert failed.attempts[0].status == "FAILED" and failed.attempts[0].error == "disk full"


def test_the_cli_update_keeps_the_fields_it_is_not_given(harness):
    """`jobsched jobs update` sends the job back with only the given flags changed: its hooks,
    flow control, expectation and 4xx retries included, and a job with steps keeps its steps."""
    import json

    from .test_calendars import run_cli

    hooks = {"onSuccess": {"type": "HTTP", "url": "http://127.0.0.1:9/ok"},
             "onFailure": {"type": "HTTP", "url": "http://127.0.0.1:9/dead"},
             "flowControl": {"key": "partner", "maxConcurrency": 2}, "expect": {"successWithinSec": 600},
             "retryOn4xx": True}
    job = harness.create_job({"name": "kept", "type": "CRON", "schedule": "0 3 * * *", "target": HOOK, **hooks})
    steps = [{"name": "a", "target": HOOK}, {"name": "b", "target": HOOK, "dependsOn": ["a"]}]
    dag = harness.create_job({"name": "dag", "type": "CRON", "schedule": "0 3 * * *", "steps": steps})
    for created in (job, dag):
        code, out = run_cli(harness, "--json", "jobs", "update", created["jobId"], "--schedule", "0 4 * * *")
        assert code == 0, out
        updated = json.loads(out)
        assert updated["schedule"] == "0 4 * * *"
        assert {k: updated[k] for k in hooks} == {k: created[k] for k in hooks}
        assert updated.get("steps") == created.get("steps") and updated["target"] == created["target"]
