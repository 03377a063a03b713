"""The local stack remembers: jobs, keys, history and queued messages survive a restart, and a
job due after the restart fires once, on time."""
import json
import os
import time

import pytest

from jobsched.domain.clock import SystemClock
from jobsched.local.__main__ import boot
from jobsched.local.echo import EchoServer
from jobsched.local.runtime import Options
from jobsched.service.auth import ApiKeys
from jobsched.store.aws import build_stores

from .test_local_stack import call as http_call


def call(runtime, method, path, body=None, key="k1"):
    return http_call(runtime, method, path, body, key)


@pytest.fixture
def boots():
    """boot() that stops, at the end of the test, every stack it started: a failed assertion
    leaves no API, ticks or pollers running into the tests that follow."""
    started = []

    def start(*args, **kwargs):
        booted = boot(*args, **kwargs)
        started.append(booted[0])
        return booted

    yield start
    for runtime in started:
        runtime.stop()


def wait_for(predicate, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def test_jobs_keys_history_and_queued_messages_survive_a_restart(tmp_path, boots):
    saved_env = dict(os.environ)
    echo = EchoServer()
    workdir = tmp_path / "local"
    quiet = lambda text: None  # noqa: E731
    try:
        runtime, _, _ = boots(Options(port=0, segments=2, workdir=workdir), [("tenant-1", "k1")], progress=quiet)
        ApiKeys(build_stores(runtime.settings).api_keys, SystemClock()).register("tenant-2", "k2")  # made at run time
        status, nightly = call(runtime, "POST", "/v1/jobs", {
            "name": "nightly", "type": "CRON", "schedule": "0 3 * * *", "target": {"type": "HTTP", "url": f"{echo.url}/n"}})
        assert status == 201
        status, execution = call(runtime, "POST", f"/v1/jobs/{nightly['jobId']}/trigger")
        assert status == 202
        assert wait_for(lambda: call(runtime, "GET", f"/v1/executions/{execution['executionId']}")[1]["status"]
                        == "SUCCEEDED", 10)
        due_s = int(time.time()) + 20
        status, later = call(runtime, "POST", "/v1/jobs", {
            "name": "after-restart", "type": "ONE_TIME",
            "runAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(due_s)),
            "target": {"type": "HTTP", "url": f"{echo.url}/later"}})
        assert status == 201
        runtime.stop()

        runtime, _, _ = boots(Options(port=0, segments=2, workdir=workdir), [], progress=quiet)
        assert runtime.state_path is not None and runtime.state_path.is_file()
        status, jobs = call(runtime, "GET", "/v1/jobs")  # the seeded key of the first start still works
        assert status == 200 and {j["name"] for j in jobs["items"]} == {"nightly", "after-restart"}
        assert call(runtime, "GET", "/v1/jobs", key="k2")[0] == 200  # and the key made at run time
        status, history = call(runtime, "GET", f"/v1/jobs/{nightly['jobId']}/executions")
        assert status == 200 and [e["status"] for e in history["items"]] == ["SUCCEEDED"]
        assert wait_for(lambda: [c for c in echo.received if c["path"] == "/later"], due_s - time.time() + 10)
        time.sleep(1.5)  # a duplicate would arrive now
        fired = [c for c in echo.received if c["path"] == "/later"]
        assert len(fired) == 1, fired
        assert 0 <= fired[0]["receivedMs"] - due_s * 1000 < 1000, fired[0]["receivedMs"] - due_s * 1000
        runtime.stop()
    finally:
        echo.stop()
        os.environ.clear()
        os.environ.update(saved_env)


def test_reset_starts_empty(tmp_path, boots):
    saved_env = dict(os.environ)
    workdir = tmp_path / "local"
    quiet = lambda text: None  # noqa: E731
    try:
        runtime, _, _ = boots(Options(port=0, segments=2, workdir=workdir), [("tenant-1", "k1")], progress=quiet)
        assert call(runtime, "POST", "/v1/jobs", {"name": "x", "type": "RATE", "schedule": "PT1H",
                                                  "target": {"type": "HTTP", "url": "http://127.0.0.1:9/x"}})[0] == 201
        runtime.stop()
        runtime, _, _ = boots(Options(port=0, segments=2, workdir=workdir, reset=True), [("tenant-1", "k1")],
                             progress=quiet)
        assert call(runtime, "GET", "/v1/jobs")[1]["items"] == []
        runtime.stop()
    finally:
        os.environ.clear()
        os.environ.update(saved_env)


def test_a_rotated_signing_secret_still_signs_calls_after_a_restart(tmp_path, boots):
    # The state keeps the tenants' secrets encrypted with the stack's KMS key: the key's material
    # must survive the restart too, or every signed call fails with AccessDenied on Decrypt.
    saved_env = dict(os.environ)
    echo = EchoServer()
    workdir = tmp_path / "local"
    quiet = lambda text: None  # noqa: E731
    try:
        runtime, _, _ = boots(Options(port=0, segments=2, workdir=workdir), [("tenant-1", "k1")], progress=quiet)
        assert call(runtime, "POST", "/v1/signing-secrets/rotate", {})[0] == 201
        status, job = call(runtime, "POST", "/v1/jobs", {
            "name": "signed", "type": "RATE", "schedule": "PT1H", "target": {"type": "HTTP", "url": f"{echo.url}/s"}})
        assert status == 201
        runtime.stop()
        assert oct((runtime.state_path.stat().st_mode) & 0o777) == "0o600"  # it holds the key's material

        runtime, _, _ = boots(Options(port=0, segments=2, workdir=workdir), [], progress=quiet)
        status, execution = call(runtime, "POST", f"/v1/jobs/{job['jobId']}/trigger")
        assert status == 202
        assert wait_for(lambda: call(runtime, "GET", f"/v1/executions/{execution['executionId']}")[1]["status"]
                        == "SUCCEEDED", 15), json.dumps(call(runtime, "GET", f"/v1/executions/{execution['executionId']}"))
        assert call(runtime, "POST", "/v1/signing-secrets/rotate", {})[0] == 201  # the previous one decrypts
        runtime.stop()
    finally:
        echo.stop()
        os.environ.clear()
        os.environ.update(saved_env)


def test_a_container_job_runs_again_after_a_restart_and_a_cli_made_tenant_has_its_definition(tmp_path, boots,
                                                                                              monkeypatch):
    """The container network's ids are the stack's printed ones at every start (new ones ended a
    kept job DEAD, InvalidSubnetID.NotFound), and a tenant made with `jobsched keys --local create`
    gets its task definition, then and at every later start."""
    from io import StringIO

    from jobsched.cli.main import main as cli

    saved_env = dict(os.environ)
    workdir = tmp_path / "local"
    quiet = lambda text: None  # noqa: E731
    for name in ("JOBSCHED_EMULATOR_URL", "JOBSCHED_EMULATOR_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("JOBSCHED_WORKDIR", str(workdir))

    def container_job(runtime, key, tenant):
        setup = runtime.container_setup
        status, job = call(runtime, "POST", "/v1/jobs", {
            "name": "kept", "type": "RATE", "schedule": "PT1H", "retryPolicy": {"maxAttempts": 1},
            "target": {"type": "ECS_TASK", "cluster": setup["cluster"], "container": "main",
                       "taskDefinition": f"arn:aws:ecs:us-east-1:123456789012:task-definition/local-{tenant}:1",
                       "subnets": [setup["subnet"]], "securityGroups": [setup["securityGroup"]],
                       "command": ["sh", "-c", "echo ran"]}}, key=key)
        assert status == 201, job
        return job

    def runs(runtime, key, job):
        status, execution = call(runtime, "POST", f"/v1/jobs/{job['jobId']}/trigger", key=key)
        assert status == 202, execution
        path = f"/v1/executions/{execution['executionId']}"
        wait_for(lambda: call(runtime, "GET", path, key=key)[1]["status"] not in ("PENDING", "RUNNING"), 30)
        return call(runtime, "GET", path, key=key)[1]

    try:
        runtime, _, _ = boots(Options(port=0, segments=2, workdir=workdir), [("tenant-1", "k1")], progress=quiet)
        out = StringIO()
        assert cli(["--json", "keys", "--local", "create", "tenant-cli"], out=out) == 0
        made = json.loads(out.getvalue())
        assert made["taskDefinition"].endswith("task-definition/local-tenant-cli:1")
        printed = runtime.container_setup
        jobs = {"k1": container_job(runtime, "k1", "tenant-1"),
                made["apiKey"]: container_job(runtime, made["apiKey"], "tenant-cli")}
        for key, job in jobs.items():
            assert runs(runtime, key, job)["status"] == "SUCCEEDED"
        runtime.stop()

        runtime, _, _ = boots(Options(port=0, segments=2, workdir=workdir), [], progress=quiet)
        assert runtime.container_setup == printed
        for key, job in jobs.items():
            execution = runs(runtime, key, job)
            assert execution["status"] == "SUCCEEDED", execution
        runtime.stop()
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
