"""Tenant keys are checked by the API's Lambda authorizer, before the API function: a flood of bad
keys is answered by API Gateway and the authorizer (its own reserved executions, its answers
cached per key), and never fills the API function's. The requests here go through API Gateway's
authorizer step as the template configures it (local/gateway_auth.py), in the in-process stack
under the strict layer (the authorizer's role is the template's)."""
import pytest

from jobsched.handlers.authorizer import TENANT_CONTEXT_KEY
from jobsched.local.events import api_gateway_event, http_response, json_or_text
from jobsched.service.auth import ApiKeys

from .harness import KEY_A, TENANT_A


@pytest.fixture
def counted(harness):
    """The harness, with its API function's invocations counted (a spy on the function)."""
    calls = []
    invoke = harness.api.invoke

    def spy(event):
        calls.append(event)
        return invoke(event)
    harness.api.invoke = spy
    return harness, calls


def gateway(harness, method, path, key):
    return harness.request(method, path, key=key, through_gateway=True)


def test_a_bad_key_never_invokes_the_api_function_and_its_refusal_is_cached(counted):
    harness, api_calls = counted
    # A flood of requests with the same bad key: API Gateway answers them
    for _ in range(20):
        status, body = gateway(harness, "GET", "/v1/jobs", "not-a-key")
        assert (status, body) == (403, {"message": "Forbidden"})
    # with one authorizer invocation for the key (its answer cached), and no API invocation
    assert harness.gateway.invocations == 1 and api_calls == []
    # Without a key at all, API Gateway answers 401 without invoking either
    assert gateway(harness, "POST", "/v1/jobs", None) == (401, {"message": "Unauthorized"})
    assert harness.gateway.invocations == 1 and api_calls == []


def test_a_good_key_reaches_the_api_function_which_takes_the_authorizers_tenant(counted):
    harness, api_calls = counted
    for _ in range(3):
        status, body = gateway(harness, "GET", "/v1/jobs", KEY_A)
        assert status == 200 and body["items"] == [], body
    # One authorizer invocation for the three requests (cached), each request one API invocation
    assert harness.gateway.invocations == 1 and len(api_calls) == 3
    assert api_calls[0]["requestContext"]["authorizer"] == {TENANT_CONTEXT_KEY: TENANT_A}
    # The API function trusts the authorizer's context: no key of its own to check
    job = harness.create_job({"name": "mine", "type": "DELAYED", "delaySeconds": 60,
                              "target": {"type": "HTTP", "url": "https://example.com/x"}})
    event = api_gateway_event("GET", f"/v1/jobs/{job['jobId']}", {}, None, api=harness.api_type)
    event["requestContext"]["authorizer"] = {"lambda": {TENANT_CONTEXT_KEY: TENANT_A}}  # payload 2.0's place too
    status, _, raw = http_response(harness.api.invoke(event))
    assert status == 200 and json_or_text(raw)["jobId"] == job["jobId"]


def test_routes_without_a_key_skip_the_authorizer(counted):
    harness, api_calls = counted
    assert gateway(harness, "GET", "/v1/health", None)[0] == 200
    assert gateway(harness, "GET", "/v1/openapi.json", None)[0] == 200
    # A long-running target's callback carries its own token, not a tenant key: the function decides
    status, body = gateway(harness, "POST", "/v1/executions/exec_x/heartbeat", None)
    assert status in (401, 404) and "error" in body, body
    assert harness.gateway.invocations == 0 and len(api_calls) == 3


def test_a_revoked_key_works_until_the_authorizers_cache_ends(counted):
    harness, api_calls = counted
    registry = ApiKeys(harness.stores.api_keys, harness.clock)
    key_id = registry.register(TENANT_A, "jsk_soon_revoked")
    assert gateway(harness, "GET", "/v1/jobs", "jsk_soon_revoked")[0] == 200
    harness.stores.api_keys.revoke(key_id, harness.clock.now_ms())
    harness.clock.advance_ms(59_000)
    assert gateway(harness, "GET", "/v1/jobs", "jsk_soon_revoked")[0] == 200  # API Gateway's cached answer
    harness.clock.advance_ms(1_000)  # the authorizer's TTL (60 s) is over
    assert gateway(harness, "GET", "/v1/jobs", "jsk_soon_revoked") == (403, {"message": "Forbidden"})
    assert len(api_calls) == 2
