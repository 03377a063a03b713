"""The local runtime's narrow fixes to the emulator answer exactly as the code they replace."""
import moto.backends
from moto.sqs.models import Message, SQSBackend

from jobsched.local import emulator


def test_the_module_list_is_the_directory_listing_once():
    listed = list(moto.backends.list_of_moto_modules())
    emulator.speed_up_moto()
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
    emulator.speed_up_moto()
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

    emulator.speed_up_moto()
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

    emulator.speed_up_moto()
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

    emulator.speed_up_moto()
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
