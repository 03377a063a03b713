"""The emulator answers only the stack's signed requests (local/emulator_auth.py): the access key
id alone is not enough, the signature must be the one its secret gives the request as received,
credentials its STS handed out need their session token, and a signature ages out as in AWS."""
import time

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from jobsched.local.emulator import SerializedServer
from jobsched.local.emulator_auth import MAX_SKEW_SECONDS, StackCredentials, check

CONFIG = Config(retries={"mode": "standard", "max_attempts": 1})
KEYS = StackCredentials("AKIAJSTESTTESTTEST01", "the-stacks-own-secret")


@pytest.fixture(scope="module")
def server():
    served = SerializedServer(credentials=KEYS).start()  # start() resets moto
    yield served
    served.stop()


def client(server, service, key=KEYS.access_key_id, secret=KEYS.secret_access_key, token=None):
    return boto3.session.Session(aws_access_key_id=key, aws_secret_access_key=secret, aws_session_token=token,
                                 region_name="us-east-1").client(service, endpoint_url=server.url, config=CONFIG)


def refused(call) -> tuple[int, str]:
    with pytest.raises(ClientError) as error:
        call()
    return error.value.response["ResponseMetadata"]["HTTPStatusCode"], error.value.response["Error"]["Code"]


def test_the_stacks_key_id_with_another_secret_is_refused(server):
    assert "TableNames" in client(server, "dynamodb").list_tables()
    assert refused(client(server, "dynamodb", secret="guessed").list_tables) == (403, "InvalidSignatureException")
    assert refused(client(server, "sts", secret="guessed").get_caller_identity) == (403, "SignatureDoesNotMatch")
    assert refused(client(server, "s3", secret="guessed").list_buckets) == (403, "SignatureDoesNotMatch")


def test_a_request_changed_after_its_signature_is_refused(server):
    dynamodb = client(server, "dynamodb")

    def tamper(request, **_):
        request.body = request.body.replace(b'"Limit": 1', b'"Limit": 9')

    dynamodb.meta.events.register("before-send.dynamodb.ListTables", tamper)
    assert refused(lambda: dynamodb.list_tables(Limit=1)) == (403, "InvalidSignatureException")


def test_credentials_of_the_emulators_sts_need_their_session_token(server):
    role = client(server, "sts").assume_role(RoleArn="arn:aws:iam::123456789012:role/targets",
                                             RoleSessionName="tenant-a")["Credentials"]
    own = client(server, "sqs", role["AccessKeyId"], role["SecretAccessKey"], role["SessionToken"])
    assert "ResponseMetadata" in own.list_queues()
    other = client(server, "sqs", role["AccessKeyId"], role["SecretAccessKey"], "another-token")
    assert refused(other.list_queues) == (403, "UnrecognizedClientException")


def test_a_signature_older_than_fifteen_minutes_is_refused():
    captured = {}
    dynamodb = boto3.session.Session(aws_access_key_id=KEYS.access_key_id, aws_secret_access_key=KEYS.secret_access_key,
                                     region_name="us-east-1").client("dynamodb", endpoint_url="http://127.0.0.1:9")

    def capture(request, **_):
        captured["request"] = request
        raise RuntimeError("captured")

    dynamodb.meta.events.register("before-send.dynamodb.ListTables", capture)
    with pytest.raises(RuntimeError):
        dynamodb.list_tables()
    request = captured["request"]
    environ = {"REQUEST_METHOD": "POST", "RAW_URI": "/", "PATH_INFO": "/", "HTTP_HOST": "127.0.0.1:9"}
    for name, value in request.headers.items():
        value = value.decode() if isinstance(value, bytes) else value
        key = name.upper().replace("-", "_")
        environ[key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else "HTTP_" + key] = value
    assert check(environ, request.body, KEYS) is None
    later = check(environ, request.body, KEYS, now=time.time() + MAX_SKEW_SECONDS + 60)
    assert later is not None and later.status == 403 and b"InvalidSignatureException" in later.body
