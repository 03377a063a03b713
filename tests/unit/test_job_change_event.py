"""A bulk action's change of one job, as the event sent to the region that holds the job: the
same key and authorizer context, the single-job route's method, path and body, in either API
type's proxy event (store/region_apis.py job_change_event)."""
import json

import pytest

from jobsched.handlers.api import authorized_tenant
from jobsched.local.events import STAGE, api_gateway_event
from jobsched.store.region_apis import job_change_event


@pytest.mark.parametrize("api", ["http", "rest"])
def test_a_bulk_request_becomes_the_jobs_own_change_with_the_same_key(api):
    bulk = api_gateway_event("POST", "/v1/jobs/bulk?x=1", {"Authorization": "Bearer k", "Content-Length": "70"},
                             json.dumps({"action": "PAUSE", "filter": {"namePrefix": "a"}}), api=api)
    bulk["requestContext"]["authorizer"] = {"tenantId": "tenant-a"}
    event = job_change_event(bulk, "POST", "/v1/jobs/job_1/pause", {"reason": "r"})
    assert (event["httpMethod"], event["path"], json.loads(event["body"])) == ("POST", "/v1/jobs/job_1/pause",
                                                                               {"reason": "r"})
    assert event["requestContext"]["httpMethod"] == "POST"
    assert event["requestContext"]["path"] == ("/v1/jobs/job_1/pause" if api == "http"
                                               else f"/{STAGE}/v1/jobs/job_1/pause")
    assert event["queryStringParameters"] is None and event["multiValueQueryStringParameters"] is None
    headers = {k.lower(): v for k, v in event["headers"].items()}
    assert headers.get("authorization") == "Bearer k" and "content-length" not in headers
    assert authorized_tenant(event) == "tenant-a"
    if api == "rest":
        assert event["pathParameters"] == {"proxy": "v1/jobs/job_1/pause"}
    cancel = job_change_event(bulk, "DELETE", "/v1/jobs/job_1", None)
    assert (cancel["httpMethod"], cancel["body"]) == ("DELETE", None)
    assert bulk["path"] == "/v1/jobs/bulk"  # the bulk request's own event is unchanged
