"""A container job runs a tenant's command on the stack's machine: it gets nothing of the stack's.
Its process cannot read the state, the dev key or the stack's credentials, nor the stack's
environment, and the emulator refuses its calls, unsigned or signed with keys it made up; a
second stack's tenant fares no better against the first stack's emulator."""
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from jobsched.local.__main__ import boot
from jobsched.local.emulator_auth import CREDENTIALS_FILE, StackCredentials
from jobsched.local.runtime import Options

ROOT = os.geteuid() == 0

# What the task runs (with the system's python3: no package of the stack's). Its SigV4 signer is
# the documented algorithm, checked below against the stack's own keys.
PROBE = r'''
import datetime, hashlib, hmac, json, os, sys, urllib.error, urllib.request

def request(url, target, body, key=None, secret=None, service="dynamodb", method="POST", path="/"):
    host = url.split("//", 1)[1]
    headers = {"Host": host}
    if target:
        headers.update({"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": target})
    if key:
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        headers["X-Amz-Date"] = when
        names = sorted(h.lower() for h in headers)
        canonical = "\n".join([method, path, "", "".join(f"{n}:{headers[[h for h in headers if h.lower() == n][0]]}\n"
                                                          for n in names), ";".join(names),
                               hashlib.sha256(body).hexdigest()])
        scope = f"{when[:8]}/us-east-1/{service}/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", when, scope, hashlib.sha256(canonical.encode()).hexdigest()])
        signing = ("AWS4" + secret).encode()
        for part in (when[:8], "us-east-1", service, "aws4_request"):
            signing = hmac.new(signing, part.encode(), hashlib.sha256).digest()
        signature = hmac.new(signing, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={key}/{scope}, SignedHeaders={';'.join(names)}, "
                                    f"Signature={signature}")
    try:
        with urllib.request.urlopen(urllib.request.Request(url + path, data=body if method == "POST" else None,
                                                           method=method, headers=headers), timeout=10) as answer:
            return answer.status, answer.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except OSError as exc:
        return 0, repr(exc)

def calls(url):
    scan = json.dumps({"TableName": os.environ.get("TABLE", "x")}).encode()
    made_up = ("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    return {
        "dynamodb unsigned": request(url, "DynamoDB_20120810.ListTables", b"{}"),
        "dynamodb testing": request(url, "DynamoDB_20120810.ListTables", b"{}", "testing", "testing"),
        "dynamodb made up": request(url, "DynamoDB_20120810.Scan", scan, *made_up),
        "kms made up": request(url, "TrentService.ListKeys", b"{}", *made_up, service="kms"),
        "s3 unsigned": request(url, None, b"", method="GET"),
        "s3 made up": request(url, None, b"", *made_up, service="s3", method="GET"),
        "lambda unsigned": request(url, None, b"", method="GET", path="/2015-03-31/functions/"),
        "lambda testing": request(url, None, b"", "testing", "testing", service="lambda", method="GET",
                                  path="/2015-03-31/functions/"),
    }

def read(path):
    try:
        with open(path, "rb") as handle:
            return "READ " + handle.read(200).decode(errors="replace")
    except OSError as exc:
        return type(exc).__name__

if __name__ == "__main__":
    import subprocess
    subprocess.Popen(["sleep", "300"], start_new_session=True)  # left running, out of the task's process group
    report = {"uid": os.getuid(), "aws": sorted(k for k in os.environ if k.startswith("AWS_")),
              "files": {p: read(p) for p in os.environ.get("STACK_FILES", "").split(":") if p},
              "calls": calls(os.environ["EMULATOR"])}
    print("REPORT " + json.dumps(report))
'''


@pytest.fixture(scope="module")
def local_stack(tmp_path_factory):
    saved_env = dict(os.environ)
    workdir = tmp_path_factory.mktemp("local") / "work"
    workdir.mkdir(mode=0o755)  # as a user's directory may be: the stack makes it its own
    runtime, _, dev_key = boot(Options(port=0, emulator_port=0, segments=2, workdir=workdir), [],
                               progress=lambda text: None)
    yield runtime, dev_key
    runtime.stop()
    os.environ.clear()
    os.environ.update(saved_env)


def api(url, key, method, path, body=None):
    request = urllib.request.Request(url + path, method=method, data=json.dumps(body).encode() if body else None,
                                     headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def run_probe(api_url, key, tenant, setup, environment, seconds=40) -> dict:
    """A container job of `tenant` running PROBE; returns its report (from its log)."""
    status, job = api(api_url, key, "POST", "/v1/jobs", {
        "name": "probe", "type": "DELAYED", "delaySeconds": 1, "retryPolicy": {"maxAttempts": 1},
        "target": {"type": "ECS_TASK", "cluster": setup["cluster"], "container": "main",
                   "taskDefinition": f"arn:aws:ecs:us-east-1:123456789012:task-definition/local-{tenant}:1",
                   "subnets": [setup["subnet"]], "securityGroups": [setup["securityGroup"]],
                   "command": ["python3", "-c", PROBE], "environment": environment}})
    assert status == 201, job
    deadline = time.time() + seconds
    while time.time() < deadline:
        items = api(api_url, key, "GET", f"/v1/jobs/{job['jobId']}/executions")[1]["items"]
        if items and items[0]["status"] not in ("PENDING", "RUNNING"):
            execution = api(api_url, key, "GET", f"/v1/executions/{items[0]['executionId']}")[1]
            log = Path(execution["task"]["logUrl"][len("file://"):]).read_text()
            assert execution["status"] == "SUCCEEDED", log
            return json.loads(log.split("REPORT ", 1)[1])
        time.sleep(0.3)
    raise AssertionError("the probe did not end")


def processes_of(uid: int) -> list[int]:
    """The live (not zombie) processes of a uid."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
        except OSError:
            continue
        if int(fields.get("Uid", "-1 ").split()[0]) == uid and not fields.get("State", "").strip().startswith("Z"):
            found.append(int(status.parent.name))
    return found


def assert_refused(calls: dict) -> None:
    for name, (status, body) in calls.items():
        assert status == 403, (name, status, body)
        assert "TableName" not in body and "Jobsched" not in body and "Buckets" not in body, (name, body)


def test_a_container_job_gets_nothing_of_the_stacks(local_stack):
    runtime, dev_key = local_stack
    workdir = runtime.options.workdir.resolve()
    files = [workdir / "state.json", workdir / "dev-key", workdir / CREDENTIALS_FILE,
             Path(f"/proc/{os.getpid()}/environ")]
    assert all(path.exists() for path in files)
    for path in files[:3]:
        assert path.stat().st_mode & 0o777 == 0o600, path
    assert workdir.stat().st_mode & 0o777 == 0o700
    table = runtime.stack.physical_ids[next(k for k in runtime.stack.physical_ids if k.startswith("StorageJobs"))]
    report = run_probe(runtime.api_url, dev_key, "dev", runtime.container_setup,
                       {"STACK_FILES": ":".join(map(str, files)), "EMULATOR": runtime.emulator.url, "TABLE": table})
    assert report["aws"] == []  # none of the stack's credentials in its environment
    if ROOT:  # a user of its own, who may enter none of the stack's files
        assert report["uid"] != 0
        assert set(report["files"].values()) == {"PermissionError"}, report["files"]
        # and when it ends, nothing of it runs on (the sleep it left in a session of its own).
        assert not [pid for pid in processes_of(report["uid"]) if pid != os.getpid()]
    assert_refused(report["calls"])

    # The probe's signer is right: signed with the stack's own keys, the same call is answered.
    probe: dict = {}
    exec(PROBE.replace('if __name__ == "__main__":', "if False:"), probe)
    credentials = runtime.emulator.credentials
    status, body = probe["request"](runtime.emulator.url, "DynamoDB_20120810.ListTables", b"{}",
                                    credentials.access_key_id, credentials.secret_access_key)
    assert status == 200 and table in body


def test_a_second_stacks_tenant_cannot_reach_the_first_stacks_emulator(local_stack, tmp_path):
    runtime, _ = local_stack
    workdir = tmp_path / "second"
    env = {**os.environ, "JOBSCHED_PORT": "0", "JOBSCHED_EMULATOR_PORT": "0", "JOBSCHED_ECHO_PORT": "0",
           "JOBSCHED_WORKDIR": str(workdir), "JOBSCHED_API_KEYS": "second:second-key", "JOBSCHED_SEGMENTS": "2",
           "JOBSCHED_TEMPLATE_CACHE": os.environ.get("JOBSCHED_TEMPLATE_CACHE", str(runtime.options.workdir))}
    env.pop("AWS_ENDPOINT_URL", None)
    second = subprocess.Popen([sys.executable, "-m", "jobsched.local"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        api_url = None
        deadline = time.time() + 120
        for line in second.stdout:
            found = re.search(r"API (http://\S+)/v1", line)
            if found:
                api_url = found.group(1)
                break
            assert time.time() < deadline
        assert api_url, "the second stack did not start"
        threading.Thread(target=second.stdout.read, daemon=True).start()  # its output must not fill the pipe
        setup = {"cluster": "local", "subnet": runtime.container_setup["subnet"],
                 "securityGroup": runtime.container_setup["securityGroup"]}  # the same ids in every stack
        report = run_probe(api_url, "second-key", "second", setup, {"EMULATOR": runtime.emulator.url})
        assert_refused(report["calls"])
        # Nor do the second stack's own credentials open the first one's emulator.
        import botocore.exceptions

        theirs = StackCredentials.read(workdir).session()
        for service, call in (("s3", lambda c: c.list_buckets()), ("lambda", lambda c: c.list_functions())):
            with pytest.raises(botocore.exceptions.ClientError) as refused:
                call(theirs.client(service, endpoint_url=runtime.emulator.url))
            assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    finally:
        second.terminate()
        try:
            second.wait(60)
        except subprocess.TimeoutExpired:
            second.kill()
