"""moto made faster where the emulator's own cost grows with use, not with what is asked: each
patch answers exactly as the code it replaces (tests/unit/test_emulator_speedups.py; measured in
docs/performance.md). Applied by the emulator's server (local/emulator.py) and the test suite."""
from __future__ import annotations

import functools
import threading
import warnings


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


def share_botocore_loader() -> None:
    """Every botocore session of this process loads AWS's service models and endpoint data through
    one loader. botocore makes a loader per session and caches what it parsed in that loader only;
    the emulator's stacks open sessions per function and per test (each role has its own), and each
    new session parsed the same JSON files again: about half a second of every in-process stack's
    start. The loader's data is read-only to botocore (its caches hand the same objects to every
    client of a session already), so one loader per data path answers exactly as many do. Applied by
    the emulator and the test suite, never in Lambda."""
    import botocore.loaders
    import botocore.session

    if getattr(botocore.session, "_jobsched_shared_loader", False):
        return
    loaders: dict = {}
    lock = threading.Lock()
    create = botocore.loaders.create_loader

    def create_loader(search_path_string=None):
        with lock:
            if search_path_string not in loaders:
                loaders[search_path_string] = create(search_path_string)
            return loaders[search_path_string]

    botocore.session.create_loader = create_loader
    botocore.session._jobsched_shared_loader = True
    _share_endpoint_rulesets()


def _share_endpoint_rulesets() -> None:
    """Each botocore client built its service's endpoint rule set anew from the same (now shared)
    data: about 10 ms a client, two dozen clients a stack. A rule set is evaluated without being
    changed (each evaluation has its own scope), so one per service's data serves every client."""
    from botocore import endpoint_provider

    rulesets: dict = {}
    lock = threading.Lock()
    build = endpoint_provider.RuleSet

    def __init__(self, ruleset_data, partition_data, excluded_params=None):
        key = (id(ruleset_data), id(partition_data))
        with lock:
            kept = rulesets.get(key)
            if kept is None or kept[0] is not ruleset_data or kept[1] is not partition_data:
                kept = rulesets[key] = (ruleset_data, partition_data, build(**ruleset_data, partitions=partition_data))
        self.ruleset = kept[2]
        self._excluded_params = excluded_params or frozenset()

    endpoint_provider.EndpointProvider.__init__ = __init__
