"""The local stack as a user meets it: real HTTP on loopback, real SQS delays, the wall clock.

The one suite that waits on real time (a few seconds): it proves that `make run` fires jobs."""
import json
import re
import os
import time
import urllib.error
import urllib.request

import pytest

from jobsched.local.echo import EchoServer
from jobsched.local.__main__ import boot
from jobsched.local.runtime import Options


@pytest.fixture(scope="module")
def local_stack(tmp_path_factory):
    saved_env = dict(os.environ)
    # What `make run` does: start, store the seeded keys, then (only then) answer health 200.
    runtime, _, _ = boot(Options(port=0, emulator_port=0, segments=2, workdir=tmp_path_factory.mktemp("local")),
                         [("e2e", "e2e-key")], progress=lambda text: None)
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


def test_health_is_503_until_the_keys_work_then_the_first_request_with_one_succeeds(local_stack):
    runtime, _ = local_stack
    runtime.ready.clear()  # as while `make run` starts: the keys may not be stored yet
    try:
        assert call(runtime, "GET", "/v1/health", key="")[0] == 503
        status, body = call(runtime, "GET", "/v1/jobs")
        assert status == 503 and body["error"]["code"] == "STARTING"  # not a 401 for a key about to work
    finally:
        runtime.ready.set()
    assert call(runtime, "GET", "/v1/health", key="")[0] == 200
    assert call(runtime, "GET", "/v1/jobs")[0] == 200


def test_the_local_api_answers_a_bad_key_as_api_gateways_authorizer_does_and_health(local_stack):
    runtime, _ = local_stack
    assert call(runtime, "GET", "/v1/health", key="")[0] == 200
    invoked = runtime.gateway.invocations
    # The authorizer's no (API Gateway's 403), before the API function; its answer is cached
    for _ in range(3):
        assert call(runtime, "GET", "/v1/jobs/job_x", key="nope") == (403, {"message": "Forbidden"})
    assert runtime.gateway.invocations == invoked + 1
    # A request without the Authorization header: API Gateway's 401, no authorizer at all
    request = urllib.request.Request(runtime.api_url + "/v1/jobs", method="GET")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert (refused.value.code, json.loads(refused.value.read())) == (401, {"message": "Unauthorized"})


# --- the CLI against the local stack ---------------------------------------------------------
from io import StringIO  # noqa: E402

from jobsched.cli.main import main as cli  # noqa: E402


def run_cli(runtime, *args, key="e2e-key"):
    out = StringIO()
    code = cli(["--url", runtime.api_url, "--api-key", key, *args], out=out)
    return code, out.getvalue()


def test_cli_session_a_newcomer_would_type(local_stack):
    runtime, echo = local_stack
    code, out = run_cli(runtime, "jobs", "create", "--name", "nightly", "--type", "CRON", "--schedule", "0 3 * * *",
                        "--timezone", "Europe/Paris", "--target-url", f"{echo.url}/n", "--payload", '{"a": 1}')
    assert code == 0 and "nightly" in out and "ACTIVE" in out
    code, out = run_cli(runtime, "--json", "jobs", "list")
    jobs = json.loads(out)["items"]
    job_id = next(j["jobId"] for j in jobs if j["name"] == "nightly")
    code, out = run_cli(runtime, "jobs", "list")
    assert code == 0 and out.splitlines()[0].split()[:3] == ["JOB", "ID", "NAME"] and job_id in out
    assert run_cli(runtime, "jobs", "pause", job_id) == (0, f"{job_id} PAUSED\n")
    assert run_cli(runtime, "jobs", "resume", job_id) == (0, f"{job_id} ACTIVE\n")
    code, out = run_cli(runtime, "jobs", "trigger", job_id)
    assert code == 0 and re.fullmatch(r"job_\w+\.\d{13}\.manual\n", out)  # the bare id: $(...) feeds it on
    execution_id = out.strip()
    deadline = time.time() + 10
    while time.time() < deadline and run_cli(runtime, "--json", "executions", "get", execution_id)[1].find(
            '"SUCCEEDED"') < 0:
        time.sleep(0.2)
    code, out = run_cli(runtime, "executions", "get", execution_id)
    assert code == 0 and "SUCCEEDED" in out and "attempts:" in out
    code, out = run_cli(runtime, "executions", "list", job_id)
    assert code == 0 and execution_id in out
    code, out = run_cli(runtime, "jobs", "stats", job_id, "--window", "1h")  # a trigger is not a fire
    assert code == 0 and "fires 0  succeeded 1  failed 0  dead 0" in out and "lateness ms: p50 " in out
    code, out = run_cli(runtime, "preview", "0 3 * * *", "--timezone", "Europe/Paris", "--count", "2",
                        "--after", "2030-06-01T00:00:00Z")
    assert (code, out) == (0, "2030-06-01T01:00:00Z\n2030-06-02T01:00:00Z\n")
    assert run_cli(runtime, "jobs", "delete", job_id) == (0, f"{job_id} CANCELLED\n")
    assert run_cli(runtime, "dead-letters")[0] == 0


def test_cli_exit_codes_and_error_messages(local_stack, capsys):
    runtime, _ = local_stack
    assert run_cli(runtime, "jobs", "get", "job_missing")[0] == 3
    assert "NOT_FOUND" in capsys.readouterr().err
    assert run_cli(runtime, "jobs", "get", "job_missing", key="bad")[0] == 5
    code, _ = run_cli(runtime, "jobs", "create", "--name", "x", "--type", "CRON", "--schedule", "0 25 * * *",
                      "--target-url", "http://127.0.0.1:9/x")
    assert code == 1 and "schedule" in capsys.readouterr().err  # the API's own message, naming the field
    assert run_cli(runtime, "jobs", "create", "--name", "x")[0] == 2
    assert cli(["--url", "http://127.0.0.1:9", "jobs", "list"], out=StringIO()) == 6


def test_cli_manages_keys_in_the_local_emulator(local_stack):
    runtime, _ = local_stack
    local = ["keys", "--endpoint-url", runtime.emulator.url]
    code, out = run_cli(runtime, "--json", *local, "create", "tenant-cli")
    assert code == 0
    issued = json.loads(out)
    code, _ = run_cli(runtime, "jobs", "list", key=issued["apiKey"])
    assert code == 0
    code, out = run_cli(runtime, *local, "list", "tenant-cli")
    assert code == 0 and issued["keyId"] in out
    assert run_cli(runtime, *local, "revoke", issued["keyId"])[0] == 0
    assert run_cli(runtime, *local, "revoke", "key_000000000000")[0] == 3
    # the API caches a key for at most a minute; a fresh container sees the revocation at once
    from jobsched.store.aws import build_stores

    assert build_stores(runtime.settings).api_keys.tenant_for(__import__("hashlib").sha256(
        issued["apiKey"].encode()).hexdigest()) is None


def test_a_hung_target_does_not_hold_back_the_other_jobs_of_its_lane(local_stack):
    """In AWS a lane scales out; locally a batch runs in a container of its own, so one call that
    hangs for its whole timeout holds that container only."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    runtime, echo = local_stack
    release = threading.Event()

    class Hung(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            release.wait(15)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    hung = ThreadingHTTPServer(("127.0.0.1", 0), Hung)
    threading.Thread(target=hung.serve_forever, daemon=True).start()
    try:
        due_s = int(time.time()) + 2
        status, _ = call(runtime, "POST", "/v1/jobs", {
            "name": "hangs", "type": "ONE_TIME", "runAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(due_s)),
            "timeoutSec": 30, "retryPolicy": {"maxAttempts": 1},
            "target": {"type": "HTTP", "url": f"http://127.0.0.1:{hung.server_port}/slow"}})
        assert status == 201
        status, fast = call(runtime, "POST", "/v1/jobs", {
            "name": "every-second", "type": "RATE", "schedule": "PT1S",
            "target": {"type": "HTTP", "url": f"{echo.url}/fast"}})
        assert status == 201, fast
        time.sleep(max(0.0, due_s + 6 - time.time()))
        call(runtime, "POST", f"/v1/jobs/{fast['jobId']}/pause")
        fired = [c for c in echo.received if c["path"] == "/fast"]
        # the hung call started at due_s and is still open: the fast job kept firing meanwhile
        after_hang = [c for c in fired if c["receivedMs"] >= due_s * 1000 + 1000]
        assert len(after_hang) >= 4, [c["receivedMs"] for c in fired]
        gaps = [b["receivedMs"] - a["receivedMs"] for a, b in zip(after_hang, after_hang[1:])]
        assert max(gaps) < 2000, gaps
    finally:
        release.set()
        hung.shutdown()


def test_cli_update_changes_only_what_it_is_given(local_stack, tmp_path):
    runtime, echo = local_stack
    code, out = run_cli(runtime, "--json", "jobs", "create", "--name", "keep-me", "--type", "CRON",
                        "--schedule", "0 3 * * *", "--timezone", "Europe/Paris", "--target-url", f"{echo.url}/k",
                        "--payload", '{"keep": true}', "--max-attempts", "7", "--timeout", "42")
    assert code == 0, out
    job = json.loads(out)
    code, out = run_cli(runtime, "--json", "jobs", "update", job["jobId"], "--schedule", "30 4 * * *")
    assert code == 0, out
    updated = json.loads(out)
    assert updated["schedule"] == "30 4 * * *" and updated["timezone"] == "Europe/Paris"
    assert updated["payload"] == {"keep": True} and updated["retryPolicy"]["maxAttempts"] == 7
    assert updated["timeoutSec"] == 42 and updated["target"]["url"] == f"{echo.url}/k"
    assert updated["version"] == job["version"] + 1
    # based on a version someone else changed since: refused, not applied over their change
    assert run_cli(runtime, "jobs", "update", job["jobId"], "--if-match", str(job["version"]), "--name", "x")[0] == 4
    # a new type drops the old schedule's fields
    code, out = run_cli(runtime, "--json", "jobs", "update", job["jobId"], "--type", "RATE", "--schedule", "PT1H")
    assert code == 0 and json.loads(out)["type"] == "RATE", out


def test_cli_says_a_file_it_cannot_read_is_a_file_problem(local_stack, capsys, tmp_path):
    runtime, _ = local_stack
    assert run_cli(runtime, "jobs", "create", "--file", str(tmp_path / "missing.json"))[0] == 2
    err = capsys.readouterr().err
    assert "--file: cannot read" in err and "cannot reach" not in err


def test_cli_keys_local_finds_the_emulator_make_run_started(local_stack, monkeypatch, capsys):
    runtime, _ = local_stack
    monkeypatch.delenv("JOBSCHED_EMULATOR_URL", raising=False)
    monkeypatch.delenv("JOBSCHED_EMULATOR_PORT", raising=False)
    monkeypatch.setenv("JOBSCHED_WORKDIR", str(runtime.options.workdir))
    code, out = run_cli(runtime, "--json", "keys", "--local", "create", "tenant-local")
    assert code == 0, capsys.readouterr().err
    assert json.loads(out)["tenantId"] == "tenant-local"


def test_a_diamond_runs_in_the_local_stack_in_dependency_order(local_stack):
    runtime, echo = local_stack
    hook = {"type": "HTTP", "url": f"{echo.url}/step"}
    status, job = call(runtime, "POST", "/v1/jobs", {
        "name": "diamond", "type": "ONE_TIME", "runAt": "2099-01-01T00:00:00Z", "payload": {"day": 1},
        "steps": [{"name": "extract", "target": hook},
                  {"name": "transform", "target": hook, "dependsOn": ["extract"]},
                  {"name": "report", "target": hook, "dependsOn": ["extract"]},
                  {"name": "load", "target": hook, "dependsOn": ["transform", "report"]}]})
    assert status == 201, job
    status, run = call(runtime, "POST", f"/v1/jobs/{job['jobId']}/trigger")
    assert status == 202
    deadline = time.time() + 30
    while time.time() < deadline and run["status"] != "SUCCEEDED":
        time.sleep(0.2)
        run = call(runtime, "GET", f"/v1/executions/{run['executionId']}")[1]
    assert run["status"] == "SUCCEEDED", run
    assert [(s["name"], s["status"]) for s in run["steps"]] == [
        ("extract", "SUCCEEDED"), ("transform", "SUCCEEDED"), ("report", "SUCCEEDED"), ("load", "SUCCEEDED")]
    arrived = [c["executionId"].rsplit(".step.", 1)[1] for c in list(echo.received)
               if (c["executionId"] or "").startswith(run["executionId"] + ".step.")]
    assert arrived[0] == "extract" and arrived[-1] == "load" and sorted(arrived[1:3]) == ["report", "transform"]
    assert len(arrived) == 4
    load = next(c for c in echo.received if (c["executionId"] or "").endswith(".step.load"))
    assert set(json.loads(load["body"])["upstream"]) == {"transform", "report"}
    code, out = run_cli(runtime, "executions", "get", run["executionId"])
    assert code == 0 and "steps:" in out and "transform, report" in out


def test_cli_creates_a_job_with_steps_and_hooks_and_rotates_the_signing_secret(local_stack):
    runtime, echo = local_stack
    steps = json.dumps([{"name": "a", "target": {"type": "HTTP", "url": f"{echo.url}/a"}}])
    code, out = run_cli(runtime, "--json", "jobs", "create", "--name", "cli-flow", "--type", "CRON", "--schedule",
                        "0 3 * * *", "--steps", steps, "--on-success-url", f"{echo.url}/done", "--retry-on-4xx",
                        "--flow-control", '{"key": "partner", "maxConcurrency": 2}')
    assert code == 0, out
    job = json.loads(out)
    assert job["steps"][0]["name"] == "a" and job["onSuccess"]["url"] == f"{echo.url}/done" and job["retryOn4xx"]
    assert job["flowControl"] == {"key": "partner", "maxConcurrency": 2}
    code, out = run_cli(runtime, "signing", "rotate", "--grace-sec", "60")
    assert code == 0 and "whsec_" in out and "shown once" in out


def test_cli_tags_bulk_pause_and_backfill(local_stack):
    runtime, echo = local_stack
    for i in range(2):
        code, out = run_cli(runtime, "jobs", "create", "--name", f"etl-{i}", "--type", "CRON", "--schedule",
                            "0 4 * * *", "--target-url", f"{echo.url}/etl")
        assert code == 0, out
    import tempfile  # tags come in a body file

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump({"tags": {"team": "data"}}, handle)
    for i in range(3):
        code, out = run_cli(runtime, "jobs", "create", "--file", handle.name, "--name", f"tagged-{i}", "--type", "CRON",
                            "--schedule", "0 4 * * *", "--target-url", f"{echo.url}/t")
        assert code == 0, out
    code, out = run_cli(runtime, "jobs", "list", "--tag", "team:data")
    assert code == 0 and out.count("tagged-") == 3 and "etl-" not in out
    code, out = run_cli(runtime, "jobs", "bulk", "pause", "--tag", "team:data", "--dry-run")
    assert code == 0 and out.startswith("would apply to 3 of 3")
    code, out = run_cli(runtime, "jobs", "bulk", "pause", "--tag", "team:data", "--reason", "freeze")
    assert code == 0 and out.startswith("applied to 3 of 3")
    code, out = run_cli(runtime, "--json", "jobs", "list", "--tag", "team:data", "--state", "PAUSED")
    assert {j["pausedReason"] for j in json.loads(out)["items"]} == {"freeze"}
    job_id = json.loads(out)["items"][0]["jobId"]
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    code, out = run_cli(runtime, "jobs", "backfill", job_id, "--from", "2020-01-01T00:00:00Z", "--to", now)
    assert code == 1  # more than 1,000 daily occurrences since 2020: refused, naming the field
    code, out = run_cli(runtime, "jobs", "backfill", job_id, "--from", "2026-01-01T00:00:00Z", "--to",
                        "2026-01-03T00:00:00Z")
    assert code == 0 and out.startswith("2 occurrences sent")


def test_a_container_job_runs_its_command_as_a_local_process_with_its_environment_and_deadline(local_stack):
    """`make run`'s container jobs: RunTask on the emulator's ECS, the command run as a process in a
    fresh directory with the task's environment, its exit code in the execution; a task past its
    timeout is stopped (the process killed) and the attempt TIMED_OUT."""
    runtime, _ = local_stack
    setup = runtime.container_setup
    definition = "arn:aws:ecs:us-east-1:123456789012:task-definition/local-e2e:1"

    def container_job(name, command, **extra):
        status, job = call(runtime, "POST", "/v1/jobs", {
            "name": name, "type": "DELAYED", "delaySeconds": 1, "payload": {"rows": 3},
            "retryPolicy": {"maxAttempts": 1},
            "target": {"type": "ECS_TASK", "cluster": setup["cluster"], "taskDefinition": definition,
                       "subnets": [setup["subnet"]], "securityGroups": [setup["securityGroup"]],
                       "container": "main", "command": command, "environment": {"GREETING": "hello"}}, **extra})
        assert status == 201, job
        return job

    script = ("import json, os; p = json.loads(os.environ['JOBSCHED_PAYLOAD']); "
              "print(json.dumps({'rows': p['rows'], 'greeting': os.environ['GREETING'], "
              "'attempt': os.environ['JOBSCHED_ATTEMPT'], 'id': os.environ['JOBSCHED_EXECUTION_ID']})); print('done')")
    jobs = {"ok": container_job("ok", ["python3", "-c", script]),
            "fails": container_job("fails", ["sh", "-c", "exit 3"]),
            "slow": container_job("slow", ["sleep", "60"], timeoutSec=3)}
    ended = {}
    deadline = time.time() + 40
    while time.time() < deadline and len(ended) < len(jobs):
        for name, job in jobs.items():
            page = call(runtime, "GET", f"/v1/jobs/{job['jobId']}/executions")[1]["items"]
            if page and page[0]["status"] not in ("PENDING", "RUNNING"):
                ended[name] = call(runtime, "GET", f"/v1/executions/{page[0]['executionId']}")[1]
        time.sleep(0.3)
    assert set(ended) == set(jobs), {n: e["status"] for n, e in ended.items()}
    ok = ended["ok"]
    assert ok["status"] == "SUCCEEDED" and ok["task"]["exitCode"] == 0
    log = ok["task"]["logUrl"]
    assert log.startswith("file://")
    seen_line, done = open(log[len("file://"):]).read().strip().splitlines()
    assert done == "done"
    seen = json.loads(seen_line)
    assert seen == {"rows": 3, "greeting": "hello", "attempt": "1", "id": ok["executionId"]}
    assert ended["fails"]["status"] == "DEAD" and ended["fails"]["task"]["exitCode"] == 3
    # The CLI shows the task, its exit code and its log link.
    from io import StringIO

    from jobsched.cli.main import main as cli

    out = StringIO()
    assert cli(["--url", runtime.api_url, "--api-key", "e2e-key", "executions", "get",
                ended["fails"]["executionId"]], out=out) == 0
    text = out.getvalue()
    task_lines = dict(line.split(None, 1) for line in text.split("task:\n", 1)[1].splitlines()[:4])
    assert task_lines == {"taskArn": ended["fails"]["task"]["taskArn"], "exitCode": "3",
                          "stoppedReason": "Essential container in task exited",
                          "logUrl": ended["fails"]["task"]["logUrl"]}
    slow = ended["slow"]
    assert slow["status"] == "DEAD" and [a["status"] for a in slow["attempts"]] == ["TIMED_OUT"]
    time.sleep(1.0)  # the runner reports the killed process: the attempt has ended, nothing changes
    assert call(runtime, "GET", f"/v1/executions/{slow['executionId']}")[1]["status"] == "DEAD"
    assert not runtime.task_runner.runs  # no process left running
