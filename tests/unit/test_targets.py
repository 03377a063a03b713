"""Target invokers: HTTP against a loopback server, the address guard, Lambda through a stub."""
import base64
import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3
import pytest
from botocore.stub import Stubber

from jobsched.adapters.http_target import BlockedAddress, HttpTargetInvoker, check_address
from jobsched.domain.endpoints import OwnEndpoints
from jobsched.domain.executions import Dispatch, DispatchKind, ExecutionStatus
from jobsched.domain.jobs import Job, JobSpec, JobState, Target, TargetType
from jobsched.domain.schedule import one_time_schedule
from jobsched.domain.trace import trace_context
from jobsched.store.targets import AwsTargetInvoker, TargetClients


class Recorder(BaseHTTPRequestHandler):
    seen: list = []
    status = 200
    delay = 0.0

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Recorder.seen.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(body)})
        time.sleep(Recorder.delay)
        answer = b'{"done": true}'
        self.send_response(Recorder.status)
        if Recorder.status == 302:
            self.send_header("Location", "http://example.com/")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    Recorder.seen, Recorder.status, Recorder.delay = [], 200, 0.0
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()


def job_for(target: Target, timeout_sec: int = 5) -> Job:
    spec = JobSpec(name="t", schedule=one_time_schedule(0), target=target, payload={"n": 1}, timeout_sec=timeout_sec)
    return Job("tenant", "job_abc", spec, JobState.ACTIVE, 1, 1, 0, 0)


DISPATCH = Dispatch(DispatchKind.FIRE, "tenant", "job_abc", "job_abc.0000000000001", 1, 1, 1)
TRACEPARENT_1 = trace_context(DISPATCH.execution_id, 1).traceparent  # the first attempt's


def http(url: str, **config) -> Target:
    return Target(TargetType.HTTP, {"url": url, "method": "POST", "headers": {"X-Custom": "v"}, **config})


def test_http_target_gets_payload_execution_id_attempt_and_token(server):
    outcome = HttpTargetInvoker(allow_private=True).invoke(job_for(http(server + "/hook?a=1")), DISPATCH, 2,
                                                           callback_token="tok", progress={"p": 1})
    assert outcome.ok and outcome.output == {"done": True}
    [seen] = Recorder.seen
    assert seen["path"] == "/hook?a=1" and seen["body"] == {"n": 1}
    headers = seen["headers"]
    assert headers["X-Execution-Id"] == DISPATCH.execution_id and headers["X-Attempt"] == "2"
    assert headers["X-Callback-Token"] == "tok" and headers["X-Custom"] == "v" and headers["X-Progress"] == '{"p":1}'
    assert headers["traceparent"] == trace_context(DISPATCH.execution_id, 2).traceparent


def test_a_stored_traceparent_header_never_replaces_the_executions(server):
    # A job stored before the header was reserved: the call carries one traceparent, the scheduler's,
    # and the job's own tracestate passes through.
    target = http(server, headers={"TraceParent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01", "tracestate": "k=v"})
    assert HttpTargetInvoker(allow_private=True).invoke(job_for(target), DISPATCH, 1).ok
    [seen] = Recorder.seen
    assert [v for k, v in seen["headers"].items() if k.lower() == "traceparent"] == [TRACEPARENT_1]
    assert seen["headers"]["tracestate"] == "k=v"


@pytest.mark.parametrize("status,ok,accepted", [(202, True, True), (500, False, False), (302, False, False)])
def test_http_status_decides_the_outcome(server, status, ok, accepted):
    Recorder.status = status
    outcome = HttpTargetInvoker(allow_private=True).invoke(job_for(http(server)), DISPATCH, 1, callback_token="t")
    assert (outcome.ok, outcome.accepted) == (ok, accepted)
    if status == 302:
        assert "302" in outcome.error  # redirects are not followed


def test_http_target_that_does_not_answer_in_time_is_timed_out(server):
    Recorder.delay = 1.5
    outcome = HttpTargetInvoker(allow_private=True).invoke(job_for(http(server), timeout_sec=1), DISPATCH, 1)
    assert not outcome.ok and outcome.status is ExecutionStatus.TIMED_OUT


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "10.1.2.3", "192.168.0.1", "[::1]", "0.0.0.0"])
def test_non_public_addresses_are_refused_before_connecting(server, host):
    outcome = HttpTargetInvoker(allow_private=False).invoke(job_for(http(f"http://{host}:9/x")), DISPATCH, 1)
    assert not outcome.ok and "refused" in outcome.error
    assert Recorder.seen == []


@pytest.mark.parametrize("address", ["169.254.169.254", "fd00::1", "::ffff:127.0.0.1", "100.64.0.1", "224.0.0.1"])
def test_address_guard(address):
    with pytest.raises(BlockedAddress):
        check_address(address, allow_private=False)
    check_address(address, allow_private=True)


def test_public_addresses_pass_the_guard():
    check_address("93.184.216.34", allow_private=False)
    check_address("2606:2800:220:1:248:1893:25c8:1946", allow_private=False)
    check_address("2002:5db8:d822::1", allow_private=False)  # 6to4 of 93.184.216.34


@pytest.mark.parametrize("address", ["2002:a9fe:a9fe::1", "2002:7f00:1::1", "2002:0a00:0001::1", "fec0::1",
                                     "fef0::1:2", "64:ff9b::a9fe:a9fe"])
def test_addresses_that_embed_or_hide_a_private_one_are_refused(address):
    # 6to4 (2002::/16) carries the IPv4 address it reaches: instance metadata, loopback, 10/8;
    # fec0::/10 is site-local, which Python's ipaddress counts as global.
    with pytest.raises(BlockedAddress):
        check_address(address, allow_private=False)


def test_lambda_target_sends_the_envelope_and_reads_function_errors():
    session = boto3.session.Session(region_name="us-east-1")
    invoker = AwsTargetInvoker(session)
    arn = "arn:aws:lambda:us-east-1:123456789012:function:tenant-fn"
    job = job_for(Target(TargetType.LAMBDA, {"functionArn": arn}))
    client = invoker.client("lambda", arn, job.spec.timeout_sec)
    context = base64.b64encode(json.dumps({"custom": {"traceparent": TRACEPARENT_1}}, separators=(",", ":")).encode())
    expected = {"FunctionName": arn, "InvocationType": "RequestResponse", "ClientContext": context.decode(),
                "Payload": b'{"executionId":"job_abc.0000000000001","attempt":1,"jobId":"job_abc","payload":{"n":1}}'}
    with Stubber(client) as stub:
        stub.add_response("invoke", {"StatusCode": 200, "Payload": io.BytesIO(b'{"rows": 3}')}, expected)
        stub.add_response("invoke", {"StatusCode": 200, "FunctionError": "Unhandled",
                                     "Payload": io.BytesIO(b'{"errorMessage": "boom"}')}, expected)
        ok = invoker.invoke(job, DISPATCH, 1)
        failed = invoker.invoke(job, DISPATCH, 1)
    assert ok.ok and ok.output == {"rows": 3}
    assert not failed.ok and "boom" in failed.error


def test_a_slow_lambda_target_is_invoked_once_per_attempt_even_when_it_times_out(server, monkeypatch):
    # Given a target function that answers after the job's timeout (a loopback Lambda endpoint)
    Recorder.delay = 1.6
    monkeypatch.setenv("AWS_ENDPOINT_URL_LAMBDA", server)
    invoker = AwsTargetInvoker(boto3.session.Session(region_name="us-east-1"))
    job = job_for(Target(TargetType.LAMBDA, {"functionArn": "arn:aws:lambda:us-east-1:123456789012:function:slow"}),
                  timeout_sec=1)
    # When one attempt calls it
    outcome = invoker.invoke(job, DISPATCH, 1)
    # Then it timed out after a single call: botocore did not invoke the function again
    assert outcome.status is ExecutionStatus.TIMED_OUT
    assert len(Recorder.seen) == 1


def test_aws_targets_receive_compact_utf8_json_as_size_checked():
    session = boto3.session.Session(region_name="us-east-1")
    invoker = AwsTargetInvoker(session)
    arn = "arn:aws:sns:us-east-1:123456789012:topic"
    spec = JobSpec(name="t", schedule=one_time_schedule(0), target=Target(TargetType.SNS, {"topicArn": arn}),
                   payload={"city": "Zürich", "n": [1, 2]})
    job = Job("tenant", "job_abc", spec, JobState.ACTIVE, 1, 1, 0, 0)
    client = invoker.client("sns", arn, job.spec.timeout_sec)
    with Stubber(client) as stub:
        stub.add_response("publish", {"MessageId": "m"}, {
            "TopicArn": arn, "Message": '{"city":"Zürich","n":[1,2]}',
            "MessageAttributes": {"executionId": {"DataType": "String", "StringValue": DISPATCH.execution_id},
                                  "attempt": {"DataType": "Number", "StringValue": "1"},
                                  "jobId": {"DataType": "String", "StringValue": "job_abc"},
                                  "traceparent": {"DataType": "String", "StringValue": TRACEPARENT_1}}})
        assert invoker.invoke(job, DISPATCH, 1).ok


def test_a_target_that_trickles_its_answer_is_cut_at_the_attempts_deadline():
    """A per-read timeout alone never fires when a byte arrives every half second: the attempt's
    whole call has one deadline."""
    class Trickle(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            for _ in range(100):
                try:
                    self.wfile.write(b"x")
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(0.5)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        started = time.monotonic()
        outcome = HttpTargetInvoker(allow_private=True).invoke(
            job_for(http(f"http://127.0.0.1:{httpd.server_port}/slow"), timeout_sec=2), DISPATCH, 1)
        elapsed = time.monotonic() - started
    finally:
        httpd.shutdown()
    assert outcome.status is ExecutionStatus.TIMED_OUT, outcome
    assert elapsed < 4, elapsed


def test_each_resolved_address_is_tried_until_one_answers(server, monkeypatch):
    """A host whose first address refuses connections still gets its call on the next one."""
    import socket as socket_module

    from jobsched.adapters import http_target

    port = int(server.rsplit(":", 1)[1])
    dead = socket_module.socket()
    dead.bind(("127.0.0.1", 0))
    dead_port = dead.getsockname()[1]
    dead.close()  # nothing listens there: connection refused

    real_getaddrinfo = socket_module.getaddrinfo

    def two_addresses(host, port_, *args, **kwargs):
        if host != "target.example":
            return real_getaddrinfo(host, port_, *args, **kwargs)
        return [(socket_module.AF_INET, socket_module.SOCK_STREAM, 6, "", ("127.0.0.1", dead_port)),
                (socket_module.AF_INET, socket_module.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    monkeypatch.setattr(http_target.socket, "getaddrinfo", two_addresses)
    outcome = HttpTargetInvoker(allow_private=True).invoke(job_for(http("http://target.example/x")), DISPATCH, 1)
    assert outcome.status is ExecutionStatus.SUCCEEDED, outcome
    assert len(Recorder.seen) == 1


def test_the_schedulers_own_endpoints_are_refused_at_the_call_whatever_the_name_and_not_retried(server):
    # Given a deployment that allows private targets (the local stack) and whose own endpoint is
    # the recorder's port on loopback
    port = int(server.rsplit(":", 1)[1])
    own = OwnEndpoints.parse(f"127.0.0.1:{port}")
    invoker = HttpTargetInvoker(allow_private=True, own_endpoints=own)
    # When a stored job calls it by address, by a name that resolves there, or through 0.0.0.0
    for url in (f"{server}/_jobsched/stop", f"http://localhost:{port}/_jobsched/stop",
                f"http://0.0.0.0:{port}/x", f"http://[::ffff:127.0.0.1]:{port}/x"):
        outcome = invoker.invoke(job_for(http(url)), DISPATCH, 1)
        # Then nothing reaches it, and the attempt is not retried
        assert not outcome.ok and "own endpoints" in outcome.error and outcome.retryable is False, url
    assert Recorder.seen == []
    # Another port of the same host is still a target (the local stack's echo endpoint)
    assert HttpTargetInvoker(allow_private=True, own_endpoints=OwnEndpoints.parse("127.0.0.1:9")).invoke(
        job_for(http(server)), DISPATCH, 1).ok


def test_one_client_serves_every_timeout_and_each_call_still_ends_at_its_own(server, monkeypatch):
    # Given a tenant's two Lambda jobs, one with a timeout shorter than its function takes, one longer
    Recorder.delay = 1.6
    monkeypatch.setenv("AWS_ENDPOINT_URL_LAMBDA", server)
    invoker = AwsTargetInvoker(boto3.session.Session(region_name="us-east-1"))
    target = Target(TargetType.LAMBDA, {"functionArn": "arn:aws:lambda:us-east-1:123456789012:function:slow"})
    short, long = job_for(target, timeout_sec=1), job_for(target, timeout_sec=5)
    # When each is called: the short one times out at its own second, the long one waits for the answer
    assert invoker.invoke(short, DISPATCH, 1).status is ExecutionStatus.TIMED_OUT
    assert invoker.invoke(long, DISPATCH, 1).ok
    # Then one client made both calls (clients are not multiplied by timeouts)
    assert invoker.clients.per_call_timeout and invoker.clients.created == 1 and len(invoker.clients) == 1


def test_the_containers_target_clients_are_bounded_and_the_least_recently_used_goes():
    clients = TargetClients(boto3.session.Session(region_name="us-east-1"), cap=2)
    tenant = {"aws_access_key_id": "ASIA1", "aws_secret_access_key": "s", "aws_session_token": "t"}
    other = {**tenant, "aws_access_key_id": "ASIA2"}
    sqs = clients.get("sqs", "us-east-1", 10, tenant)
    assert clients.get("sqs", "us-east-1", 300, tenant) is sqs  # another timeout: the same client
    lam = clients.get("lambda", "us-east-1", 10, tenant)
    clients.get("sqs", "us-east-1", 10, tenant)  # used again: the Lambda client is now the oldest
    clients.get("sqs", "us-east-1", 10, other)  # another tenant's session: a client of its own
    assert len(clients) == 2 and clients.created == 3
    assert clients.get("sqs", "us-east-1", 10, tenant) is sqs
    assert clients.get("lambda", "us-east-1", 10, tenant) is not lam and clients.created == 4


def test_without_per_request_timeouts_clients_are_keyed_by_timeout_within_the_same_bound():
    clients = TargetClients(boto3.session.Session(region_name="us-east-1"), cap=3, per_call_timeout=False)
    credentials = {"aws_access_key_id": "ASIA1", "aws_secret_access_key": "s", "aws_session_token": "t"}
    made = [clients.get("sqs", "us-east-1", seconds, credentials) for seconds in (10, 20, 30, 40)]
    assert len({id(c) for c in made}) == 4 and len(clients) == 3
    assert made[3].meta.config.read_timeout == 40


@pytest.mark.parametrize("url", ["http://h.example:99999/", "http://h.example:abc/", "http://h..example/",
                                 "http://h.example/a\r\nX: 1"])
def test_a_stored_url_no_call_could_use_fails_its_attempt_without_a_retry(url):
    # A job stored before the API refused these URLs (domain/endpoints.py's TargetUrl, one rule)
    outcome = HttpTargetInvoker(allow_private=True).invoke(job_for(http(url)), DISPATCH, 1)
    assert not outcome.ok and outcome.error.startswith("target refused: url") and outcome.retryable is False


@pytest.mark.parametrize("host", ["2130706433", "0x7f000001", "127.1", "0177.0.0.1", "\uff11\uff12\uff17.0.0.1"])
def test_loopback_in_other_spellings_is_refused_at_the_call(server, host):
    port = int(server.rsplit(":", 1)[1])
    outcome = HttpTargetInvoker(allow_private=False).invoke(job_for(http(f"http://{host}:{port}/x")), DISPATCH, 1)
    assert not outcome.ok and "127.0.0.1 is not a public address" in outcome.error, outcome
    assert Recorder.seen == []
