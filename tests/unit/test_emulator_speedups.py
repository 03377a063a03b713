"""The local runtime's narrow fixes to the emulator answer exactly as the code they replace."""
import moto.backends
from moto.sqs.models import Message, SQSBackend

from jobsched.local import moto_speedups


def test_the_module_list_is_the_directory_listing_once():
    listed = list(moto.backends.list_of_moto_modules())
    moto_speedups.speed_up_moto()
    assert list(moto.backends.list_of_moto_modules()) == listed
    assert "dynamodb" in moto.backends.list_of_moto_modules() and "sqs" in moto.backends.list_of_moto_modules()


def test_retention_is_read_from_the_queue_as_before(monkeypatch):
    original = SQSBackend.is_message_valid_based_on_retention_period
    backend = SQSBackend("us-east-1", "123456789012")
    backend.create_queue("q", MessageRetentionPeriod="60")
    fresh, old = Message("m1", "body"), Message("m2", "body")
    fresh.mark_sent()
    old.mark_sent()
    old.sent_timestamp -= 61_000
    expected = [original(backend, "q", m) for m in (fresh, old)]
    moto_speedups.speed_up_moto()
    fast = SQSBackend.is_message_valid_based_on_retention_period
    assert fast is not original or expected == [True, False]
    assert [fast(backend, "q", m) for m in (fresh, old)] == expected == [True, False]


def _queue_with_three_messages(backend):
    """One visible, one delayed 60 s, one received (in flight for 30 s)."""
    backend.create_queue("lane")
    visible = backend.send_message("lane", "visible")
    delayed = backend.send_message("lane", "delayed", delay_seconds=60)
    backend.send_message("lane", "in flight")
    received = backend.receive_message("lane", 10, 0, 30)
    return visible, delayed, received


def test_visible_messages_are_those_the_emulator_listed_before():
    # (a clock ahead of the wall: the emulator checks retention against the wall clock)
    from unittest import mock

    from moto.core.utils import unix_time_millis
    from moto.sqs.models import Queue

    moto_speedups.speed_up_moto()
    backend = SQSBackend("us-east-1", "123456789012")
    with mock.patch("moto.sqs.models.unix_time_millis", lambda *a: 2_000_000_000_000.0):
        visible, delayed, received = _queue_with_three_messages(backend)
        queue = backend.get_queue("lane")
        # the receive took the two undelayed ones; nothing is visible now
        assert {m.body for m in received} == {"visible", "in flight"} and queue.messages == []
    for at_ms, expected in ((2_000_000_029_000.0, set()), (2_000_000_031_000.0, {"visible", "in flight"}),
                            (2_000_000_061_000.0, {"visible", "in flight", "delayed"})):
        with mock.patch("moto.sqs.models.unix_time_millis", lambda *a, t=at_ms: t):
            listed = {m.body for m in queue.messages}
            by_properties = {m.body for m in queue._messages if m.visible and not m.delayed}
            assert listed == by_properties == expected, at_ms
    assert isinstance(Queue.messages, property) and unix_time_millis() > 0


def test_a_deleted_message_is_gone_once_and_an_unknown_handle_is_refused():
    import pytest
    from moto.sqs.exceptions import ReceiptHandleIsInvalid

    moto_speedups.speed_up_moto()
    backend = SQSBackend("us-east-1", "123456789012")
    _, _, received = _queue_with_three_messages(backend)
    queue = backend.get_queue("lane")
    handle = received[0].receipt_handle
    backend.delete_message("lane", handle)
    assert len(queue._messages) == 2 and received[0].body not in {m.body for m in queue._messages}
    backend.delete_message("lane", handle)  # again: fine, as in SQS
    assert len(queue._messages) == 2
    with pytest.raises(ReceiptHandleIsInvalid):
        backend.delete_message("lane", "not-a-handle")


def _shape(node):
    """A parsed expression tree as plain tuples: node types and leaf values."""
    children = getattr(node, "children", None)
    if children is None:
        return repr(node)
    return (type(node).__name__, tuple(_shape(child) for child in children))


def test_an_update_expression_is_parsed_once_and_the_kept_tree_never_changes():
    import pytest
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser

    moto_speedups.speed_up_moto()
    expression = "SET #st = :running, attempt = if_not_exists(attempt, :zero) + :one REMOVE retryAtMs"
    tree = UpdateExpressionParser.make(expression)
    before = _shape(tree)
    assert UpdateExpressionParser.make(expression) is tree

    # moto's own update (with its validator) leaves the kept tree as it was
    import boto3
    from moto import mock_aws

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(TableName="T", KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                            AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                            BillingMode="PAY_PER_REQUEST")
        for _ in range(2):
            client.update_item(TableName="T", Key={"k": {"S": "a"}}, UpdateExpression=expression,
                               ExpressionAttributeNames={"#st": "status"},
                               ExpressionAttributeValues={":running": {"S": "RUNNING"}, ":zero": {"N": "0"},
                                                          ":one": {"N": "1"}})
        item = client.get_item(TableName="T", Key={"k": {"S": "a"}})["Item"]
    assert item["attempt"] == {"N": "2"} and item["status"] == {"S": "RUNNING"}
    assert UpdateExpressionParser.make(expression) is tree
    assert _shape(tree) == before and "ExpressionAttributeValue" in str(before)
    with pytest.raises(Exception) as first:
        UpdateExpressionParser.make("SET = nonsense")
    with pytest.raises(type(first.value)):
        UpdateExpressionParser.make("SET = nonsense")  # an error is raised each time, not kept


def _table_client():
    import boto3

    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(TableName="T", KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                        BillingMode="PAY_PER_REQUEST")
    return client


def _update_error(client, expression: str, names=None, values=None, key: str = "a") -> str | None:
    from botocore.exceptions import ClientError

    arguments = {"TableName": "T", "Key": {"k": {"S": key}}, "UpdateExpression": expression}
    if names:
        arguments["ExpressionAttributeNames"] = names
    if values:
        arguments["ExpressionAttributeValues"] = values
    try:
        client.update_item(**arguments)
        return None
    except ClientError as exc:
        return exc.response["Error"]["Message"]


def test_expression_checks_still_refuse_what_they_refused_each_time():
    """The checks that depend only on the expression are skipped for an expression that passed
    them, with the same attribute names and table keys; everything else is checked every time."""
    from moto import mock_aws

    moto_speedups.speed_up_moto()
    one = {":v": {"N": "1"}}
    with mock_aws():
        client = _table_client()
        client.put_item(TableName="T", Item={"k": {"S": "s"}, "label": {"S": "x"}, "n": {"N": "1"}})
        for _ in range(2):  # the second time goes through the kept results
            assert "Two document paths overlap" in _update_error(client, "SET a = :v, a = :v", values=one)
            assert '"SET" section can only be used once' in _update_error(client, "SET a = :v SET b = :v", values=one)
            assert "part of the key" in _update_error(client, "SET k = :v", values=one)
            assert _update_error(client, "SET #n = :v", names={"#n": "other"}, values=one) is None
            # the same expression naming the key: refused although the expression passed before
            assert "part of the key" in _update_error(client, "SET #n = :v", names={"#n": "k"}, values=one)
            # what depends on the item is checked every time: a missing attribute, a type mismatch
            assert _update_error(client, "SET n = n + :v", values=one, key="s") is None
            assert "does not exist in the item" in _update_error(client, "SET n = n + :v", values=one, key="b")
            assert "operand type" in _update_error(client, "SET label = label + :v", values=one, key="s")
        item = client.get_item(TableName="T", Key={"k": {"S": "a"}})["Item"]
    assert item == {"k": {"S": "a"}, "other": {"N": "1"}}


def test_a_kept_tree_is_copied_whole_for_each_validation():
    from moto.dynamodb.parsing import validators
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser

    moto_speedups.speed_up_moto()
    tree = UpdateExpressionParser.make("SET a = if_not_exists(a, :zero) + :one REMOVE b")
    first, second = validators.deepcopy(tree), validators.deepcopy(tree)
    assert first is not tree and second is not first and _shape(first) == _shape(second) == _shape(tree)
    assert first.children[0].parent is first  # parent links point into the copy, not the kept tree
    other = {"nested": [1, {"x": 2}]}
    copied = validators.deepcopy(other)
    assert copied == other and copied["nested"] is not other["nested"]  # anything else: a deep copy


def test_a_kept_condition_is_evaluated_with_each_requests_values():
    from botocore.exceptions import ClientError
    import pytest
    from moto import mock_aws

    moto_speedups.speed_up_moto()
    with mock_aws():
        client = _table_client()
        client.put_item(TableName="T", Item={"k": {"S": "a"}, "n": {"N": "5"}})
        outcomes = []
        for limit in ("9", "3", "6", "5"):
            try:
                client.update_item(TableName="T", Key={"k": {"S": "a"}}, UpdateExpression="SET seen = :limit",
                                   ConditionExpression="attribute_exists(k) AND n < :limit",
                                   ExpressionAttributeValues={":limit": {"N": limit}})
                outcomes.append(True)
            except ClientError as exc:
                assert exc.response["Error"]["Code"] == "ConditionalCheckFailedException"
                outcomes.append(False)
        assert outcomes == [True, False, True, False]
        for _ in range(2):  # a condition that cannot be lexed is refused each time (in-process: raised)
            with pytest.raises((ClientError, ValueError)):
                client.update_item(TableName="T", Key={"k": {"S": "a"}}, UpdateExpression="SET seen = :v",
                                   ConditionExpression="n ~ :v", ExpressionAttributeValues={":v": {"N": "1"}})


def test_a_send_does_not_count_the_queue_and_the_counts_stay_right():
    import boto3
    from moto import mock_aws
    from moto.sqs.models import Message

    moto_speedups.speed_up_moto()
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        lane = sqs.create_queue(QueueName="lane")["QueueUrl"]
        looked_at = []  # messages whose delay was looked at (what the count of delayed ones does)
        original = Message.delayed

        def spy(self):
            looked_at.append(self.body)
            return original.fget(self)

        Message.delayed = property(spy)
        try:
            for start in (0, 5):
                sqs.send_message_batch(QueueUrl=lane, Entries=[
                    {"Id": str(i), "MessageBody": f"m{i}", "DelaySeconds": 60 if i < 3 else 0}
                    for i in range(start, start + 5)])
            looked_at_by_sends = len(looked_at)
            sqs.receive_message(QueueUrl=lane, MaxNumberOfMessages=1, VisibilityTimeout=30)
            attributes = sqs.get_queue_attributes(QueueUrl=lane, AttributeNames=["All"])["Attributes"]
        finally:
            Message.delayed = original
        assert looked_at_by_sends == 0 and len(looked_at) >= 10  # GetQueueAttributes still counts
        assert attributes["ApproximateNumberOfMessagesDelayed"] == "3"
        assert attributes["ApproximateNumberOfMessages"] == "6"
        assert attributes["ApproximateNumberOfMessagesNotVisible"] == "1"
        # what a send does read from the attributes still works: content-based deduplication
        fifo = sqs.create_queue(QueueName="q.fifo", Attributes={"FifoQueue": "true",
                                                                "ContentBasedDeduplication": "true"})["QueueUrl"]
        for _ in range(2):
            sqs.send_message(QueueUrl=fifo, MessageBody="same", MessageGroupId="g")
        got = sqs.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10)["Messages"]
        assert [m["Body"] for m in got] == ["same"]


def test_a_batch_delete_answers_as_one_delete_per_handle():
    moto_speedups.speed_up_moto()
    backend = SQSBackend("us-east-1", "123456789012")
    backend.create_queue("lane")
    for i in range(5):
        backend.send_message("lane", f"m{i}")
    received = backend.receive_message("lane", 10, 0, 30)
    handles = [m.receipt_handle for m in received]
    backend.delete_message("lane", handles[0])  # deleted before: deleting again succeeds
    success, errors = backend.delete_message_batch("lane", [
        {"Id": "a", "ReceiptHandle": handles[1]}, {"Id": "b", "ReceiptHandle": "not-a-handle"},
        {"Id": "c", "ReceiptHandle": handles[0]}, {"Id": "d", "ReceiptHandle": handles[2]},
        {"Id": "e", "ReceiptHandle": handles[1]}])
    assert success == ["a", "c", "d", "e"]
    assert errors == [{"Id": "b", "SenderFault": True, "Code": "ReceiptHandleIsInvalid",
                       "Message": 'The input receipt handle "not-a-handle" is not a valid receipt handle.'}]
    left = backend.get_queue("lane")._messages
    assert sorted(m.body for m in left) == sorted(m.body for m in received[3:])


def test_the_pinned_moto_is_the_version_the_patches_were_checked_against():
    """The patches replace moto internals; pyproject.toml pins the version they were checked
    against, and the emulator refuses to patch another one."""
    import pathlib

    import moto

    from jobsched.local.moto_speedups import MOTO_PATCHED_VERSION

    pyproject = (pathlib.Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert f'cloudformation]=={MOTO_PATCHED_VERSION}"' in pyproject
    assert moto.__version__ == MOTO_PATCHED_VERSION


def test_an_update_answers_old_values_as_they_were_without_copies_nothing_reads():
    """The item is copied only for ReturnValues that read its old values: those still answer the
    values before the update, although the update changes the nested map in place."""
    from moto import mock_aws

    moto_speedups.speed_up_moto()
    with mock_aws():
        client = _table_client()
        answers = {}
        for i, mode in enumerate(("NONE", "ALL_NEW", "ALL_OLD", "UPDATED_OLD", "UPDATED_NEW")):
            client.put_item(TableName="T", Item={"k": {"S": mode}, "slots": {"M": {"a": {"N": "1"}}}, "n": {"N": "7"}})
            answer = client.update_item(TableName="T", Key={"k": {"S": mode}}, UpdateExpression="SET slots.#s = :v",
                                        ExpressionAttributeNames={"#s": "b"},
                                        ExpressionAttributeValues={":v": {"N": str(i)}}, ReturnValues=mode)
            answers[mode] = answer.get("Attributes")
            stored = client.get_item(TableName="T", Key={"k": {"S": mode}})["Item"]
            assert stored["slots"] == {"M": {"a": {"N": "1"}, "b": {"N": str(i)}}}
    assert answers["NONE"] is None
    assert answers["ALL_NEW"] == {"k": {"S": "ALL_NEW"}, "slots": {"M": {"a": {"N": "1"}, "b": {"N": "1"}}}, "n": {"N": "7"}}
    assert answers["ALL_OLD"] == {"k": {"S": "ALL_OLD"}, "slots": {"M": {"a": {"N": "1"}}}, "n": {"N": "7"}}
    assert answers["UPDATED_OLD"] == {"slots": {"M": {"a": {"N": "1"}}}}
    assert answers["UPDATED_NEW"] == {"slots": {"M": {"b": {"N": "4"}}}}


def test_a_table_with_a_stream_still_gets_the_old_image():
    from moto import mock_aws
    from moto.dynamodb.models import dynamodb_backends

    moto_speedups.speed_up_moto()
    with mock_aws():
        client = _table_client()
        client.create_table(TableName="S", KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                            AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                            BillingMode="PAY_PER_REQUEST",
                            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})
        client.put_item(TableName="S", Item={"k": {"S": "a"}, "slots": {"M": {"a": {"N": "1"}}}})
        client.update_item(TableName="S", Key={"k": {"S": "a"}}, UpdateExpression="SET slots.b = :v",
                           ExpressionAttributeValues={":v": {"N": "2"}})
        record = dynamodb_backends["123456789012"]["us-east-1"].tables["S"].stream_shard.items[-1].record["dynamodb"]
    assert record["OldImage"]["slots"] == {"M": {"a": {"N": "1"}}}
    assert record["NewImage"]["slots"] == {"M": {"a": {"N": "1"}, "b": {"N": "2"}}}


def test_a_handlers_methods_are_listed_once_and_answer_as_before():
    import moto.core.responses as core_responses
    from moto.core.utils import method_names_from_class as listed_each_time
    from moto.dynamodb.responses import DynamoHandler
    from moto.sqs.responses import SQSResponse

    moto_speedups.speed_up_moto()
    for handler in (DynamoHandler, SQSResponse):
        assert core_responses.method_names_from_class(handler) == listed_each_time(handler)
    assert "update_item" in core_responses.method_names_from_class(DynamoHandler)
    first = core_responses.method_names_from_class(DynamoHandler)
    first.clear()  # a caller changing its list changes no other caller's
    assert core_responses.method_names_from_class(DynamoHandler) == listed_each_time(DynamoHandler)


def test_the_walk_of_each_pass_visits_and_replaces_nodes_as_moto_s_own(monkeypatch):
    """Every pass of the validator, over the functions' own update expressions, gives the same
    tree through the faster walk as through moto's recursive one (which the patch leaves in place)."""
    from moto.dynamodb.models.dynamo_type import DynamoType, Item
    from moto.dynamodb.parsing import ast_nodes, validators
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser

    moto_speedups.speed_up_moto()

    class Table:
        table_key_attrs = ["k"]
        attr = []
        attribute_keys = ["k"]

    item = Item(hash_key=DynamoType({"S": "a"}), range_key=None,
                attrs={"k": {"S": "a"}, "attempt": {"N": "2"}, "attempts": {"L": [{"S": "x"}]},
                       "used": {"N": "3"}, "slots": {"M": {"e1": {"N": "5"}}}})
    names = {"#st": "status", "#ex": "e1"}
    values = {":running": {"S": "RUNNING"}, ":zero": {"N": "0"}, ":one": {"N": "1"}, ":lease": {"N": "9"},
              ":emp": {"L": []}, ":a": {"L": [{"S": "y"}]}, ":minus": {"N": "-1"}}
    expressions = ["SET #st = :running, attempt = if_not_exists(attempt, :zero) + :one REMOVE retryAtMs",
                   "SET #st = :running, attempts = list_append(if_not_exists(attempts, :emp), :a)",
                   "SET slots.#ex = if_not_exists(slots.#ex, :lease)", "REMOVE slots.#ex", "ADD used :minus",
                   "ADD used :one SET attempt = attempt - :one"]

    def tree(node):  # a tree as plain values: node types, leaf values, other leaves by type and fields
        children = getattr(node, "children", None)
        if children is not None:
            return (type(node).__name__, tuple(tree(child) for child in children))
        if " object at 0x" in repr(node):
            return (type(node).__name__, tuple(sorted((k, repr(v)) for k, v in vars(node).items() if k != "parent")))
        return repr(node)

    def passes(expression):
        validator = validators.UpdateExpressionValidator(UpdateExpressionParser.make(expression), names,
                                                         values, item, Table())
        trees, node = [], validator.node_to_validate
        for processor in validator.processors:
            node = processor.traverse(node)
            trees.append(tree(node))
        return trees

    for expression in expressions:
        fast = passes(expression)
        monkeypatch.setattr(ast_nodes.DepthFirstTraverser, "traverse",
                            lambda self, node: self.traverse_node_recursively(node))
        assert passes(expression) == fast, expression
        monkeypatch.undo()


def test_request_ids_are_52_letters_and_digits_from_moto_s_generator():
    import string

    import moto.core.responses as core_responses
    from moto.moto_api._internal import mock_random

    moto_speedups.speed_up_moto()
    headers = {}
    first = core_responses.gen_amzn_requestid_long(headers)
    assert headers == {"x-amzn-requestid": first}
    assert len(first) == 52 and set(first) <= set(string.ascii_letters + string.digits)
    assert len({core_responses.gen_amzn_requestid_long() for _ in range(100)}) == 100
    mock_random.seed(7)
    seeded = core_responses.gen_amzn_requestid_long()
    mock_random.seed(7)
    try:
        assert core_responses.gen_amzn_requestid_long() == seeded  # moto's seeding still repeats them
    finally:
        mock_random.seed()  # back to unseeded for whatever runs next


def test_a_query_of_the_table_s_key_answers_as_before_from_its_partition_alone(monkeypatch):
    """Every way the functions query a table's own key (a range condition, a page limit and its
    continuation, backwards, a filter, a projection, a hash-only table) answers the same with the
    partition's items alone as with moto's listing of the whole table; an index query is untouched."""
    import boto3
    from moto import mock_aws
    from moto.dynamodb.models.table import Table

    moto_speedups.speed_up_moto()
    fast_query = Table.query

    def run():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(TableName="R", BillingMode="PAY_PER_REQUEST",
                            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                       {"AttributeName": "sk", "KeyType": "RANGE"}],
                            AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in ("pk", "sk", "g")],
                            GlobalSecondaryIndexes=[{"IndexName": "ByG", "Projection": {"ProjectionType": "ALL"},
                                                     "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}]}])
        client.create_table(TableName="H", BillingMode="PAY_PER_REQUEST",
                            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])
        for p in ("a", "b", "c"):
            for i in (5, 1, 9, 3, 7, 2):
                client.put_item(TableName="R", Item={"pk": {"S": p}, "sk": {"S": f"s{i}"}, "n": {"N": str(i)},
                                                     "g": {"S": f"g{i % 2}"}})
            client.put_item(TableName="H", Item={"pk": {"S": p}, "n": {"N": "1"}})
        answers = []

        def q(**kw):
            answer = client.query(**kw)
            answer.pop("ResponseMetadata")
            answers.append(answer)
            return answer

        v = {":p": {"S": "b"}}
        q(TableName="R", KeyConditionExpression="pk = :p", ExpressionAttributeValues=v)
        q(TableName="R", KeyConditionExpression="pk = :p AND sk BETWEEN :x AND :y",
          ExpressionAttributeValues={**v, ":x": {"S": "s2"}, ":y": {"S": "s7"}}, ScanIndexForward=False)
        page = q(TableName="R", KeyConditionExpression="pk = :p", ExpressionAttributeValues=v, Limit=2)
        q(TableName="R", KeyConditionExpression="pk = :p", ExpressionAttributeValues=v, Limit=2,
          ExclusiveStartKey=page["LastEvaluatedKey"])
        q(TableName="R", KeyConditionExpression="pk = :p", FilterExpression="n > :three",
          ExpressionAttributeValues={**v, ":three": {"N": "3"}}, ProjectionExpression="sk, n")
        q(TableName="R", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "none"}})
        q(TableName="H", KeyConditionExpression="pk = :p", ExpressionAttributeValues=v)
        q(TableName="H", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "none"}})
        q(TableName="R", IndexName="ByG", KeyConditionExpression="g = :g", ExpressionAttributeValues={":g": {"S": "g1"}})
        return answers, client.scan(TableName="R")["Count"], client.scan(TableName="H")["Count"]

    with mock_aws():
        fast = run()
    assert fast[0][0]["Count"] == 6 and fast[0][1]["Count"] == 4 and fast[1:] == (18, 3)  # nothing added
    monkeypatch.setattr(Table, "query", fast_query.__wrapped__)  # moto's own
    with mock_aws():
        assert run() == fast


def test_item_answers_written_as_plain_json_parse_as_moto_s_own_writer_makes_them(monkeypatch):
    # Every answer of the item operations is written both ways and parsed by botocore as a client
    # would: the same answer, the same status and content type; binary values take moto's writer.
    from collections import Counter

    import boto3
    import botocore.parsers
    from moto import mock_aws
    from moto.dynamodb.responses import DynamoResult

    moto_speedups.speed_up_moto()
    fast = DynamoResult.execute_result
    slow = fast.__wrapped__
    parser = botocore.parsers.create_parser("json")
    compared, plain = Counter(), Counter()

    def both(self, context):
        answers = [fast(self, context), slow(self, context)]
        shape = context.operation_model.output_shape
        parsed = [parser.parse({"body": body.encode(), "headers": headers, "status_code": status}, shape)
                  for status, headers, body in answers]
        assert parsed[0] == parsed[1], context.operation_model.name
        assert answers[0][0] == answers[1][0] and answers[0][1]["Content-Type"] == answers[1][1]["Content-Type"]
        compared[context.operation_model.name] += 1
        plain[context.operation_model.name] += moto_speedups.plain_json(self.result)
        return answers[0]

    monkeypatch.setattr(DynamoResult, "execute_result", both)
    item = {"pk": {"S": "tenant"}, "sk": {"S": "job_1"}, "n": {"N": "12.5"}, "flag": {"BOOL": True},
            "nothing": {"NULL": True}, "list": {"L": [{"N": "1"}, {"S": "x"}, {"M": {"a": {"BOOL": False}}}]},
            "map": {"M": {"inner": {"M": {"deep": {"S": "é ✓ \"quoted\""}}}, "empty": {"M": {}}}},
            "ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2.5"]}, "text": {"S": "p" * 500}}
    binary = {"pk": {"S": "tenant"}, "sk": {"S": "job_2"}, "b": {"B": b"\x00\xffbytes"}, "bs": {"BS": [b"1", b"2"]}}
    with mock_aws():
        c = boto3.client("dynamodb", region_name="us-east-1")
        c.create_table(TableName="t", BillingMode="PAY_PER_REQUEST",
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                             {"AttributeName": "sk", "AttributeType": "S"}],
                       KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}])
        key = {"pk": item["pk"], "sk": item["sk"]}
        c.put_item(TableName="t", Item=item)
        c.put_item(TableName="t", Item=item, ReturnValues="ALL_OLD")
        c.put_item(TableName="t", Item=binary)
        assert c.get_item(TableName="t", Key=key, ConsistentRead=True)["Item"] == item
        assert c.get_item(TableName="t", Key={"pk": {"S": "tenant"}, "sk": {"S": "job_2"}})["Item"] == binary
        c.get_item(TableName="t", Key={"pk": {"S": "nobody"}, "sk": {"S": "x"}})
        c.batch_get_item(RequestItems={"t": {"Keys": [key, {"pk": {"S": "tenant"}, "sk": {"S": "none"}}]}},
                         ReturnConsumedCapacity="TOTAL")
        page = c.query(TableName="t", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": item["pk"]},
                       Limit=1, ReturnConsumedCapacity="TOTAL")
        assert page["Count"] == 1 and "LastEvaluatedKey" in page
        c.query(TableName="t", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": item["pk"]},
                ProjectionExpression="sk, #n", ExpressionAttributeNames={"#n": "n"})
        c.scan(TableName="t")
        names = {"#n": "n", "#l": "list", "#f": "flag"}
        c.update_item(TableName="t", Key=key, UpdateExpression="SET #n = #n + :one, #l[0] = :two REMOVE #f",
                      ExpressionAttributeNames=names, ExpressionAttributeValues={":one": {"N": "1"}, ":two": {"N": "2"}},
                      ReturnValues="ALL_NEW")
        c.update_item(TableName="t", Key=key, UpdateExpression="SET #t = :t", ExpressionAttributeNames={"#t": "text"},
                      ExpressionAttributeValues={":t": {"S": "q"}}, ReturnValues="UPDATED_OLD")
        c.update_item(TableName="t", Key=key, UpdateExpression="SET #t = :t", ExpressionAttributeNames={"#t": "text"},
                      ExpressionAttributeValues={":t": {"S": "r"}})
        c.batch_write_item(RequestItems={"t": [{"PutRequest": {"Item": {**item, "sk": {"S": "job_3"}}}}]})
        c.transact_get_items(TransactItems=[{"Get": {"TableName": "t", "Key": key}}])
        c.transact_write_items(TransactItems=[{"Put": {"TableName": "t", "Item": {**item, "sk": {"S": "job_4"}}}}])
        c.delete_item(TableName="t", Key=key, ReturnValues="ALL_OLD")
    assert moto_speedups.ITEM_ANSWERS <= set(compared)  # (and CreateTable, through moto's writer)
    # written as plain JSON, but for the answers holding binary values (2) and CreateTable's (timestamps)
    assert sum(plain.values()) == sum(compared.values()) - 3


def _lane_with_delayed_and_received(delayed: int, visible: int):
    """A lane holding `delayed` messages due in 10 minutes and `visible` ones, all of these received
    (in flight): (the backend, the queue, the received messages)."""
    moto_speedups.speed_up_moto()
    backend = SQSBackend("us-east-1", "123456789012")
    backend.create_queue("lane")
    for i in range(delayed):
        backend.send_message("lane", f"later{i}", delay_seconds=600)
    for i in range(visible):
        backend.send_message("lane", f"m{i}")
    received = backend.receive_message("lane", 10, 0, 30)
    return backend, backend.get_queue("lane"), received

def test_a_visibility_batch_changes_the_handles_messages_as_moto_does_among_delayed_ones():
    """In-flight messages are looked at first; a message visible again, an old handle of a message
    received twice, an unknown handle and a timeout beyond 12 hours answer as moto's pass over the
    whole queue answers them."""
    from unittest import mock

    backend, queue, received = _lane_with_delayed_and_received(delayed=50, visible=4)
    assert sorted(m.body for m in received) == ["m0", "m1", "m2", "m3"]
    handles = {m.body: m.receipt_handle for m in received}
    success, errors = backend.change_message_visibility_batch("lane", [
        {"Id": "a", "ReceiptHandle": handles["m0"], "VisibilityTimeout": 0},
        {"Id": "b", "ReceiptHandle": "not-a-handle", "VisibilityTimeout": 0},
        {"Id": "c", "ReceiptHandle": handles["m1"], "VisibilityTimeout": 120},
        {"Id": "d", "ReceiptHandle": handles["m2"], "VisibilityTimeout": 43_201}])
    assert success == ["a", "c"]
    assert [e["Id"] for e in errors] == ["b", "d"]
    assert errors[0]["Code"] == "ReceiptHandleIsInvalid" and errors[1]["Code"] == "InvalidParameterValue"
    by_body = {m.body: m for m in queue._messages}
    assert by_body["m0"].visible and by_body["m0"] not in queue.pending_messages
    assert not by_body["m1"].visible and by_body["m1"] in queue.pending_messages
    # m3's visibility ends: a receive takes it again (a new handle); its old one still changes it
    with mock.patch("moto.sqs.models.unix_time_millis", lambda *a: by_body["m3"].visible_at + 1):
        again = backend.receive_message("lane", 10, 0, 30)
        assert "m3" in {m.body for m in again}
        backend.change_message_visibility("lane", handles["m3"], 0)
        assert by_body["m3"].visible
    import pytest
    from moto.sqs.exceptions import InvalidParameterValue, ReceiptHandleIsInvalid
    with pytest.raises(ReceiptHandleIsInvalid):
        backend.change_message_visibility("lane", "not-a-handle", 10)
    with pytest.raises(InvalidParameterValue):
        backend.change_message_visibility("lane", handles["m1"], 43_201)
    # an in-flight message that left the queue is not found (as moto's pass over the queue)
    queue._messages.remove(by_body["m1"])
    with pytest.raises(ReceiptHandleIsInvalid):
        backend.change_message_visibility("lane", handles["m1"], 0)
    with pytest.raises(ReceiptHandleIsInvalid):
        backend.delete_message("lane", handles["m1"])


def test_handles_are_looked_for_among_in_flight_messages_before_the_whole_queue():
    """With minutes of delayed messages in a lane, a delete or a visibility change reads the few
    in-flight messages, not every message of the queue."""
    backend, queue, received = _lane_with_delayed_and_received(delayed=200, visible=3)
    passes = []

    class Counted(list):
        def __iter__(self):
            passes.append(len(self))
            return super().__iter__()

    queue._messages = Counted(queue._messages)
    backend.change_message_visibility_batch("lane", [
        {"Id": str(i), "ReceiptHandle": m.receipt_handle, "VisibilityTimeout": 60} for i, m in enumerate(received)])
    assert passes == []  # moto: a pass over the 203 messages per entry
    success, errors = backend.delete_message_batch("lane", [
        {"Id": str(i), "ReceiptHandle": m.receipt_handle} for i, m in enumerate(received)])
    assert errors == [] and len(success) == 3
    assert passes == [203]  # the one pass that leaves the deleted messages out
    assert len(queue._messages) == 200 and not queue.pending_messages


def test_a_request_without_a_handle_answers_as_moto_does():
    """Every message once had None as its handle (before its first receive): moto deletes every
    message for a delete without one, and changes the queue's first message for a visibility
    change without one; a handle that is not a string is looked for as moto does."""
    moto_speedups.speed_up_moto()
    backend = SQSBackend("us-east-1", "123456789012")
    backend.create_queue("lane")
    for i in range(4):
        backend.send_message("lane", f"m{i}")
    queue = backend.get_queue("lane")
    received = backend.receive_message("lane", 2, 0, 30)
    first = queue._messages[0]
    backend.change_message_visibility("lane", received[0].receipt_handle, 0)
    backend.change_message_visibility("lane", None, 120)
    in_flight = {m.body for m in queue.pending_messages}
    assert not first.visible and first.body == received[0].body and received[1].body in in_flight
    success, errors = backend.delete_message_batch("lane", [{"Id": "a", "ReceiptHandle": None}])
    assert success == ["a"] and errors == [] and queue._messages == []


def test_sessions_share_one_loader_and_clients_resolve_the_same_endpoints():
    import boto3
    from botocore import endpoint_provider
    from botocore.loaders import Loader

    moto_speedups.share_botocore_loader()
    first, second = boto3.session.Session(), boto3.session.Session()
    loader = first._session.get_component("data_loader")
    assert isinstance(loader, Loader) and loader is second._session.get_component("data_loader")
    for service in ("dynamodb", "sqs", "sts"):
        for region in ("us-east-1", "eu-west-1"):
            shared = first.client(service, region_name=region)
            again = second.client(service, region_name=region)
            assert shared.meta.endpoint_url == again.meta.endpoint_url == f"https://{service}.{region}.amazonaws.com"
    # The rule set of one service's data is built once and answers as one built anew.
    data = loader.load_service_model("dynamodb", "endpoint-rule-set-1")
    partitions = loader.load_data("partitions")
    kept = endpoint_provider.EndpointProvider(data, partitions)
    assert endpoint_provider.EndpointProvider(data, partitions).ruleset is kept.ruleset
    fresh = endpoint_provider.RuleSet(**data, partitions=partitions)
    params = {"Region": "ap-southeast-2", "UseFIPS": True, "UseDualStack": False}
    assert kept.resolve_endpoint(**params).url == fresh.evaluate(dict(params)).url \
        == "https://dynamodb-fips.ap-southeast-2.amazonaws.com"
