"""The emulator's server (local/emulator.py): connections kept open between requests, DynamoDB's
and SQS's requests answered without moto's Flask app exactly as through it, and a stop that ends
the connections still open."""
import json
import socket
import urllib.request

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from jobsched.local.emulator import MOTO_API_PREFIX, SerializedServer

CONFIG = Config(retries={"mode": "standard", "max_attempts": 1}, max_pool_connections=4)
# Fields that differ between any two runs (ids, handles, digests of them, times).
VOLATILE = {"ResponseMetadata", "MessageId", "ReceiptHandle", "MD5OfMessageBody", "MD5OfMessageAttributes",
            "SequenceNumber", "CreationDateTime", "TableArn", "TableId", "LatestStreamArn", "QueueUrl",
            "SentTimestamp", "ApproximateFirstReceiveTimestamp", "LastUpdateToPayPerRequestDateTime",
            "TableSizeBytes"}


@pytest.fixture
def fresh_moto():
    """Each server here starts from an empty emulator (moto's backends are process-wide)."""
    servers: list[SerializedServer] = []

    def start(**options) -> SerializedServer:
        server = SerializedServer(**options).start()  # start() resets moto
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def clients(server: SerializedServer):
    kwargs = {"endpoint_url": server.url, "region_name": "us-east-1", "config": CONFIG}
    return boto3.client("dynamodb", **kwargs), boto3.client("sqs", **kwargs)


def stable(value):
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def answer(call):
    try:
        return stable(call())
    except ClientError as exc:
        return {"error": exc.response["Error"]["Code"], "message": exc.response["Error"].get("Message"),
                "status": exc.response["ResponseMetadata"]["HTTPStatusCode"]}


def workload(server: SerializedServer) -> list:
    """A call of each kind the functions make, successes and refusals, every attribute type."""
    ddb, sqs = clients(server)
    key = {"pk": {"S": "p"}, "sk": {"S": "a"}}
    item = {**key, "n": {"N": "1"}, "b": {"B": b"\x00\xffbytes"}, "ss": {"SS": ["x", "y"]},
            "l": {"L": [{"S": "s"}, {"N": "2.5"}, {"NULL": True}, {"BOOL": False}]},
            "m": {"M": {"inner": {"BS": [b"1", b"2"]}}}}
    q = None
    calls = [
        lambda: ddb.create_table(TableName="t", BillingMode="PAY_PER_REQUEST",
                                 KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                            {"AttributeName": "sk", "KeyType": "RANGE"}],
                                 AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                       {"AttributeName": "sk", "AttributeType": "S"}]),
        lambda: ddb.put_item(TableName="t", Item=item, ReturnConsumedCapacity="TOTAL"),
        lambda: ddb.put_item(TableName="t", Item=item, ConditionExpression="attribute_not_exists(pk)",
                             ReturnValuesOnConditionCheckFailure="ALL_OLD"),
        lambda: ddb.get_item(TableName="t", Key=key, ConsistentRead=True),
        lambda: ddb.get_item(TableName="t", Key={"pk": {"S": "none"}, "sk": {"S": "a"}}),
        lambda: ddb.update_item(TableName="t", Key=key, UpdateExpression="ADD n :one SET l = list_append(l, :l)",
                                ExpressionAttributeValues={":one": {"N": "1"}, ":l": {"L": [{"S": "t"}]}},
                                ReturnValues="ALL_NEW"),
        lambda: ddb.update_item(TableName="t", Key=key, UpdateExpression="SET n = :n",
                                ConditionExpression="n = :zero",
                                ExpressionAttributeValues={":n": {"N": "9"}, ":zero": {"N": "0"}}),
        lambda: ddb.batch_write_item(RequestItems={"t": [{"PutRequest": {"Item": {"pk": {"S": "p"},
                                                                                  "sk": {"S": f"s{i}"}}}}
                                                         for i in range(3)]}),
        lambda: ddb.query(TableName="t", KeyConditionExpression="pk = :p AND begins_with(sk, :s)",
                          ExpressionAttributeValues={":p": {"S": "p"}, ":s": {"S": "s"}}, Limit=2),
        lambda: ddb.batch_get_item(RequestItems={"t": {"Keys": [key, {"pk": {"S": "p"}, "sk": {"S": "s1"}}]}}),
        lambda: ddb.transact_write_items(TransactItems=[
            {"ConditionCheck": {"TableName": "t", "Key": key, "ConditionExpression": "attribute_not_exists(pk)"}},
            {"Delete": {"TableName": "t", "Key": {"pk": {"S": "p"}, "sk": {"S": "s0"}}}}]),
        lambda: ddb.delete_item(TableName="t", Key=key, ReturnValues="ALL_OLD"),
        lambda: ddb.get_item(TableName="missing", Key=key),
    ]
    answers = [answer(call) for call in calls]
    q = sqs.create_queue(QueueName="q", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    answers += [
        answer(lambda: sqs.send_message_batch(QueueUrl=q, Entries=[
            {"Id": "a", "MessageBody": "one", "MessageAttributes": {"k": {"DataType": "String", "StringValue": "v"}}},
            {"Id": "b", "MessageBody": "two", "DelaySeconds": 0}])),
        answer(lambda: sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10, MessageAttributeNames=["All"],
                                           AttributeNames=["ApproximateReceiveCount"])),
        answer(lambda: sqs.get_queue_attributes(QueueUrl=q, AttributeNames=["ApproximateNumberOfMessagesNotVisible"])),
        answer(lambda: sqs.delete_message(QueueUrl=q, ReceiptHandle="not-a-handle")),
        answer(lambda: sqs.send_message(QueueUrl=q + "-missing", MessageBody="x")),
    ]
    return answers


def test_dynamodb_and_sqs_answer_the_same_without_flask_as_through_it(fresh_moto, monkeypatch):
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    through_app = []
    original = DomainDispatcherApplication.__call__
    monkeypatch.setattr(DomainDispatcherApplication, "__call__",
                        lambda self, environ, start: through_app.append(1) or original(self, environ, start))
    server = fresh_moto(direct=True)
    through_app.clear()
    direct = workload(server)
    assert not through_app  # none of them went through moto's Flask app
    server = fresh_moto(direct=False)
    through_app.clear()
    through_flask = workload(server)
    assert len(through_app) == len(through_flask) + 1  # every one did (and the queue's creation)
    assert direct == through_flask
    # The workload is what it claims: answers, refusals and a missing table among them.
    errors = [a["error"] for a in direct if isinstance(a, dict) and "error" in a]
    assert "ConditionalCheckFailedException" in errors and "TransactionCanceledException" in errors
    assert "ResourceNotFoundException" in errors


def test_a_client_keeps_its_connection_between_requests(fresh_moto):
    server = fresh_moto()
    ddb, _ = clients(server)
    ddb.create_table(TableName="k", BillingMode="PAY_PER_REQUEST",
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])
    opened = server.connections_opened
    for i in range(40):
        ddb.put_item(TableName="k", Item={"pk": {"S": str(i)}})
        ddb.get_item(TableName="k", Key={"pk": {"S": str(i)}})
    assert server.connections_opened - opened <= 1  # 80 requests, one connection (werkzeug's: 80)


def test_control_and_other_services_still_pass_through_moto_s_app(fresh_moto):
    server = fresh_moto(control_secret="s3cret", control=lambda method, path, body: (200, {"path": path}))
    request = urllib.request.Request(f"{server.url}/_jobsched/stats", headers={"X-Jobsched-Control": "s3cret"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert json.loads(response.read()) == {"path": "stats"}
    refused = urllib.request.Request(f"{server.url}{MOTO_API_PREFIX}reset", method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(refused, timeout=10)
    assert err.value.code == 403
    sts = boto3.client("sts", endpoint_url=server.url, region_name="us-east-1", config=CONFIG)
    assert sts.get_caller_identity()["Account"]


def read_answer(sock) -> tuple[bytes, bytes]:
    """One HTTP answer off a kept connection: its head, then exactly its Content-Length of body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed after {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        body += sock.recv(65536)
    return head, body


def test_bodies_are_framed_on_a_kept_connection_head_and_bad_lengths_included(fresh_moto):
    server = fresh_moto(control=lambda method, path, body: (200, {"got": body.decode()}), control_secret="k")
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    try:
        # chunked, then sized, then HEAD, on one connection: each answer read whole and in order
        sock.sendall(b"POST /_jobsched/x HTTP/1.1\r\nHost: x\r\nX-Jobsched-Control: k\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
        head, body = read_answer(sock)
        assert head.startswith(b"HTTP/1.1 200") and json.loads(body) == {"got": "abcde"}
        sock.sendall(b"POST /_jobsched/y HTTP/1.1\r\nHost: x\r\nX-Jobsched-Control: k\r\nContent-Length: 2\r\n\r\nhi")
        head, body = read_answer(sock)
        assert json.loads(body) == {"got": "hi"}
        sock.sendall(b"HEAD /moto-api/ HTTP/1.1\r\nHost: x\r\nX-Jobsched-Control: k\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, _, rest = data.partition(b"\r\n\r\n")
        length = [line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
        assert rest == b"" and length and int(length[0].split(b":")[1]) > 0  # GET's length, no body
        sock.sendall(b"POST /_jobsched/z HTTP/1.1\r\nHost: x\r\nContent-Length: many\r\n\r\n")
        head, _ = read_answer(sock)
        assert head.startswith(b"HTTP/1.1 400") and b"connection: close" in head.lower()
    finally:
        sock.close()


def test_stop_ends_the_connections_left_open(fresh_moto):
    server = fresh_moto()
    ddb, _ = clients(server)
    ddb.list_tables()  # a pooled connection stays open
    held = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    held.sendall(b"GET /moto-api/ HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    read_answer(held)
    server.stop()
    held.settimeout(5)
    assert held.recv(1) == b""  # closed by the server, not left waiting
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=2)
