"""The AWS emulator, with its request handling serialized.

moto is not thread-safe: two concurrent conditional writes can both succeed in it. Every
request therefore goes through one lock, in-process (tests) and over HTTP (the local stack),
which keeps the claim guarantee that DynamoDB gives in AWS."""
from __future__ import annotations

import contextlib
import functools
import hmac
import json
import threading
from collections import Counter
import time
import warnings
from typing import Callable, Iterator

from jobsched.local.moto_lock import EMULATOR_LOCK  # noqa: F401 - also taken from here (state, replication, tasks)
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


# The moto version speed_up_moto's patches were checked against (pinned in pyproject.toml).
MOTO_PATCHED_VERSION = "5.2.5"


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
    - every deleted message was looked for twice in the whole queue, and every visibility change
      once per entry of its batch: the handles are looked for among the queue's in-flight
      messages first, once per batch (a lane holds minutes of delayed messages: a visibility
      batch took 9.6 ms with 6,000 of them, 1.5 ms with none);
    - every UpdateItem parses its update expression twice (request check, then update), although
      the functions send the same few expressions again and again: a parsed expression is kept
      (moto's validator works on a deep copy of it, so the kept tree is never changed);
    - an item operation's answer made of JSON's own types is written with json.dumps, not by
      walking botocore's output shape attribute by attribute (speed_up_item_answers)."""
    import moto.backends
    import moto.sqs.models as sqs_models
    from moto.core.utils import unix_time
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser
    from moto.sqs.exceptions import InvalidParameterValue, ReceiptHandleIsInvalid
    from moto.sqs.models import Queue, SQSBackend

    if getattr(moto.backends, "_jobsched_fast", False):
        return
    if moto.__version__ != MOTO_PATCHED_VERSION:
        # The patches replace moto internals that may have moved: on another version the emulator
        # runs unpatched (slower, still correct) rather than patched wrongly.
        warnings.warn(f"moto {moto.__version__} is not {MOTO_PATCHED_VERSION}, the version the emulator's "
                      "speed-ups were checked against: running without them", stacklevel=2)
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
        found = _holders(self, {receipt_handle})
        if not found:
            raise ReceiptHandleIsInvalid()
        _remove(self, found)

    def delete_message_batch(self, queue_name: str, receipts: list) -> tuple[list, list]:
        # One pass over the queue's in-flight messages for the whole batch (moto's deletes one
        # handle at a time, each a pass over the whole queue); the answers as moto gives them, in
        # the batch's order.
        queue = self.get_queue(queue_name)
        wanted = {r["ReceiptHandle"] for r in receipts} - queue.deleted_messages
        holders = _holders(queue, wanted)
        found = {handle for message in holders for handle in message.all_receipt_handles}
        _remove(queue, holders)
        success, errors = [], []
        for receipt in receipts:
            handle = receipt["ReceiptHandle"]
            if handle in found or handle in queue.deleted_messages:
                success.append(receipt["Id"])
            else:
                errors.append({"Id": receipt["Id"], "SenderFault": True, "Code": "ReceiptHandleIsInvalid",
                               "Message": f'The input receipt handle "{handle}" is not a valid receipt handle.'})
        return success, errors

    original_change_visibility = SQSBackend.change_message_visibility

    def change_message_visibility(self, queue_name: str, receipt_handle: str, visibility_timeout: int) -> None:
        # moto looks for the handle's message in the whole queue (a lane holds minutes of delayed
        # messages), once per entry of a batch: the in-flight messages are looked at first.
        if not isinstance(receipt_handle, str):  # a malformed request: moto's own answer
            return original_change_visibility(self, queue_name, receipt_handle, visibility_timeout)
        queue = self.get_queue(queue_name)
        holders = _holders(queue, {receipt_handle})
        if not holders:
            return original_change_visibility(self, queue_name, receipt_handle, visibility_timeout)
        (message,) = holders
        given_visibility_timeout = sqs_models.unix_time_millis() + int(visibility_timeout) * 1000
        if given_visibility_timeout - message.sent_timestamp > 43200 * 1000:
            raise InvalidParameterValue(
                f"Value {visibility_timeout} for parameter VisibilityTimeout is invalid. Reason: Total "
                "VisibilityTimeout for the message is beyond the limit [43200 seconds]")
        message.change_visibility(visibility_timeout)
        if message.visible and message in queue.pending_messages:
            queue.pending_messages.remove(message)

    Queue.messages = property(messages)
    Queue.delete_message = delete_message
    SQSBackend.delete_message_batch = delete_message_batch
    SQSBackend.change_message_visibility = change_message_visibility
    _speed_up_send(Queue, SQSBackend)

    parse = functools.lru_cache(maxsize=512)(UpdateExpressionParser.make)  # errors are not cached
    UpdateExpressionParser.make = staticmethod(parse)
    _speed_up_update_validation(parse)
    _speed_up_condition_lexing()
    _speed_up_update_copies()
    _speed_up_action_lookup()
    _speed_up_request_ids()
    _speed_up_table_query()
    speed_up_item_answers()
    moto.backends._jobsched_fast = True


def _holders(queue, handles: set) -> list:
    """The messages of `queue` that ever had one of `handles`. A handle is a message's from a
    receive, and a received message is in flight (the queue's pending messages) until its
    visibility ends and a receive finds it visible again, so those few are looked at first, then
    the whole queue for any handle not found (a message visible again, or a handle never given).
    A handle belongs to one message only (random, 170 characters or more, unless moto's random
    generator is seeded again, which the stack never does), so the messages are those moto's pass
    over the whole queue finds. A handle that is not a string (a request without one: every
    message once had None, before its first receive) is looked for as moto does, in every message."""
    if not all(isinstance(handle, str) for handle in handles):
        return [m for m in queue._messages if any(h in m.all_receipt_handles for h in handles)]
    found, seen, left = [], set(), set(handles)
    for in_flight, pool in ((True, queue.pending_messages), (False, queue._messages)):
        if not left:
            break
        for message in pool:
            if message.receipt_handle is None or id(message) in seen:
                continue
            had = left.intersection(message.all_receipt_handles)
            # An in-flight message that left the queue (to its dead-letter queue) is not the
            # queue's: moto's pass over the queue would not find it.
            if had and (not in_flight or message in queue._messages):
                found.append(message)
                seen.add(id(message))
                left -= had
                if not left:
                    break
    return found


def _remove(queue, messages: list) -> None:
    """Deleted: out of the queue and of its in-flight set, their handles remembered as deleted."""
    if not messages:
        return
    gone = {id(m) for m in messages}
    for message in messages:
        queue.pending_messages.discard(message)
        queue.deleted_messages.update(message.all_receipt_handles)
    queue._messages = [m for m in queue._messages if id(m) not in gone]


def _speed_up_send(Queue, SQSBackend) -> None:
    """Every message sent asks its queue for all its attributes (to read ContentBasedDeduplication),
    and three of them count the whole queue, reading the clock twice per queued message: a send to
    a lane that holds minutes of delayed messages cost milliseconds per message. While a message
    is sent, those three counts are not made (nothing in a send reads them: the send reads
    ContentBasedDeduplication alone; GetQueueAttributes still counts)."""
    sending = threading.local()

    def counted_unless_sending(count):
        def count_or_zero(self) -> int:
            return 0 if getattr(sending, "active", False) else count(self)
        return property(count_or_zero)

    for name in ("approximate_number_of_messages", "approximate_number_of_messages_delayed",
                 "approximate_number_of_messages_not_visible"):
        setattr(Queue, name, counted_unless_sending(getattr(Queue, name).fget))
    original_send = SQSBackend.send_message

    def send_message(self, *args, **kwargs):
        sending.active = True
        try:
            return original_send(self, *args, **kwargs)
        finally:
            sending.active = False

    SQSBackend.send_message = send_message


def _speed_up_update_validation(parse) -> None:
    """moto validates an update by ten depth-first passes over a deep copy of its syntax tree:
    - the copy is made by copy.deepcopy, node by node in Python: a kept tree is copied from its
      pickle instead (the same reconstruction, done in C; any other value is deep-copied as before);
    - every pass asks its processor for its node-type map twice per node (a new dict and tuple each
      time): each processor now builds it once;
    - three passes depend only on the expression, its attribute names and the table's keys, not on
      the item (clause counts, overlapping paths, no update of a key), and two of them look at every
      sub-expression's clauses again at every level: an expression that passed them is not checked
      again (the kept expression tree is the key, so a new expression is checked as before);
    - each pass walked the tree through two method calls per node (the walk and a hook for each
      child that only one processor uses), looking up its node types at every node: the walk is one
      local function per pass, the types looked up once, the hook called only where it exists (the
      same nodes in the same order, each replaced in its parent as before)."""
    import copy
    import pickle

    from moto.dynamodb.parsing import ast_nodes, expressions, validators

    pickled: dict[int, tuple[object, bytes]] = {}  # id(kept tree) → (tree, its pickle)

    def parse_and_pickle(expression: str):
        tree = parse(expression)
        if id(tree) not in pickled:
            try:
                pickled[id(tree)] = (tree, pickle.dumps(tree, pickle.HIGHEST_PROTOCOL))
            except Exception:  # noqa: BLE001 - a tree that cannot be pickled is deep-copied as before
                pass
        return tree

    def deepcopy(value, memo=None):
        kept = pickled.get(id(value))
        if kept is not None and kept[0] is value:
            return pickle.loads(kept[1])
        return copy.deepcopy(value, memo)

    expressions.UpdateExpressionParser.make = staticmethod(parse_and_pickle)
    validators.deepcopy = deepcopy

    def processing_map(self) -> dict:
        known = self.__dict__.get("_jobsched_map")
        if known is None:
            known = self.__dict__["_jobsched_map"] = self._processing_map()
            self.__dict__["_jobsched_types"] = tuple(known)
        return known

    def nodes_to_be_processed(self) -> tuple:
        processing_map(self)
        return self.__dict__["_jobsched_types"]

    def process(self, node):
        for class_key, processor in processing_map(self).items():
            if isinstance(node, class_key):
                return processor(node)
        return None

    ast_nodes.DepthFirstTraverser.nodes_to_be_processed = nodes_to_be_processed
    ast_nodes.DepthFirstTraverser.process = process

    Node = ast_nodes.Node
    no_hook = ast_nodes.DepthFirstTraverser.pre_processing_of_child

    def traverse(self, root):
        types = self.nodes_to_be_processed()
        hook = None if type(self).pre_processing_of_child is no_hook else self.pre_processing_of_child
        processed = self.process

        def walk(node, child_id):
            if isinstance(node, Node):
                parent = node.parent
                children = node.children
                if children is not None:
                    for i, child in enumerate(children):
                        if hook is not None:
                            hook(node, i)
                        walk(child, i)
                if isinstance(node, types):
                    node = processed(node)
                    node.parent = parent
                    if parent:
                        parent.children[child_id] = node
            return node

        return walk(root, -1)

    ast_nodes.DepthFirstTraverser.traverse = traverse

    expression_only = (validators.ActionCountValidator, validators.OverlappingPathsValidator,
                       validators.UpdateHashRangeKeyValidator)
    passed: dict[tuple, object] = {}  # (tree id, names, keys) → the tree (kept alive: ids stay unique)
    original_init = validators.UpdateExpressionValidator.__init__
    original_validate = validators.UpdateExpressionValidator.validate

    def init(self, expression, expression_attribute_names, expression_attribute_values, item, table):
        original_init(self, expression, expression_attribute_names, expression_attribute_values, item, table)
        key = (id(expression), tuple(sorted((expression_attribute_names or {}).items())),
               tuple(table.table_key_attrs))
        if passed.get(key) is expression:
            self.processors = [p for p in self.processors if not isinstance(p, expression_only)]
        else:
            self._jobsched_key, self._jobsched_tree = key, expression

    def validate(self):
        validated = original_validate(self)
        key = self.__dict__.get("_jobsched_key")
        if key is not None:
            if len(passed) > 4096:
                passed.clear()
            passed[key] = self._jobsched_tree
        return validated

    validators.UpdateExpressionValidator.__init__ = init
    validators.UpdateExpressionValidator.validate = validate


def _speed_up_action_lookup() -> None:
    """Every request lists its handler class's methods (inspect.getmembers over the class and its
    bases) to see whether the action is one of them: a class's methods do not change while the
    emulator runs (these patches are made before its first request), so they are listed once."""
    import moto.core.responses as core_responses

    listed: dict[type, tuple[str, ...]] = {}
    original = core_responses.method_names_from_class

    def method_names_from_class(clazz) -> list[str]:
        names = listed.get(clazz)
        if names is None:
            names = listed[clazz] = tuple(original(clazz))
        return list(names)

    core_responses.method_names_from_class = method_names_from_class


def _speed_up_update_copies() -> None:
    """An UpdateItem deep-copies the whole item twice: once before reading the answer's old
    values from it with Item.to_json, which builds them afresh anyway (nested values included),
    and once for the table's stream, which a table without one never reads. Neither copy is made
    where nothing reads it (measured alone: an update of an item with a 100-entry map, 3.5 ms →
    2.45 ms)."""
    import copy

    import moto.dynamodb.models as models
    import moto.dynamodb.responses as responses

    skip = threading.local()

    class CopyFor:
        """The `copy` module as one of moto's modules sees it: deepcopy is skipped while `flag` is set."""

        def __init__(self, flag: str) -> None:
            self._flag = flag

        def __getattr__(self, name: str):
            return getattr(copy, name)

        def deepcopy(self, value, memo=None):
            return value if getattr(skip, self._flag, False) else copy.deepcopy(value, memo)

    responses.copy = CopyFor("answer")
    models.copy = CopyFor("stream")
    handle, update = responses.DynamoHandler.update_item, models.DynamoDBBackend.update_item

    @functools.wraps(handle)
    def handle_update(self):
        skip.answer = True
        try:
            return handle(self)
        finally:
            skip.answer = False

    @functools.wraps(update)
    def update_item(self, table_name, *args, **kwargs):
        table = self.tables.get(table_name)
        skip.stream = table is not None and table.stream_shard is None
        try:
            return update(self, table_name, *args, **kwargs)
        finally:
            skip.stream = False

    responses.DynamoHandler.update_item = handle_update
    models.DynamoDBBackend.update_item = update_item


def _speed_up_table_query() -> None:
    """A query of a table's own key listed every item of the table, sorted by hash and range key
    (Python comparisons of every pair), to keep those of one partition, which it sorts again by
    range key: with the look-ahead's thousands of timers, 50 ms a query of the tick (bench
    lateness). It now starts from that partition's items alone: the same items (moto keys its
    partitions by the key's type and value, as its equality compares them), sorted by range key
    as before. A query of an index is left as it was."""
    from moto.dynamodb.models.table import Table

    original = Table.query

    def query(self, hash_key, range_comparison, range_objs, limit, exclusive_start_key, scan_index_forward,
              projection_expressions, index_name=None, *args, **kwargs):
        if index_name is not None or hash_key is None or "all_items" in self.__dict__:
            return original(self, hash_key, range_comparison, range_objs, limit, exclusive_start_key,
                            scan_index_forward, projection_expressions, index_name, *args, **kwargs)
        partition = self.items[hash_key] if hash_key in self.items else None  # never adds a partition
        if partition is None:
            candidates = []
        elif self.range_key_attr:
            candidates = list(partition.values())
        else:
            candidates = [partition]
        self.all_items = lambda: candidates  # the query's one use of it on this path
        try:
            return original(self, hash_key, range_comparison, range_objs, limit, exclusive_start_key,
                            scan_index_forward, projection_expressions, index_name, *args, **kwargs)
        finally:
            del self.all_items

    query.__wrapped__ = original
    Table.query = query


# The item operations whose answers are items and counts: plain JSON, as DynamoDB's JSON protocol
# writes them.
ITEM_ANSWERS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan", "PutItem", "UpdateItem", "DeleteItem",
                          "TransactGetItems"})


_JSON_SCALARS = (str, bool, int, float)


def plain_json(value) -> bool:
    """Made only of JSON's own types: dicts with string keys, lists, strings, booleans, numbers
    (not NaN); no None, bytes or datetime."""
    kind = type(value)
    if kind is dict:
        return all(type(k) is str and plain_json(v) for k, v in value.items())
    if kind is list:
        return all(plain_json(v) for v in value)
    return kind in _JSON_SCALARS and value == value


def speed_up_item_answers() -> None:
    """moto writes each DynamoDB answer by walking botocore's shape of the operation's output for
    every value, attribute by attribute: about 1.7 ms an item, 170 ms for a BatchGetItem of 100 jobs
    (the tick's read of a page) against about 1 ms for `json.dumps` of the same answer. An answer of
    an item operation made only of JSON's own types (no binary value, which moto hands its writer as
    bytes to encode; no timestamp; no None) is written with `json.dumps`, which is what the writer
    makes of it; any other answer, and every error, goes through moto's writer as before. The
    in-process stacks of the tests use it too (tests/conftest.py): it changes no answer."""
    import json

    import moto

    if moto.__version__ != MOTO_PATCHED_VERSION:
        return  # moto's writer, as speed_up_moto leaves every other patch off
    from moto.dynamodb.responses import DynamoResult

    original = DynamoResult.execute_result
    if hasattr(original, "__wrapped__"):
        return  # in place already

    def execute_result(self, context):
        result = self.result
        operation = context.operation_model
        if operation.name not in ITEM_ANSWERS or type(result) is not dict or not plain_json(result):
            return original(self, context)
        version = operation.service_model.metadata.get("jsonVersion", "1.0")
        return 200, {"Content-Type": f"application/x-amz-json-{version}"}, json.dumps(result)

    execute_result.__wrapped__ = original
    DynamoResult.execute_result = execute_result


def _speed_up_request_ids() -> None:
    """Every answer's request id (52 letters and digits) was drawn one character at a time, 52
    calls of moto's random generator (3 % of a request's time in the emulator): one draw of 52
    from the same generator, the same alphabet (seeding moto's generator still repeats them)."""
    import string

    import moto.core.responses as core_responses
    from moto.moto_api._internal import mock_random

    alphabet = string.ascii_letters + string.digits

    def gen_amzn_requestid_long(headerdict=None) -> str:
        request_id = "".join(mock_random.choices(alphabet, k=52))
        if isinstance(headerdict, dict):
            headerdict.update({"x-amzn-requestid": request_id})
        return request_id

    core_responses.gen_amzn_requestid_long = gen_amzn_requestid_long


def _speed_up_condition_lexing() -> None:
    """moto lexes a condition expression with six regular expressions per token on every request;
    the functions send the same few conditions again and again: the tokens of a condition are
    kept (they are immutable tuples; the parser consumes a fresh deque of them each time)."""
    from collections import deque

    from moto.dynamodb.comparisons import ConditionExpressionParser

    original = ConditionExpressionParser._lex_condition_expression
    lexed: dict[str, tuple] = {}

    def lex(self):
        tokens = lexed.get(self.condition_expression)
        if tokens is None:
            tokens = tuple(original(self))  # an expression that cannot be lexed raises, and is not kept
            if len(lexed) > 4096:
                lexed.clear()
            lexed[self.condition_expression] = tokens
        return deque(tokens)

    ConditionExpressionParser._lex_condition_expression = lex


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
