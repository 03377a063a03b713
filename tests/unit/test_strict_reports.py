"""The strict layer's items reports (local/strict_aws/reports.py): against the emulator's server, the
items a DynamoDB call's bill needs come back in the call's own answer, read under the same hold of
the emulator's lock, and the layer bills and refuses exactly as it does when it reads them itself."""
import boto3
import pytest
from botocore.exceptions import ClientError

from jobsched.local import strict_aws
from jobsched.local.emulator import SerializedServer
from jobsched.local.strict_aws import MAX_ITEM_BYTES, StrictAws, item_size

TABLE = "reports"


def key(sk: str) -> dict:
    return {"pk": {"S": "p"}, "sk": {"S": sk}}


def item(sk: str, filler: int = 0, **extra) -> dict:
    return {**key(sk), "body": {"S": "x" * filler}, **extra}


def workload(client) -> None:
    """A call of each kind the layer bills from items it did not send."""
    client.put_item(TableName=TABLE, Item=item("a", 5 * 1024))
    client.put_item(TableName=TABLE, Item=item("a", 100))  # billed on the larger item before it
    client.update_item(TableName=TABLE, Key=key("a"), UpdateExpression="SET body = :b",
                       ExpressionAttributeValues={":b": {"S": "y" * 9000}})  # billed on the item after
    with pytest.raises(ClientError):
        client.put_item(TableName=TABLE, Item=item("a"), ConditionExpression="attribute_not_exists(pk)")
    client.get_item(TableName=TABLE, Key=key("a"), ProjectionExpression="pk", ConsistentRead=True)
    client.batch_write_item(RequestItems={TABLE: [{"PutRequest": {"Item": item(f"b{i}", 3000)}} for i in range(3)]
                            + [{"DeleteRequest": {"Key": key("a")}}]})
    client.batch_get_item(RequestItems={TABLE: {"Keys": [key("b0"), key("b1"), key("none")],
                                                "ProjectionExpression": "sk"}})
    client.transact_write_items(TransactItems=[
        {"Put": {"TableName": TABLE, "Item": item("t", 2000)}},
        {"Update": {"TableName": TABLE, "Key": key("b0"), "UpdateExpression": "SET body = :b",
                    "ExpressionAttributeValues": {":b": {"S": "z" * 7000}}}},
        {"ConditionCheck": {"TableName": TABLE, "Key": key("b1"), "ConditionExpression": "attribute_exists(pk)"}},
        {"Delete": {"TableName": TABLE, "Key": key("b2")}},
    ])
    client.transact_get_items(TransactItems=[{"Get": {"TableName": TABLE, "Key": key("b0")}}])
    client.delete_item(TableName=TABLE, Key=key("t"))


def table_client(server):
    """A client of the emulator's server, and the test's table (key: pk, sk) in it."""
    client = boto3.session.Session().client("dynamodb", endpoint_url=server.url, region_name="us-east-1")
    client.create_table(TableName=TABLE, BillingMode="PAY_PER_REQUEST",
                        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                              {"AttributeName": "sk", "AttributeType": "S"}],
                        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                   {"AttributeName": "sk", "KeyType": "RANGE"}])
    return client


@pytest.fixture
def server(monkeypatch):
    served = SerializedServer().start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", served.url)  # the layer's own requests (an update undone)
    try:
        yield served
    finally:
        served.stop()
        strict_aws.activate(None)


def billed(server, reports: bool) -> tuple[dict, object]:
    client = table_client(server)
    layer = StrictAws.billing_only({TABLE: ("pk", "sk")}, now_ms=lambda: 0,
                                   peek=lambda table, k: strict_aws._peek_moto(table, k)[1])
    if reports:
        layer.use_reports()

        def no_read(table, k):
            raise AssertionError(f"the layer read {table} {k} itself")
        layer._peek = no_read
    strict_aws.activate(layer)
    try:
        workload(client)
    finally:
        strict_aws.activate(None)
    client.delete_table(TableName=TABLE)
    use = layer.ledger.partitions[f"{TABLE}[p]"]
    return {"write": use.write_units, "read": use.read_units}, layer


def test_reports_bill_as_the_layers_own_reads_do_without_a_read(server):
    by_reads, _ = billed(server, reports=False)
    by_reports, _ = billed(server, reports=True)
    assert by_reports == by_reads
    assert by_reads["write"] > 0 and by_reads["read"] > 0


def test_an_update_past_400_kb_is_undone_and_refused_from_its_report(server):
    client = table_client(server)
    layer = StrictAws.billing_only({TABLE: ("pk", "sk")}, now_ms=lambda: 0,
                                   peek=lambda table, k: strict_aws._peek_moto(table, k)[1])
    layer.use_reports()
    strict_aws.activate(layer)
    try:
        full = item("big", 0)
        client.put_item(TableName=TABLE, Item=item("big", MAX_ITEM_BYTES - item_size(full)))
        with pytest.raises(ClientError) as refused:
            client.update_item(TableName=TABLE, Key=key("big"), UpdateExpression="SET more = :m",
                               ExpressionAttributeValues={":m": {"S": "y" * 2048}})
        assert refused.value.response["Error"]["Code"] == "ValidationException"
    finally:
        strict_aws.activate(None)
    stored = client.get_item(TableName=TABLE, Key=key("big"))["Item"]
    assert "more" not in stored and item_size(stored) == MAX_ITEM_BYTES


def test_an_answer_with_a_report_is_still_the_answer_botocore_checks(server):
    """The report is a field of the answer's JSON, and its CRC is redone: botocore, which checks
    DynamoDB's CRC32 header, reads the answer unchanged."""
    client = table_client(server)
    layer = StrictAws.billing_only({TABLE: ("pk", "sk")}, now_ms=lambda: 0)
    layer.use_reports()
    strict_aws.activate(layer)
    try:
        client.put_item(TableName=TABLE, Item=item("a", 10))
        answer = client.update_item(TableName=TABLE, Key=key("a"), UpdateExpression="SET n = :n",
                                    ExpressionAttributeValues={":n": {"N": "1"}}, ReturnValues="ALL_NEW")
    finally:
        strict_aws.activate(None)
    assert answer["Attributes"] == {**item("a", 10), "n": {"N": "1"}}
    assert strict_aws.REPORT_FIELD not in answer


def binary_table(client, name: str = "binary") -> None:
    client.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "B"}],
                        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])


def test_binary_keys_and_values_are_reported_and_billed_as_when_read(server):
    """A binary key value travels base64 in the request's JSON, moto keeps bytes: the emulator reads
    the item by the stored key; a binary value goes back base64 (an answer that could not be
    written would have been a 500 after the write was applied, and botocore would repeat it)."""
    client = boto3.session.Session().client("dynamodb", endpoint_url=server.url, region_name="us-east-1")
    binary_table(client)
    billed = {}
    for reports in (False, True):
        layer = StrictAws.billing_only({"binary": ("pk",)}, now_ms=lambda: 0,
                                       peek=lambda table, k: strict_aws._peek_moto(table, k)[1])
        if reports:
            layer.use_reports()
        strict_aws.activate(layer)
        try:
            key = {"pk": {"B": b"\x00\x01" + bytes([reports])}}
            client.put_item(TableName="binary", Item={**key, "body": {"B": b"x" * 9000}, "m": {"M": {"b": {"B": b"\xff"}}},
                                                      "n": {"N": "0"}})
            client.update_item(TableName="binary", Key=key, UpdateExpression="REMOVE body ADD n :one",
                               ExpressionAttributeValues={":one": {"N": "1"}})
        finally:
            strict_aws.activate(None)
        stored = client.get_item(TableName="binary", Key=key)["Item"]
        assert stored["n"] == {"N": "1"}  # the update applied once
        billed[reports] = layer.ledger.partitions
    assert sum(u.write_units for u in billed[True].values()) == sum(u.write_units for u in billed[False].values())


def test_a_key_without_its_sort_key_is_refused_as_dynamodb_refuses_it(server):
    client = table_client(server)
    layer = StrictAws.billing_only({TABLE: ("pk", "sk")}, now_ms=lambda: 0)
    layer.use_reports()
    strict_aws.activate(layer)
    try:
        with pytest.raises(ClientError) as refused:
            client.put_item(TableName=TABLE, Item={"pk": {"S": "p"}})
    finally:
        strict_aws.activate(None)
    assert refused.value.response["Error"]["Code"] == "ValidationException"
