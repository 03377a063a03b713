"""The AWS emulator, with its request handling serialized.

moto is not thread-safe: two concurrent conditional writes can both succeed in it. Every
request therefore goes through one lock, in-process (tests) and over HTTP (the local stack),
which keeps the claim guarantee that DynamoDB gives in AWS."""
from __future__ import annotations

import contextlib
import functools
import threading
from collections import Counter
import time
from typing import Callable, Iterator

EMULATOR_LOCK = threading.RLock()
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


def speed_up_moto() -> None:
    """Two narrow fixes where the emulator's own cost grows with use, not with what is asked
    (measured in docs/performance.md; tests/unit/test_emulator_speedups.py checks that each
    answers exactly as the code it replaces):
    - moto's server finds a request's service by listing its package directory from disk on every
      request (`list_of_moto_modules`): the directory does not change while the process runs, so
      it is listed once;
    - every message an SQS receive returns asks the queue for all its attributes (each of which
      counts the whole queue) just to read its retention period: read the attribute itself;
    - every receive lists the queue's visible messages by reading the clock twice per message of
      the queue (with its delayed ones: the look-ahead keeps minutes of them there): read it once
      per receive;
    - every deleted message is looked for twice in the whole queue: once;
    - every UpdateItem parses its update expression twice (request check, then update), although
      the functions send the same few expressions again and again: a parsed expression is kept
      (moto's validator works on a deep copy of it, so the kept tree is never changed)."""
    import moto.backends
    import moto.sqs.models as sqs_models
    from moto.core.utils import unix_time
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser
    from moto.sqs.exceptions import ReceiptHandleIsInvalid
    from moto.sqs.models import Queue, SQSBackend

    if getattr(moto.backends, "_jobsched_fast", False):
        return
    modules = tuple(moto.backends.list_of_moto_modules())
    moto.backends.list_of_moto_modules = lambda: iter(modules)

    def is_message_valid_based_on_retention_period(self, queue_name: str, message) -> bool:
        queue = self.get_queue(queue_name)
        retain_until = int(queue.message_retention_period) + message.sent_timestamp / 1000
        return retain_until > unix_time()

    SQSBackend.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period

    def messages(self) -> list:
        # Message.visible is `now > visible_at`, Message.delayed `now < delayed_until`; the clock
        # is looked up in the module, so emulator_time() still moves it.
        now = sqs_models.unix_time_millis()
        return [m for m in self._messages if now > m.visible_at and not now < m.delayed_until]

    def delete_message(self, receipt_handle: str) -> None:
        if receipt_handle in self.deleted_messages:
            return  # already deleted: deleting again is fine
        kept, found = [], False
        for message in self._messages:
            if receipt_handle in message.all_receipt_handles:
                found = True
                self.pending_messages.discard(message)
                self.deleted_messages.update(message.all_receipt_handles)
                continue
            kept.append(message)
        if not found:
            raise ReceiptHandleIsInvalid()
        self._messages = kept

    Queue.messages = property(messages)
    Queue.delete_message = delete_message

    parse = functools.lru_cache(maxsize=512)(UpdateExpressionParser.make)  # errors are not cached
    UpdateExpressionParser.make = staticmethod(parse)
    moto.backends._jobsched_fast = True


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


class SerializedServer:
    """moto's server on loopback, one request at a time."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import WSGIRequestHandler, make_server

        speed_up_moto()

        class QuietHandler(WSGIRequestHandler):
            def log_request(self, *args, **kwargs):
                pass

        app = DomainDispatcherApplication(create_backend_app)
        self.busy_seconds = 0.0  # time spent handling requests (the lock held): what limits the stack
        self.busy_by_operation: Counter = Counter()  # the same, per AWS operation (bench lateness)
        self.requests_by_operation: Counter = Counter()
        self.mutations = 0  # requests that may have changed state (the local stack saves after them)

        def locked_app(environ, start_response):
            operation = operation_of(environ)
            if operation not in READ_ONLY_OPERATIONS:
                self.mutations += 1
            with EMULATOR_LOCK:
                started = time.perf_counter()
                try:
                    # Materialize the body inside the lock: the response is computed there.
                    return list(app(environ, start_response))
                finally:
                    spent = time.perf_counter() - started
                    self.busy_seconds += spent
                    self.busy_by_operation[operation or "other"] += spent
                    self.requests_by_operation[operation or "other"] += 1

        self._server = make_server(host, port, locked_app, threaded=True, request_handler=QuietHandler)
        self.port = self._server.server_port
        self.url = f"http://{host}:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="emulator", daemon=True)

    def start(self) -> "SerializedServer":
        self._thread.start()
        # moto's backends are process-wide: start from an empty emulator whatever ran before.
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(f"{self.url}/moto-api/reset", method="POST"), timeout=10).close()
        return self

    def stop(self) -> None:
        self._server.shutdown()
