"""API and list safeguards that a mutation pass found held by no test: a cursor belongs to the
tenant's list (and, for an indexed list, to its filter and state), a dead-letter cursor to its
tenant, a query value is at most 256 characters, a job id must look like one."""
import base64
import json

import pytest

from jobsched.domain.errors import NotFound
from jobsched.service.handoff import HandOff
from jobsched.service.jobs import JobsService

from .harness import KEY_B, TENANT_A

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}


def cursor_of(key: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode()


def refused_naming_cursor(harness, path, key=KEY_B):
    status, answer = harness.request("GET", path, key=key)
    assert status == 400, answer
    assert [d["field"] for d in answer["error"]["details"]] == ["cursor"], answer


def two_jobs(harness, **fields):
    return [harness.create_job({"name": f"n{i}", "type": "CRON", "schedule": "0 3 * * *", "target": HOOK, **fields})
            for i in range(2)]


def test_a_job_list_cursor_of_another_tenant_is_refused(harness):
    two_jobs(harness)
    status, page = harness.request("GET", "/v1/jobs?limit=1")
    assert status == 200 and page["nextCursor"], page
    refused_naming_cursor(harness, f"/v1/jobs?limit=1&cursor={page['nextCursor']}")


def test_a_state_list_cursor_of_another_tenant_is_refused(harness):
    refused_naming_cursor(harness, "/v1/jobs?state=ACTIVE&cursor=" + cursor_of(
        {"tenantId": TENANT_A, "jobId": "job_0", "state": "ACTIVE"}))


def test_a_state_list_cursor_of_another_state_is_refused(harness):
    refused_naming_cursor(harness, "/v1/jobs?state=PAUSED&cursor=" + cursor_of(
        {"tenantId": "tenant-b", "jobId": "job_0", "state": "ACTIVE"}))


def test_a_tag_list_cursor_of_another_tenant_is_refused(harness):
    two_jobs(harness, tags={"team": "a"})
    status, page = harness.request("GET", "/v1/jobs?limit=1&tag=team:a")
    assert status == 200 and page["nextCursor"], page
    refused_naming_cursor(harness, f"/v1/jobs?limit=1&tag=team:a&cursor={page['nextCursor']}")


def test_a_tag_list_cursor_of_another_filter_is_refused(harness):
    two_jobs(harness, tags={"team": "a"})
    status, page = harness.request("GET", "/v1/jobs?limit=1&tag=team:a")
    assert status == 200 and page["nextCursor"], page
    refused_naming_cursor(harness, f"/v1/jobs?limit=1&tag=team:b&cursor={page['nextCursor']}", key="default")


def test_a_dead_letter_cursor_of_another_tenant_is_refused(harness):
    refused_naming_cursor(harness, "/v1/dead-letters?cursor=" + cursor_of(
        {"jobId": "job_0", "executionId": "job_0.0000000000001", "deadLetterTenant": TENANT_A, "deadAtMs": 1}))


def test_a_query_value_of_more_than_256_characters_is_refused_naming_it(harness):
    status, answer = harness.request("GET", "/v1/jobs?namePrefix=" + "n" * 257)
    assert status == 400, answer
    assert [d["field"] for d in answer["error"]["details"]] == ["namePrefix"], answer


@pytest.mark.parametrize("job_id", ["quota#active"])
def test_a_job_id_that_does_not_look_like_one_is_not_found(harness, job_id):
    # Given a tenant whose quota items (in the jobs table, under the tenant) exist
    harness.create_job({"name": "n", "type": "CRON", "schedule": "0 3 * * *", "target": HOOK})
    service = JobsService(harness.stores, HandOff(harness.stores, harness.clock, harness.settings.segments),
                          harness.clock)
    # When one is asked for by its key as a job id, then it is no job
    with pytest.raises(NotFound):
        service.get(TENANT_A, job_id)
