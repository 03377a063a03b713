"""Build the events that AWS would hand each function: API Gateway proxy requests, SQS
batches. The handlers receive exactly what they get in the cloud."""
from __future__ import annotations

import base64
import hashlib
import json
import threading
import uuid
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

from botocore.exceptions import ClientError

from jobsched.local.strict_aws import acting_as

REGION = "us-east-1"
ACCOUNT = "123456789012"
STAGE = "live"


@dataclass
class LambdaContext:
    function_name: str
    memory_limit_in_mb: int = 512
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = ""
    log_stream_name: str = "local"

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


class Function:
    """One deployed function: invocations run one at a time, as in a Lambda container."""

    def __init__(self, name: str, handler: Callable) -> None:
        self.name = name
        self._handler = handler
        self._lock = threading.Lock()

    def invoke(self, event: Any) -> Any:
        # The strict layer checks the calls made inside against this function's role.
        with self._lock, acting_as(self.name):
            return self._handler(event, LambdaContext(function_name=f"jobsched-{self.name}"))


def api_type(template: dict) -> str:
    """"http" when the template serves the API through API Gateway's HTTP API (the default), "rest"
    for the REST API (`-c api=rest`)."""
    types = {r.get("Type") for r in template.get("Resources", {}).values()}
    return "rest" if "AWS::ApiGateway::RestApi" in types else "http"


def api_gateway_event(method: str, raw_path: str, headers: dict[str, str], body: str | bytes | None,
                      source_ip: str = "127.0.0.1", api: str = "http") -> dict:
    """The proxy event (payload format 1.0) of the deployment's API type: `api` "http" (the
    default: the HTTP API's $default route and stage, header names in lower case, `resource` the
    route key, no stage in the path: AWS's "Create AWS Lambda proxy integrations for HTTP APIs") or
    "rest" (the REST API's {proxy+} resource on its stage). `body` as bytes: text when it is UTF-8,
    else base64 with isBase64Encoded, as API Gateway hands over a body it cannot pass as text (the
    function answers 400 for it, never U+FFFD)."""
    encoded = False
    if isinstance(body, bytes):
        try:
            body = body.decode("utf-8")
        except UnicodeDecodeError:
            body, encoded = base64.b64encode(body).decode("ascii"), True
    parts = urlsplit(raw_path)
    query = parse_qs(parts.query, keep_blank_values=True)
    http = api == "http"
    if http:
        headers = {k.lower(): v for k, v in headers.items()}
    event = {
        "resource": "$default" if http else "/{proxy+}",
        "path": parts.path,
        "httpMethod": method.upper(),
        "headers": dict(headers),
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": {k: v[-1] for k, v in query.items()} or None,
        "multiValueQueryStringParameters": query or None,
        "pathParameters": None if http else {"proxy": parts.path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "resourcePath": "$default" if http else "/{proxy+}",
            "httpMethod": method.upper(),
            "path": parts.path if http else f"/{STAGE}{parts.path}",
            "stage": "$default" if http else STAGE,
            "requestId": str(uuid.uuid4()),
            "accountId": ACCOUNT,
            "identity": {"sourceIp": source_ip},
        },
        "body": body,
        "isBase64Encoded": encoded,
    }
    if http:
        event["version"] = "1.0"
        event["requestContext"].update(resourceId="$default", protocol="HTTP/1.1", apiId="local",
                                       domainName="local.execute-api.us-east-1.amazonaws.com")
    return event


def sqs_event(messages: list[dict], queue_arn: str) -> dict:
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": m.get("MessageAttributes", {}),
                "md5OfBody": m.get("MD5OfBody") or hashlib.md5(m["Body"].encode()).hexdigest(),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": REGION,
            }
            for m in messages
        ]
    }


class LanePoller:
    """What Lambda's SQS event source mapping does: receive a batch, invoke the worker, delete
    what succeeded, leave the reported failures to reappear after their visibility timeout.
    Short polls only: a long poll would hold the emulator's lock."""

    def __init__(self, sqs, queue_urls: list[str], worker: Function, batch_size: int = 10) -> None:
        self._sqs = sqs
        self._urls = queue_urls
        self._worker = worker
        self._batch = batch_size
        self._arns = {url: f"arn:aws:sqs:{REGION}:{ACCOUNT}:{url.rsplit('/', 1)[-1]}" for url in queue_urls}
        self.over_limit = 0  # receives refused for the in-flight limit (strict_aws)

    def poll_once(self, url: str) -> int:
        """One receive and one invocation; returns the number of messages handed to the worker."""
        messages = self.receive(url)
        if messages:
            self.handle(url, messages)
        return len(messages)

    def receive(self, url: str) -> list[dict]:
        with acting_as(self._worker.name):  # the event source mapping polls with the function's role
            try:
                answer = self._sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=self._batch, WaitTimeSeconds=0,
                                                   AttributeNames=["All"])
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") != "OverLimit":
                    raise
                # The queue's in-flight messages are at SQS's limit: Lambda's long polls get nothing
                # (no error), so the lane stalls until some are deleted or visible again.
                self.over_limit += 1
                return []
        return answer.get("Messages", [])

    def handle(self, url: str, messages: list[dict], worker: Function | None = None) -> None:
        """Invoke a worker (this poller's, or another container of the same function) with the
        batch; delete what succeeded."""
        try:
            result = (worker or self._worker).invoke(sqs_event(messages, self._arns[url])) or {}
            failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
        except Exception:  # noqa: BLE001 - an invocation error fails the whole batch, as in AWS
            failed = {m["MessageId"] for m in messages}
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            with acting_as(self._worker.name):
                self._delete(url, done)

    def _delete(self, url: str, done: list[dict]) -> None:
        if done:
            self._sqs.delete_message_batch(
                QueueUrl=url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)],
            )

    def drain(self, max_rounds: int = 1000) -> int:
        """Deliver every visible message (tests); returns how many were handed over."""
        total = 0
        for _ in range(max_rounds):
            handed = sum(self.poll_once(url) for url in self._urls)
            total += handed
            if not handed:
                return total
        return total


class LoopbackHTTPServer(ThreadingHTTPServer):
    """A thread per request, and a listen backlog for bursts: the standard library's default of 5
    resets connections when the workers call a local target with dozens of calls due in the same
    second (measured: 15 of 80 concurrent calls reset)."""
    request_queue_size = 128
    daemon_threads = True


def http_response(result: dict) -> tuple[int, dict[str, str], bytes]:
    headers = dict(result.get("headers") or {})
    for name, values in (result.get("multiValueHeaders") or {}).items():
        headers[name] = ", ".join(values)
    body = result.get("body") or ""
    return int(result["statusCode"]), headers, body.encode() if isinstance(body, str) else body


def json_or_text(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")
