"""The local stack's emulator answers only the stack itself: every AWS request must be signed
(Signature Version 4) with the credentials the stack made at its start, or with credentials the
emulator's STS handed out (AssumeRole, which itself needs the stack's). Anything else on the
machine that reaches loopback (a container job's process, another stack, another user) gets the
403 AWS answers an unknown key or a wrong signature with, in the shape of the service called.

The expected signature is computed by botocore's own signer (botocore.auth.SigV4Auth; S3's
variant for S3) from the request as it arrived: its method, raw path and query, the headers it
says it signed, its body and its X-Amz-Date, with the secret of the access key id it names."""
from __future__ import annotations

import calendar
import functools
import hashlib
import hmac
import json
import os
import secrets
import string
import time
from dataclasses import dataclass, field
from pathlib import Path

from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.credentials import Credentials

# Where the stack writes its credentials (beside emulator.url), readable by its user only, for
# `jobsched keys --local` and the stack's own tools.
CREDENTIALS_FILE = "emulator.credentials"
# AWS refuses a signature more than 15 minutes from its own clock.
MAX_SKEW_SECONDS = 15 * 60
ALGORITHM = "AWS4-HMAC-SHA256"
_KEY_ALPHABET = string.ascii_uppercase + string.digits


@dataclass(frozen=True)
class StackCredentials:
    access_key_id: str
    secret_access_key: str

    @classmethod
    def new(cls) -> "StackCredentials":
        """Random, per start. An access key id of 12 digits would be read by moto as an account:
        this one starts with letters, as AWS's do."""
        return cls("AKIAJS" + "".join(secrets.choice(_KEY_ALPHABET) for _ in range(14)),
                   secrets.token_urlsafe(30))

    def text(self) -> str:
        return json.dumps({"accessKeyId": self.access_key_id, "secretAccessKey": self.secret_access_key})

    @classmethod
    def parse(cls, text: str) -> "StackCredentials":
        given = json.loads(text)
        return cls(given["accessKeyId"], given["secretAccessKey"])

    def write(self, workdir: Path) -> Path:
        """Into the work directory, mode 0600 (created so: never readable by others, even briefly)."""
        path = Path(workdir) / CREDENTIALS_FILE
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:
            handle.write(self.text() + "\n")
        os.replace(temporary, path)
        return path

    @classmethod
    def read(cls, workdir: Path) -> "StackCredentials":
        return cls.parse((Path(workdir) / CREDENTIALS_FILE).read_text())

    def session(self, region: str = "us-east-1"):
        import boto3

        return boto3.session.Session(aws_access_key_id=self.access_key_id,
                                     aws_secret_access_key=self.secret_access_key, region_name=region)


# --- the emulator's check ------------------------------------------------------------------------
@dataclass(frozen=True)
class Refusal:
    status: int
    headers: list
    body: bytes


def _role_secret(access_key_id: str, token: str) -> str | None:
    """The secret of credentials the emulator's STS handed out (AssumeRole), when the session token
    sent is theirs; None otherwise."""
    from moto.sts.models import sts_backends

    for account in list(sts_backends.keys()):
        for backend in list(sts_backends[account].values()):
            for role in list(backend.assumed_roles):
                if role.access_key_id == access_key_id:
                    return role.secret_access_key if hmac.compare_digest(role.session_token, token) else None
    return None


def _header(environ: dict, name: str) -> str | None:
    key = name.upper().replace("-", "_")
    if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        return environ.get(key)
    return environ.get("HTTP_" + key)


class _Headers(dict):
    """The signed headers by lower-case name, looked up in any case (as botocore's own are)."""

    def __contains__(self, name) -> bool:
        return super().__contains__(name.lower())

    def __getitem__(self, name):
        return super().__getitem__(name.lower())


@dataclass
class _Received:
    """The request as botocore's signer reads one (AWSRequest's attributes), without its cost."""
    method: str
    url: str
    headers: _Headers
    body: bytes
    params: dict = field(default_factory=dict)
    context: dict = field(default_factory=dict)


@functools.lru_cache(maxsize=64)
def _signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    """SigV4's key derivation (SigV4Auth.signature's first four HMACs), made once a day per key."""
    key = f"AWS4{secret}".encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def expected_signature(environ: dict, body: bytes, access_key_id: str, secret: str, scope: list[str],
                       signed_headers: list[str], amz_date: str) -> str:
    """What botocore's signer gives the request as received, signed with `secret`: its canonical
    request and string to sign (SigV4Auth, or S3SigV4Auth for S3), then the HMAC with the key."""
    date, region, service, _ = scope
    headers = _Headers()
    for name in signed_headers:
        value = _header(environ, name)
        if value is None:
            raise ValueError(f"the signed header {name} is missing")
        headers[name.lower()] = value
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI") or (
        environ.get("PATH_INFO", "/") + ("?" + environ["QUERY_STRING"] if environ.get("QUERY_STRING") else ""))
    request = _Received(environ.get("REQUEST_METHOD", "GET"), f"http://{headers.get('host', 'h')}{raw}", headers, body,
                        context={"timestamp": amz_date})
    signer = (S3SigV4Auth if service == "s3" else SigV4Auth)(Credentials(access_key_id, secret), service, region)
    string_to_sign = signer.string_to_sign(request, signer.canonical_request(request))
    return hmac.new(_signing_key(secret, date, region, service), string_to_sign.encode(), hashlib.sha256).hexdigest()


def _epoch(amz_date: str) -> float:
    """X-Amz-Date (20261128T043753Z) in seconds; ValueError when it is not one."""
    digits = amz_date[:8] + amz_date[9:15]
    if len(amz_date) != 16 or amz_date[8] != "T" or amz_date[15] != "Z" or not digits.isdigit():
        raise ValueError(amz_date)
    return calendar.timegm((int(amz_date[0:4]), int(amz_date[4:6]), int(amz_date[6:8]), int(amz_date[9:11]),
                            int(amz_date[11:13]), int(amz_date[13:15]), 0, 0, 0))


def check(environ: dict, body: bytes, credentials: StackCredentials, now: float | None = None) -> Refusal | None:
    """None when the request is signed with the stack's credentials (or the emulator's STS's);
    else the 403 to answer."""
    authorization = environ.get("HTTP_AUTHORIZATION", "")
    if not authorization:
        return refusal(environ, None, "missing")
    try:
        algorithm, _, fields = authorization.partition(" ")
        parts = dict(part.strip().split("=", 1) for part in fields.split(","))
        access_key_id, *scope = parts["Credential"].split("/")
        signed_headers = parts["SignedHeaders"].split(";")
        given = parts["Signature"]
        if algorithm != ALGORITHM or len(scope) != 4 or scope[3] != "aws4_request":
            raise ValueError(authorization)
    except (ValueError, KeyError):
        return refusal(environ, None, "malformed")
    service = scope[2]
    if hmac.compare_digest(access_key_id.encode(), credentials.access_key_id.encode()):
        secret = credentials.secret_access_key
    else:
        secret = _role_secret(access_key_id, environ.get("HTTP_X_AMZ_SECURITY_TOKEN", ""))
        if secret is None:
            return refusal(environ, service, "unknown")
    amz_date = environ.get("HTTP_X_AMZ_DATE", "")
    try:
        signed_at = _epoch(amz_date)
        expected = expected_signature(environ, body, access_key_id, secret, scope, signed_headers, amz_date)
    except ValueError:
        return refusal(environ, service, "mismatch")
    if not hmac.compare_digest(expected.encode(), given.encode()):
        return refusal(environ, service, "mismatch")
    if abs((time.time() if now is None else now) - signed_at) > MAX_SKEW_SECONDS or amz_date[:8] != scope[0]:
        return refusal(environ, service, "expired")
    return None


# The codes AWS answers, by the protocol of the service called: (unknown key, wrong signature,
# no signature at all).
_JSON_CODES = ("UnrecognizedClientException", "InvalidSignatureException", "MissingAuthenticationTokenException")
_QUERY_CODES = ("InvalidClientTokenId", "SignatureDoesNotMatch", "MissingAuthenticationToken")
_S3_CODES = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied")
_MESSAGES = {
    "unknown": "The security token included in the request is invalid.",
    "mismatch": "The request signature we calculated does not match the signature you provided.",
    "expired": "Signature expired: the request's X-Amz-Date is more than 15 minutes from the server's time.",
    "missing": "Missing Authentication Token",
    "malformed": "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters.",
}


def refusal(environ: dict, service: str | None, why: str) -> Refusal:
    which = {"unknown": 0, "mismatch": 1, "expired": 1, "missing": 2, "malformed": 1}[why]
    message = _MESSAGES[why]
    request_id = secrets.token_hex(16)
    body_is_form = "x-www-form-urlencoded" in (environ.get("CONTENT_TYPE") or "")
    if environ.get("HTTP_X_AMZ_TARGET"):  # the JSON protocols (DynamoDB, SQS, KMS, ECS, ...)
        code = _JSON_CODES[which]
        return Refusal(403, [("Content-Type", "application/x-amz-json-1.0"), ("x-amzn-RequestId", request_id)],
                       json.dumps({"__type": code, "message": message}).encode())
    rest_json = service is None and (environ.get("PATH_INFO") or "").startswith("/20")  # /2015-03-31/functions...
    if not rest_json and (service == "s3" or (service is None and not body_is_form)):
        code = _S3_CODES[which]
        return Refusal(403, [("Content-Type", "application/xml")], (
            f"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message>"
            f"<RequestId>{request_id}</RequestId></Error>").encode())
    if service == "ec2":
        return Refusal(403, [("Content-Type", "text/xml")], (
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>AuthFailure</Code>"
            f"<Message>AWS was not able to validate the provided access credentials</Message></Error></Errors>"
            f"<RequestID>{request_id}</RequestID></Response>").encode())
    if body_is_form or "Action=" in environ.get("QUERY_STRING", ""):  # the query protocol (STS, SNS, ...)
        code = _QUERY_CODES[which]
        return Refusal(403, [("Content-Type", "text/xml")], (
            f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>"
            f"<RequestId>{request_id}</RequestId></ErrorResponse>").encode())
    code = _JSON_CODES[which]  # REST JSON (Lambda, ...): the code in x-amzn-ErrorType
    return Refusal(403, [("Content-Type", "application/json"), ("x-amzn-ErrorType", f"{code}:"),
                         ("x-amzn-RequestId", request_id)], json.dumps({"Type": "User", "message": message}).encode())
