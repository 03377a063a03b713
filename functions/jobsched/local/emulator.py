"""The AWS emulator, with its request handling serialized.

moto is not thread-safe: two concurrent conditional writes can both succeed in it. Every
request therefore goes through one lock, in-process (tests) and over HTTP (the local stack),
which keeps the claim guarantee that DynamoDB gives in AWS."""
from __future__ import annotations

import contextlib
import hmac
import json
import threading
from collections import Counter
import time
from typing import Callable, Iterator

from jobsched.local.moto_lock import EMULATOR_LOCK  # noqa: F401 - also taken from here (state, replication, tasks)
from jobsched.local.moto_speedups import share_botocore_loader, speed_up_moto
from jobsched.local.strict_aws.reports import REPORT_HEADER

CONTROL_PREFIX = "/_jobsched/"  # the local stack's own requests to its emulator process
# moto's own routes (reset, state, recorder): as dangerous as the control routes.
MOTO_API_PREFIX = "/moto-api/"
# Control and moto requests carry the per-start secret in this header; without it they answer
# 403 (anything on the machine, a job's HTTP call included, can reach loopback).
CONTROL_SECRET_HEADER = "X-Jobsched-Control"
# Operations that change no state: the local stack saves its state only after other requests.
READ_ONLY_OPERATIONS = frozenset({
    "GetItem", "BatchGetItem", "Query", "Scan", "DescribeTable", "ListTables", "DescribeTimeToLive",
    "ReceiveMessage", "GetQueueAttributes", "GetQueueUrl", "ListQueues", "DescribeStacks",
    "DescribeStackResources", "ListTagsOfResource",
})


def operation_of(environ: dict) -> str:
    """The AWS operation of a request to the emulator (JSON protocols name it in X-Amz-Target)."""
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    return target.rsplit(".", 1)[-1] if target else ""


@contextlib.contextmanager
def serialized_in_process() -> Iterator[None]:
    """Serialize moto's in-process interception (mock_aws) across threads."""
    from unittest import mock

    from moto.core.botocore_stubber import BotocoreStubber

    original = BotocoreStubber.__call__

    def locked(self, *args, **kwargs):
        with EMULATOR_LOCK:
            return original(self, *args, **kwargs)

    with mock.patch.object(BotocoreStubber, "__call__", locked):
        yield


@contextlib.contextmanager
def emulator_time(now_ms: Callable[[], int]) -> Iterator[None]:
    """Make moto's SQS delays and visibility timeouts follow the given clock (tests move a fake
    clock; an SQS delay of 40 s then passes when the clock does, not the wall)."""
    from unittest import mock

    with mock.patch("moto.sqs.models.unix_time_millis", lambda *a: float(now_ms())):
        yield


def next_ready_ms(queue_urls: list[str], account: str, region: str) -> float | None:
    """The earliest instant at which a message of these in-process queues becomes receivable (its
    delay over and its visibility timeout past), or None when they hold none. Lets a fake-clock
    driver skip the seconds in which every receive would answer empty."""
    from moto.sqs.models import sqs_backends

    queues = sqs_backends[account][region].queues
    earliest = None
    with EMULATOR_LOCK:
        for url in queue_urls:
            queue = queues.get(url.rsplit("/", 1)[-1])
            for message in (queue._messages if queue else ()):
                ready = max(message.visible_at, message.delayed_until)
                if earliest is None or ready < earliest:
                    earliest = ready
    return earliest


def with_items_report(app, environ: dict, start_response, operation: str) -> list[bytes]:
    """A DynamoDB request the strict layer marked (strict_aws.reports.REPORT_HEADER), answered with the
    items its bill needs, read now, under the lock the request holds: the items before it, then
    after it, in a field of the answer's JSON (botocore's parser ignores it; the CRC is redone)."""
    import io
    import zlib

    from moto.dynamodb.models.utilities import DynamoJsonEncoder

    from jobsched.local.strict_aws.reports import REPORT_FIELD, items_report

    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    environ["wsgi.input"] = io.BytesIO(body)
    try:
        finish = items_report(operation, json.loads(body or b"{}"))
    except ValueError:
        finish = None
    answered: list = []
    chunks = list(app(environ, lambda status, headers, exc_info=None: answered.extend((status, headers))))
    status, headers = answered
    payload = b"".join(chunks)
    extra = None
    if finish is not None and payload.startswith(b"{") and payload.rstrip().endswith(b"}"):
        try:
            # Binary values as base64, as DynamoDB's JSON has them.
            extra = json.dumps({REPORT_FIELD: finish()}, cls=DynamoJsonEncoder).encode()
        except Exception:  # noqa: BLE001 - the write is done: answer it, unreported (the layer says so)
            extra = None
    if extra is not None:
        inner = payload.rstrip()[:-1]
        payload = inner + (b"," if inner.strip() != b"{" else b"") + extra[1:]
        redone = {"content-length": str(len(payload)), "x-amz-crc32": str(zlib.crc32(payload) & 0xFFFFFFFF)}
        headers = [(k, redone.get(k.lower(), v)) for k, v in headers]
    start_response(status, headers)
    return [payload]


# The AWS protocols the emulator answers without moto's Flask app: the functions' hot calls.
# Each is one handler class, routed by the request's X-Amz-Target alone.
DIRECT_TARGETS = {"DynamoDB_20120810": ("moto.dynamodb.responses", "DynamoHandler"),
                  "AmazonSQS": ("moto.sqs.responses", "SQSResponse")}


def direct_dispatch(app):
    """moto's server app, with DynamoDB's and SQS's JSON requests handed straight to the handler
    class that moto's Flask app would route them to, as moto's own Flask view does it
    (`convert_to_flask_response`): the same request class, the same call, the same status, body
    and AWS headers (flask-cors's Access-Control-Allow-Origin is not added: no AWS client reads
    it). Flask's routing, request context and CORS wrapping cost about a quarter of such a
    request's time in the emulator (docs/performance.md, "The local stack's emulator"); every
    other request still goes through the app."""
    import importlib

    from botocore.exceptions import ClientError
    from moto.moto_api import recorder
    from moto.moto_server.werkzeug_app import BackendRequest
    from werkzeug.wrappers import Response

    handlers = {prefix: getattr(importlib.import_module(module), name)
                for prefix, (module, name) in DIRECT_TARGETS.items()}

    def dispatch(environ, start_response):
        handler = handlers.get(environ.get("HTTP_X_AMZ_TARGET", "").split(".", 1)[0])
        if handler is None or environ.get("REQUEST_METHOD") != "POST":
            return app(environ, start_response)
        request = BackendRequest(environ)
        recorder._record_request(request)
        try:
            result = handler.dispatch(request, request.raw_url, dict(request.headers))
        except ClientError as exc:
            result = 400, {}, exc.response["Error"]["Message"]
        status, headers, content = result if len(result) == 3 else (200, {}, result)
        return Response(response=content, status=status, headers=headers)(environ, start_response)

    return dispatch


def _read_chunked(rfile) -> bytes:
    body = bytearray()
    while True:
        size = int(rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            while rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return bytes(body)
        body += rfile.read(size)
        rfile.readline()


class KeepAliveWsgiServer:
    """A WSGI server for loopback that keeps each client's connection open between requests
    (HTTP/1.1), a thread per connection. werkzeug's development server answers every request
    with `Connection: close`, so each AWS call of the local stack opened a connection and the
    emulator started a thread for it: about a quarter of a call's time on both sides (bench
    lateness). The whole request body is read before the app runs (botocore sends a length) and
    each answer goes out in one write, its length set, with Nagle's algorithm off."""

    def __init__(self, host: str, port: int, app) -> None:
        import io
        import socket
        import sys
        import traceback
        from http.server import BaseHTTPRequestHandler
        from urllib.parse import unquote, urlsplit

        connections: set = set()
        self._connections = connections
        self.connections_opened = 0  # over the server's life: a client that keeps its connection opens one
        self._connections_lock = threading.Lock()
        guard = self._connections_lock
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def setup(self) -> None:
                super().setup()
                with guard:
                    connections.add(self.connection)
                    outer.connections_opened += 1

            def finish(self) -> None:
                with guard:
                    connections.discard(self.connection)
                try:
                    super().finish()
                except OSError:
                    pass

            def log_message(self, *args) -> None:
                pass

            def handle(self) -> None:
                try:
                    super().handle()
                except (ConnectionError, TimeoutError):
                    pass  # the client went away, or stop() ended the connection: nothing to answer

            def _send(self, status: str, headers: list, payload: bytes) -> None:
                code, _, reason = status.partition(" ")
                code = int(code)
                bodiless = code < 200 or code in (204, 304)
                self.send_response_only(code, reason)
                head_length = None
                for name, value in headers:
                    lowered = name.lower()
                    if lowered == "content-length":
                        head_length = value
                    elif lowered not in ("connection", "transfer-encoding"):
                        self.send_header(name, value)
                if not bodiless:
                    # A HEAD answer says the length its GET would have (as the app gave it).
                    length = head_length if self.command == "HEAD" and head_length is not None else len(payload)
                    self.send_header("Content-Length", str(length))
                if self.close_connection:
                    self.send_header("Connection", "close")
                sent = b"" if bodiless or self.command == "HEAD" else payload
                self._headers_buffer.append(b"\r\n" + sent)
                self.flush_headers()

            def _answer(self) -> None:
                try:
                    if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                        body = _read_chunked(self.rfile)
                    else:
                        length = int(self.headers.get("Content-Length") or 0)
                        body = self.rfile.read(length) if length > 0 else b""
                except ValueError as exc:  # a length or chunk size that is not a number
                    self.close_connection = True
                    self._send("400 BAD REQUEST", [("Content-Type", "text/plain")], f"bad request body: {exc}".encode())
                    return
                url = urlsplit(self.path)
                environ = {
                    "wsgi.version": (1, 0), "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(body),
                    "wsgi.errors": sys.stderr, "wsgi.multithread": True, "wsgi.multiprocess": False,
                    "wsgi.run_once": False, "REQUEST_METHOD": self.command, "SCRIPT_NAME": "",
                    "PATH_INFO": unquote(url.path).encode("utf-8").decode("latin-1"),
                    "QUERY_STRING": url.query, "REQUEST_URI": self.path, "RAW_URI": self.path,
                    "REMOTE_ADDR": self.client_address[0], "REMOTE_PORT": self.client_address[1],
                    "SERVER_NAME": self.server.server_address[0], "SERVER_PORT": str(self.server.server_address[1]),
                    "SERVER_PROTOCOL": self.request_version, "CONTENT_LENGTH": str(len(body)),
                }
                for name, value in self.headers.items():
                    if "_" in name:
                        continue  # as werkzeug: X_Foo must not pass for X-Foo
                    name = name.upper().replace("-", "_")
                    value = " ".join(value.split("\r\n"))  # a folded header, unfolded
                    if name == "CONTENT_TYPE":
                        environ[name] = value
                    elif name not in ("CONTENT_LENGTH", "TRANSFER_ENCODING"):
                        key = "HTTP_" + name
                        environ[key] = f"{environ[key]},{value}" if key in environ else value
                answered: list = []

                def start_response(status, headers, exc_info=None):
                    answered[:] = [status, headers]

                try:
                    result = app(environ, start_response)
                    try:
                        payload = b"".join(result)
                    finally:
                        if hasattr(result, "close"):
                            result.close()
                    status, headers = answered
                except Exception as exc:  # noqa: BLE001 - answer 500, say why, and drop the connection
                    traceback.print_exc()
                    payload = f"emulator error: {type(exc).__name__}: {exc}".encode()
                    status, headers = "500 INTERNAL SERVER ERROR", [("Content-Type", "text/plain")]
                    self.close_connection = True
                self._send(status, headers, payload)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _answer

        from jobsched.local.events import LoopbackHTTPServer  # its backlog of 128, daemon threads

        class Server(LoopbackHTTPServer):
            block_on_close = False  # stop() ends the kept connections itself

        self._server = Server((host, port), Handler)
        self._socket = socket
        self.server_port = self._server.server_address[1]

    def serve_forever(self) -> None:
        self._server.serve_forever(poll_interval=0.5)

    def shutdown(self) -> None:
        """Stop accepting, then end the open connections (their threads wait on them)."""
        self._server.shutdown()
        self._server.server_close()
        with self._connections_lock:
            open_now = list(self._connections)
        for connection in open_now:
            try:
                connection.shutdown(self._socket.SHUT_RDWR)
            except OSError:
                pass


def _refusal(environ: dict, credentials):
    """The 403 for a request not signed with the stack's credentials (None: signed with them)."""
    import io

    from jobsched.local.emulator_auth import check

    source = environ["wsgi.input"]
    body = source.getvalue() if isinstance(source, io.BytesIO) else source.read()
    environ["wsgi.input"] = io.BytesIO(body)
    return check(environ, body, credentials)


class SerializedServer:
    """moto's server on loopback, one request at a time. `control`, if given, answers the
    requests under CONTROL_PREFIX (method, path after the prefix, body) → (status, JSON-able),
    outside the lock (what it does takes the lock itself where it reads the emulator)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, control=None, control_secret: str | None = None,
                 direct: bool = True, credentials=None) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

        speed_up_moto()
        share_botocore_loader()

        app = DomainDispatcherApplication(create_backend_app)
        if direct:  # False: every request through moto's Flask app (tests compare the two)
            app = direct_dispatch(app)
        self.busy_seconds = 0.0  # time spent handling requests (the lock held): what limits the stack
        self.busy_by_operation: Counter = Counter()  # the same, per AWS operation (bench lateness)
        self.requests_by_operation: Counter = Counter()
        self.mutations = 0  # requests that may have changed state (the local stack saves after them)

        self._control_secret = control_secret

        def answer_json(start_response, status: int, answer) -> list[bytes]:
            payload = json.dumps(answer).encode()
            start_response(f"{status} {'OK' if status == 200 else 'Error'}",
                           [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))])
            return [payload]

        def locked_app(environ, start_response):
            path = environ.get("PATH_INFO", "")
            if control_secret is not None and path.startswith((CONTROL_PREFIX, MOTO_API_PREFIX)):
                given = environ.get("HTTP_" + CONTROL_SECRET_HEADER.upper().replace("-", "_"), "")
                if not hmac.compare_digest(given.encode(), control_secret.encode()):
                    return answer_json(start_response, 403, {"message": "the control routes need the stack's secret"})
            if control is not None and path.startswith(CONTROL_PREFIX):
                length = int(environ.get("CONTENT_LENGTH") or 0)
                body = environ["wsgi.input"].read(length) if length else b""
                status, answer = control(environ["REQUEST_METHOD"], path[len(CONTROL_PREFIX):], body)
                return answer_json(start_response, status, answer)
            if credentials is not None and not path.startswith(MOTO_API_PREFIX):
                # Only the stack's own signed requests (local/emulator_auth.py), checked outside the lock.
                refused = _refusal(environ, credentials)
                if refused is not None:
                    start_response(f"{refused.status} Forbidden",
                                   [*refused.headers, ("Content-Length", str(len(refused.body)))])
                    return [refused.body]
            operation = operation_of(environ)
            if operation not in READ_ONLY_OPERATIONS:
                self.mutations += 1
            report = environ.get("HTTP_" + REPORT_HEADER.upper().replace("-", "_")) == "1"
            with EMULATOR_LOCK:
                started = time.perf_counter()
                try:
                    if report:
                        return with_items_report(app, environ, start_response, operation)
                    # Materialize the body inside the lock: the response is computed there.
                    return list(app(environ, start_response))
                finally:
                    spent = time.perf_counter() - started
                    self.busy_seconds += spent
                    self.busy_by_operation[operation or "other"] += spent
                    self.requests_by_operation[operation or "other"] += 1

        self._server = KeepAliveWsgiServer(host, port, locked_app)
        self.port = self._server.server_port
        self.url = f"http://{host}:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="emulator", daemon=True)

    def start(self) -> "SerializedServer":
        self._thread.start()
        # moto's backends are process-wide: start from an empty emulator whatever ran before.
        import urllib.request

        headers = {CONTROL_SECRET_HEADER: self._control_secret} if self._control_secret is not None else {}
        urllib.request.urlopen(urllib.request.Request(f"{self.url}{MOTO_API_PREFIX}reset", method="POST",
                                                      headers=headers), timeout=10).close()
        return self

    @property
    def connections_opened(self) -> int:
        return self._server.connections_opened

    def stop(self) -> None:
        self._server.shutdown()
