"""The local stack as a user meets it: real HTTP on loopback, real SQS delays, the wall clock.

The one suite that waits on real time (a few seconds): it proves that `make run` fires jobs."""
import json
import os
import time
import urllib.error
import urllib.request

import pytest

from jobsched.local.echo import EchoServer
from jobsched.local.runtime import LocalRuntime, Options
from jobsched.domain.clock import SystemClock
from jobsched.service.auth import ApiKeys
from jobsched.store.aws import build_stores


@pytest.fixture(scope="module")
def local_stack(tmp_path_factory):
    saved_env = dict(os.environ)
    runtime = LocalRuntime(Options(port=0, segments=2, workdir=tmp_path_factory.mktemp("local"))).start()
    ApiKeys(build_stores(runtime.settings).api_keys, SystemClock()).register("e2e", "e2e-key")
    echo = EchoServer()
    yield runtime, echo
    runtime.stop()
    echo.stop()
    os.environ.clear()
    os.environ.update(saved_env)  # the runtime pointed AWS_ENDPOINT_URL at its emulator


def call(runtime, method, path, body=None, key="e2e-key"):
    request = urllib.request.Request(runtime.api_url + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_one_time_job_arrives_once_within_a_second_and_reads_back_succeeded(local_stack):
    runtime, echo = local_stack
    due_s = int(time.time()) + 3
    status, job = call(runtime, "POST", "/v1/jobs", {
        "name": "e2e", "type": "ONE_TIME", "runAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(due_s)),
        "target": {"type": "HTTP", "url": f"{echo.url}/e2e"}, "payload": {"n": 1}})
    assert status == 201, job
    deadline = time.time() + 20
    while time.time() < deadline and not echo.received:
        time.sleep(0.1)
    time.sleep(1.0)  # a duplicate would arrive now
    assert len(echo.received) == 1
    call_ = echo.received[0]
    assert call_["attempt"] == "1" and json.loads(call_["body"]) == {"n": 1}
    assert 0 <= call_["receivedMs"] - due_s * 1000 < 1000
    status, execution = call(runtime, "GET", f"/v1/executions/{call_['executionId']}")
    assert status == 200 and execution["status"] == "SUCCEEDED"


def test_the_local_api_answers_401_and_health(local_stack):
    runtime, _ = local_stack
    assert call(runtime, "GET", "/v1/health", key="")[0] == 200
    status, body = call(runtime, "GET", "/v1/jobs/job_x", key="nope")
    assert status == 401 and body["error"]["code"] == "UNAUTHORIZED"
