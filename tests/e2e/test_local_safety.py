"""The local stack protects itself: no job reaches its own endpoints, its emulator's control routes
need the stack's secret, health says when the emulator is gone, and bodies that are not UTF-8 are
refused. Plus what a new user of the CLI meets (tags, bulk filters, stats in the work directory)."""
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from io import StringIO

import pytest

from jobsched.cli.main import main as cli
from jobsched.local.__main__ import boot
from jobsched.local import strict_aws
from jobsched.local.echo import EchoServer
from jobsched.local.runtime import Options

KEY = "safety-key"


@pytest.fixture(scope="module")
def local_stack(tmp_path_factory):
    saved_env = dict(os.environ)
    runtime, _, _ = boot(Options(port=0, emulator_port=0, segments=2, workdir=tmp_path_factory.mktemp("local")),
                         [("safety", KEY)], progress=lambda text: None)
    echo = EchoServer()
    yield runtime, echo
    runtime.stop()
    echo.stop()
    os.environ.clear()
    os.environ.update(saved_env)  # the runtime pointed AWS_ENDPOINT_URL at its emulator


def raw_call(url, method="GET", data=None, headers=None):
    request = urllib.request.Request(url, method=method, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def call(runtime, method, path, body=None):
    return raw_call(runtime.api_url + path, method, json.dumps(body).encode() if body is not None else None,
                    {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})


def run_cli(runtime, *argv):
    out = StringIO()
    code = cli(["--url", runtime.api_url, "--api-key", KEY, *argv], out=out)
    return code, out.getvalue()


def job_with(target=None, **more):
    return {"name": "probe", "type": "RATE", "schedule": "PT1H", "target": target, **more}


def test_the_stacks_own_endpoints_cannot_be_targets(local_stack):
    runtime, echo = local_stack
    emulator, api = runtime.emulator, runtime.api_url
    api_port = int(api.rsplit(":", 1)[1])
    for url in (f"{emulator.url}/_jobsched/stop", f"{api}/v1/jobs", f"http://localhost:{emulator.port}/moto-api/reset",
                f"http://0.0.0.0:{api_port}/", f"http://[::ffff:127.0.0.1]:{emulator.port}/"):
        status, answer = call(runtime, "POST", "/v1/jobs", job_with({"type": "HTTP", "url": url}))
        assert status == 422 and answer["error"]["details"][0]["field"] == "target.url", (url, answer)
    stop = {"type": "HTTP", "url": f"{emulator.url}/_jobsched/stop"}
    status, answer = call(runtime, "POST", "/v1/jobs", job_with({"type": "HTTP", "url": f"{echo.url}/x"},
                                                                onSuccess=stop))
    assert status == 422 and answer["error"]["details"][0]["field"] == "onSuccess.url", answer
    status, answer = call(runtime, "POST", "/v1/jobs", {"name": "dag", "type": "RATE", "schedule": "PT1H",
                                                        "steps": [{"name": "a", "target": stop}]})
    assert status == 422 and answer["error"]["details"][0]["field"] == "steps.0.target.url", answer
    # the echo endpoint is the documented demo target and stays one
    assert call(runtime, "POST", "/v1/jobs", job_with({"type": "HTTP", "url": f"{echo.url}/x"}))[0] == 201


def test_the_emulators_control_and_moto_routes_need_the_stacks_secret(local_stack):
    runtime, _ = local_stack
    for path in ("/_jobsched/stop", "/moto-api/reset", "/_jobsched/stats"):
        status, _ = raw_call(runtime.emulator.url + path, "POST" if "stats" not in path else "GET", b"")
        assert status == 403, path
    # the stack itself still works, and its own processes still reach the control routes
    assert call(runtime, "GET", "/v1/jobs")[0] == 200
    assert runtime.emulator.stats()["mutations"] >= 0


def test_a_body_that_is_not_utf8_is_refused_never_replaced(local_stack):
    runtime, echo = local_stack
    body = b'{"name": "caf\xe9", "type": "RATE", "schedule": "PT1H", "target": {"type": "HTTP", "url": "%s/x"}}' % (
        echo.url.encode())
    status, answer = raw_call(runtime.api_url + "/v1/jobs", "POST", body,
                              {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    assert status == 400 and answer["error"]["details"][0]["field"] == "body", answer


def raw_http(url: str, request: bytes) -> tuple[int, str, dict]:
    """Bytes as a client sends them (a request urllib would not make), and the answer."""
    import socket
    from urllib.parse import urlsplit
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers.get("content-type", ""), json.loads(body)


@pytest.mark.parametrize("request_bytes,status,field", [
    (b"GET /v1/jobs?" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414, "path"),
    (b"GET /v1/jobs HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431, "headers"),
    (b"GET /v1/jobs HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(120)) + b"\r\n", 431, "headers"),
    (b"TRACE /v1/jobs HTTP/1.1\r\nHost: x\r\n\r\n", 501, "method"),
    (b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n", 413, "body"),
    (b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400, "Content-Length"),
])
def test_what_the_server_refuses_itself_is_answered_in_the_apis_error_envelope(local_stack, request_bytes, status,
                                                                                field):
    runtime, _ = local_stack
    answered, content_type, body = raw_http(runtime.api_url, request_bytes)
    assert answered == status and content_type == "application/json", (answered, content_type, body)
    assert body["error"]["code"] and body["error"]["message"], body
    assert [d["field"] for d in body["error"]["details"]] == [field], body


def test_cli_creates_jobs_with_tags_and_a_bulk_action_needs_a_filter_or_all(local_stack):
    runtime, echo = local_stack
    ids = []
    for i in range(2):
        code, out = run_cli(runtime, "--json", "jobs", "create", "--name", f"ops-{i}", "--type", "CRON",
                            "--schedule", "0 4 * * *", "--target-url", f"{echo.url}/ops", "--tags", "team:ops",
                            "--tags", "url:http://x:1")
        assert code == 0, out
        job = json.loads(out)
        assert job["tags"] == {"team": "ops", "url": "http://x:1"}
        ids.append(job["jobId"])
    assert run_cli(runtime, "jobs", "delete", ids[0])[0] == 0
    # a dry run says what the action would change: the cancelled job cannot be paused
    code, out = run_cli(runtime, "jobs", "bulk", "pause", "--tag", "team:ops", "--dry-run")
    assert code == 0 and out.startswith("would apply to 1 of 2"), out
    # no filter: refused unless every job of the tenant is asked for
    assert run_cli(runtime, "jobs", "bulk", "pause")[0] == 1
    code, out = run_cli(runtime, "jobs", "bulk", "pause", "--all", "--dry-run")
    assert code == 0 and out.startswith("would apply to"), out


def test_cli_stats_reads_the_work_directory_the_stack_was_given(tmp_path, monkeypatch):
    workdir = tmp_path / "stack-b"
    workdir.mkdir()
    (workdir / "metrics.jsonl").write_text("")
    monkeypatch.chdir(tmp_path)  # no .build/local here
    monkeypatch.setenv("JOBSCHED_WORKDIR", str(workdir))
    assert cli(["stats"], out=StringIO()) == 0


def test_the_strict_layer_reads_no_item_itself_the_emulator_reports_them(local_stack):
    """The strict layer bills each write on the item before and after it and checks its size. As
    GetItem requests those reads were 81% of the emulator's requests, as reads from moto's backend
    19 requests a job; now the emulator's process answers each DynamoDB call with the items, read
    in the call's own hold of its lock, and the layer sends no read of its own."""
    runtime, echo = local_stack
    billed = sum(use.write_units for use in runtime.strict.ledger.partitions.values())
    before = runtime.emulator.stats()["requestsByOperation"]
    status, answer = call(runtime, "POST", "/v1/jobs", job_with({"type": "HTTP", "url": f"{echo.url}/peek"}))
    assert status == 201, answer
    after = runtime.emulator.stats()["requestsByOperation"]
    peeks = after.get("peek", 0) - before.get("peek", 0)
    gets = after.get("GetItem", 0) - before.get("GetItem", 0)
    assert peeks == 0 and gets <= 2, (peeks, gets)  # the API's own reads: its key, the watermark
    # Billed all the same: the job, its two index entries, the quota counter (one item counts both
    # quotas), the timer (at least: a tick may write meanwhile).
    assert sum(use.write_units for use in runtime.strict.ledger.partitions.values()) - billed >= 5


def test_health_fails_when_the_emulator_does_not_answer(local_stack):
    # Last: it stops the module's emulator.
    runtime, _ = local_stack
    assert call(runtime, "GET", "/v1/health")[0] == 200
    runtime.emulator.stop()
    status, answer = call(runtime, "GET", "/v1/health")
    assert status == 503 and answer["status"] == "unavailable", answer
    runtime.stop()  # its pollers would poll the stopped emulator for the rest of the module


def test_ctrl_c_stops_a_freshly_synthesized_stack_without_a_traceback(tmp_path):
    # Ctrl-C reaches the whole process group: the CDK's Node.js process too, when it lived in the
    # stack's process (its exit hook then printed a BrokenPipeError traceback).
    env = {**os.environ, "JOBSCHED_WORKDIR": str(tmp_path / "local"), "JOBSCHED_PORT": "0",
           "JOBSCHED_EMULATOR_PORT": "0", "JOBSCHED_ECHO_PORT": "0", "JOBSCHED_SEGMENTS": "1",
           "PYTHONFAULTHANDLER": "1"}  # SIGABRT dumps every thread: what a stop that hangs waits for
    env.pop("AWS_ENDPOINT_URL", None)
    env.pop("JOBSCHED_TEMPLATE_CACHE", None)  # its own work directory's cache: a fresh synthesis
    # stdin: not the test runner's (a pytest-xdist worker's stdin is its channel to the controller)
    # Started with SIGINT ignored, as a shell's background job or a test runner's worker starts it:
    # Ctrl-C must stop it all the same.
    stack = subprocess.Popen([sys.executable, "-m", "jobsched.local"], env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    seen = []
    try:
        for line in stack.stdout:
            seen.append(line)
            if line.startswith("Ctrl-C stops it."):
                break
        assert any(line.startswith("jobsched: synthesizing") for line in seen), "".join(seen)
        os.killpg(stack.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
        try:
            rest, _ = stack.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            stack.send_signal(signal.SIGABRT)
            dump, _ = stack.communicate(timeout=30)
            pytest.fail("the stack did not stop within 90 s of Ctrl-C; its threads:\n" + dump[-30_000:])
    finally:
        if stack.poll() is None:
            os.killpg(stack.pid, signal.SIGKILL)
    output = "".join(seen) + rest
    assert stack.returncode == 0 and "jobsched: stopping" in rest, output
    assert "Traceback" not in output and "Error" not in rest, output
