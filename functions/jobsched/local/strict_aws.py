"""The strict AWS layer: the emulator says no where AWS says no.

moto enforces no IAM, no item size, no per-partition throughput and no KMS quota. This layer
sits on every botocore client of the process (a hook on client creation registers two event
handlers on each client) and, while a layer is active:
- checks each call a function makes against the IAM policies the synthesized template gives that
  function's role (action, resource ARN, the condition operators the template uses; an explicit
  Deny wins) and answers AccessDenied;
- refuses what AWS refuses: DynamoDB items over 400 KB (sized as DynamoDB sizes them), key and
  expression sizes, batch and transaction limits, SQS, SNS and EventBridge messages over theirs;
- bills every DynamoDB read and write in capacity units per partition key (table and index),
  throttles a key past 1,000 WCU or 3,000 RCU within one second of the emulator's clock (no
  burst, no adaptive capacity), and counts KMS requests per second against a quota;
- reports the hottest partition keys and the KMS peak (`report()`).

Which function makes a call is a context variable set around each handler invocation
(`acting_as`, set by local/events.Function); calls made with none set (test setup, the stack
creating its resources) are not checked against IAM, but are sized and billed like any other.
Limits and billing rules: /work/shared/AWS-LIMITS.md, docs/architecture.md ("The strict AWS layer").
"""
from __future__ import annotations

import base64
import contextlib
import contextvars
import functools
import json
import logging
import math
import re
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from botocore.exceptions import ClientError

from jobsched.local import strict_ecs, strict_kms
from jobsched.local.emulator import REPORT_HEADER
from jobsched.local.stack import role_arn

logger = logging.getLogger(__name__)

REGION = "us-east-1"
ACCOUNT = "123456789012"  # the emulator's account (local/events.py uses the same)

KB = 1024
MAX_ITEM_BYTES = 400 * KB
MAX_PARTITION_KEY_BYTES = 2048
MAX_SORT_KEY_BYTES = 1024
MAX_EXPRESSION_BYTES = 4 * KB
MAX_PLACEHOLDER_BYTES = 255
MAX_SUBSTITUTION_BYTES = 2 * KB * KB
BATCH_GET_MAX_KEYS = 100
BATCH_WRITE_MAX_ITEMS = 25
TRANSACTION_MAX_ITEMS = 100
TRANSACTION_MAX_BYTES = 4 * KB * KB
SQS_MAX_MESSAGE_BYTES = 1024 * KB  # raised from 256 KiB in 2025 (AWS-LIMITS.md, SQS)
SQS_MAX_BATCH_ENTRIES = 10
# A queue attribute's value when the queue cannot be read (or does not say): SQS's defaults.
_QUEUE_FALLBACKS = {"VisibilityTimeout": 30, "MaximumMessageSize": SQS_MAX_MESSAGE_BYTES}
SQS_MAX_BATCH_BYTES = 1024 * KB
# A standard queue's in-flight messages (received, not deleted, not visible again): past about this
# many a short-polling ReceiveMessage is answered OverLimit, a long poll nothing (AWS-LIMITS.md, SQS).
SQS_IN_FLIGHT_PER_QUEUE = 120_000
SNS_MAX_MESSAGE_BYTES = 256 * KB  # a topic's default MaximumMessageSize
SNS_MAX_BATCH_ENTRIES = 10
SNS_MAX_BATCH_BYTES = 256 * KB
EVENTS_MAX_ENTRY_BYTES = 256 * KB  # AWS's PutEvents page; a 1 MiB figure is only third-party
EVENTS_MAX_ENTRIES = 10
PARTITION_WCU_PER_SECOND = 1000
PARTITION_RCU_PER_SECOND = 3000
KMS_REQUESTS_PER_SECOND = 100_000  # shared symmetric quota in us-east-1
# Fargate, per account and Region (ECS Developer Guide, "AWS Fargate throttling quotas"): RunTask
# calls at 20 a second, burst and sustained; tasks launched from a bucket of 100 refilled at 20 a
# second. Over either: ThrottlingException.
RUN_TASK_CALLS = (20, 20)  # (bucket, refill a second)
FARGATE_LAUNCHES = (100, 20)
KMS_CRYPTO_OPERATIONS = frozenset({"Decrypt", "Encrypt", "GenerateDataKey", "GenerateDataKeyWithoutPlaintext",
                                   "GenerateDataKeyPair", "GenerateDataKeyPairWithoutPlaintext", "GenerateMac",
                                   "GenerateRandom", "ReEncrypt", "VerifyMac"})
# Batch operations that IAM authorizes with the single action.
IAM_ACTION_OF = {
    ("sqs", "SendMessageBatch"): "sqs:SendMessage",
    ("sqs", "DeleteMessageBatch"): "sqs:DeleteMessage",
    ("sqs", "ChangeMessageVisibilityBatch"): "sqs:ChangeMessageVisibility",
    ("sns", "PublishBatch"): "sns:Publish",
    ("lambda", "Invoke"): "lambda:InvokeFunction",
}

# The action IAM checks for each item of a DynamoDB transaction.
TRANSACTION_ACTIONS = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
                       "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}

# How each service answers a call its caller's policies do not allow (code, HTTP status).
ACCESS_DENIED = {
    "dynamodb": ("AccessDeniedException", 400),
    "kms": ("AccessDeniedException", 400),
    "events": ("AccessDeniedException", 400),
    "lambda": ("AccessDeniedException", 403),
    "sqs": ("AccessDenied", 403),
    "sns": ("AuthorizationError", 403),
    "sts": ("AccessDenied", 403),
    "ecs": ("AccessDeniedException", 400),
}
# What STS takes as a session tag (AWS-LIMITS.md §8): key 1-128, value 0-256 characters of these.
_SESSION_TAG_KEY = re.compile(r"[\w .:/=+\-@]{1,128}")
_SESSION_TAG_VALUE = re.compile(r"[\w .:/=+\-@]{0,256}")

current_function: contextvars.ContextVar[str | None] = contextvars.ContextVar("strict_aws_function", default=None)
_internal: contextvars.ContextVar[bool] = contextvars.ContextVar("strict_aws_internal", default=False)


class StrictLayerError(RuntimeError):
    """The layer cannot decide (an unsupported policy construct): it fails loudly, never allows."""


@contextlib.contextmanager
def acting_as(function: str | None) -> Iterator[None]:
    """Calls made inside are made by `function` (its name: api, tick, worker)."""
    token = current_function.set(function)
    try:
        yield
    finally:
        current_function.reset(token)


# ---------------------------------------------------------------------------------------------
# DynamoDB sizes (AWS-LIMITS.md §1, "Size formula")

def number_size(text: str) -> int:
    digits = text.lstrip("+-").lower().split("e")[0].replace(".", "").lstrip("0").rstrip("0")
    return (len(digits) + 1) // 2 + 1


def value_size(value: dict) -> int:
    (kind, inner), = value.items()
    if kind == "S":
        return len(inner.encode("utf-8"))
    if kind == "N":
        return number_size(inner)
    if kind == "B":
        return len(_raw_bytes(inner))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode("utf-8")) for s in inner)
    if kind == "NS":
        return sum(number_size(n) for n in inner)
    if kind == "BS":
        return sum(len(_raw_bytes(b)) for b in inner)
    if kind == "L":
        return 3 + sum(value_size(v) + 1 for v in inner)
    if kind == "M":
        return 3 + sum(len(k.encode("utf-8")) + value_size(v) + 1 for k, v in inner.items())
    raise StrictLayerError(f"unknown DynamoDB type {kind!r}")


def _raw_bytes(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return base64.b64decode(value)


def item_size(item: dict | None) -> int:
    """An item's size as DynamoDB counts it (attribute names count), from its wire form."""
    if not item:
        return 0
    return sum(len(name.encode("utf-8")) + value_size(value) for name, value in item.items())


def write_units(size: int) -> int:
    return max(1, math.ceil(size / KB))


def read_units(size: int, consistent: bool) -> float:
    units = max(1, math.ceil(size / (4 * KB)))
    return units if consistent else units / 2


# ---------------------------------------------------------------------------------------------
# IAM

def _glob(pattern: str, ignore_case: bool = False) -> re.Pattern:
    text = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(text, re.IGNORECASE | re.DOTALL if ignore_case else re.DOTALL)


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _arn_like(have: str, want: str) -> bool:
    """IAM's ARN operators (ArnEquals and ArnLike alike): each of the six colon-delimited parts
    (the last, the resource, may hold colons) is matched on its own with `*`/`?`, so a wildcard
    never spans a colon and a value of fewer parts matches nothing; case-sensitive, as AWS's IAM
    User Guide ("Amazon Resource Name (ARN) condition operators") and its Java SDK document."""
    haves, wants = have.split(":", 5), want.split(":", 5)
    return len(haves) == len(wants) == 6 and all(_glob(w).fullmatch(h) for h, w in zip(haves, wants))


_STRING_OPERATORS = {
    "StringEquals": lambda have, want: have == want,
    "StringNotEquals": lambda have, want: have != want,
    "StringEqualsIgnoreCase": lambda have, want: have.lower() == want.lower(),
    "StringLike": lambda have, want: bool(_glob(want).fullmatch(have)),
    "StringNotLike": lambda have, want: not _glob(want).fullmatch(have),
    "ArnEquals": _arn_like,
    "ArnLike": _arn_like,
    "ArnNotEquals": lambda have, want: not _arn_like(have, want),
    "ArnNotLike": lambda have, want: not _arn_like(have, want),
    "Bool": lambda have, want: have.lower() == str(want).lower(),
}
_NEGATED = {"StringNotEquals", "StringNotLike", "ArnNotEquals", "ArnNotLike"}


_POLICY_VARIABLE = re.compile(r"\$\{([^}]+)\}")


def _substitute(wanted: str, context: dict[str, Any]) -> str | None:
    """A condition value with its policy variables (`${aws:PrincipalTag/k}`) replaced from the
    request's context; None when a variable has no value (AWS then matches nothing with it)."""
    missing = False

    def value(match: re.Match) -> str:
        nonlocal missing
        have = context.get(match.group(1).lower())
        if not isinstance(have, str):
            missing = True
            return ""
        return have
    text = _POLICY_VARIABLE.sub(value, wanted)
    return None if missing else text


def _split_operator(operator: str) -> tuple[str | None, str, bool]:
    """'ForAllValues:StringEqualsIfExists' -> ('ForAllValues', 'StringEquals', True)."""
    qualifier, _, base = operator.rpartition(":")
    if_exists = base.endswith("IfExists")
    return (qualifier or None), (base[:-len("IfExists")] if if_exists else base), if_exists


def condition_holds(condition: dict, context: dict[str, Any]) -> bool:
    """Every operator and key of a statement's Condition holds (AND), any value of a key (OR).
    A context value is a string, or a list for a multivalued key (aws:TagKeys), which only the
    ForAllValues / ForAnyValue qualifiers compare."""
    for operator, keys in condition.items():
        qualifier, base, if_exists = _split_operator(operator)
        for key, wanted in keys.items():
            have = context.get(key.lower())
            if base == "Null":
                if (have is None) != (str(wanted).lower() == "true"):
                    return False
                continue
            test = _STRING_OPERATORS.get(base)
            if test is None or qualifier not in (None, "ForAllValues", "ForAnyValue"):
                raise StrictLayerError(f"condition operator {operator!r} is not supported by the strict layer")
            values = [v for v in (_substitute(str(w), context) for w in _as_list(wanted)) if v is not None]
            if qualifier is not None:
                present = [] if have is None else _as_list(have)
                if qualifier == "ForAllValues":  # every value of the request is one of the wanted
                    if not all(any(test(h, v) for v in values) for h in present):
                        return False
                elif not any(test(h, v) for h in present for v in values):
                    return False
                continue
            if have is None:
                if if_exists or base in _NEGATED:
                    continue
                return False
            if not isinstance(have, str):
                return False  # a multivalued key needs a set qualifier
            results = [test(have, v) for v in values]
            if not results or not (all(results) if base in _NEGATED else any(results)):
                return False
    return True


@dataclass(frozen=True)
class Statement:
    allow: bool
    actions: tuple[re.Pattern, ...]
    resources: tuple[re.Pattern, ...]
    condition: dict
    names_resource_tags: bool = False  # a condition on aws:ResourceTag/<key>: the resource's tags are read

    def applies(self, action: str, resource: str, context: dict[str, str]) -> bool:
        return (any(a.fullmatch(action) for a in self.actions)
                and any(r.fullmatch(resource) for r in self.resources)
                and (not self.condition or condition_holds(self.condition, context)))


def _statement(raw: dict, resolve: Callable[[Any], str]) -> Statement:
    for unsupported in ("NotAction", "NotResource", "NotPrincipal"):
        if unsupported in raw:
            raise StrictLayerError(f"{unsupported} is not supported by the strict layer: {raw}")
    condition = raw.get("Condition") or {}
    for operator in condition:
        qualifier, base, _ = _split_operator(operator)
        if (base != "Null" and base not in _STRING_OPERATORS) or qualifier not in (None, "ForAllValues", "ForAnyValue"):
            raise StrictLayerError(f"condition operator {operator!r} is not supported by the strict layer")
    return Statement(
        allow=raw.get("Effect", "Allow") == "Allow",
        actions=tuple(_glob(a, ignore_case=True) for a in _as_list(raw["Action"])),
        resources=tuple(_glob(resolve(r)) for r in _as_list(raw.get("Resource", "*"))),
        condition=condition,
        names_resource_tags="aws:resourcetag/" in json.dumps(condition).lower(),
    )


def _trust_statement(raw: dict, resolve: Callable[[Any], str]) -> tuple[frozenset[str], Statement]:
    """A trust policy's statement: the AWS principals it names (ARNs; '*' for anyone) and the
    statement itself on resource '*' (a trust policy's resource is its own role)."""
    principal = raw.get("Principal") or {}
    if not isinstance(principal, dict) or set(principal) - {"AWS"}:
        # Service principals (lambda.amazonaws.com) are not callers the layer sees.
        names: frozenset[str] = frozenset()
    else:
        names = frozenset(resolve(p) for p in _as_list(principal["AWS"]))
    return names, _statement({**raw, "Resource": "*"}, resolve)


class Template:
    """What the layer needs from the synthesized template, with every reference resolved to
    the emulator's ARNs of the created stack (its physical ids)."""

    def __init__(self, template: dict, physical_ids: dict[str, str]) -> None:
        self._resources = template["Resources"]
        self._physical = physical_ids
        self.policies: dict[str, list[Statement]] = {}  # function name → its role's statements
        # Every role of the template by its ARN (local/stack.role_arn): its statements, its trust
        # policy's statements (Principal resolved), its longest session; and each function's role.
        self.role_policies: dict[str, list[Statement]] = {}
        self.trust: dict[str, list[tuple[frozenset[str], Statement]]] = {}
        self.max_session_seconds: dict[str, int] = {}
        self.function_role: dict[str, str] = {}
        role_by_logical: dict[str, str] = {}
        self.resource_denies: list[Statement] = []  # explicit Deny of resource policies (Principal *)
        self.tables: dict[str, dict[str, tuple[str, str | None]]] = {}  # table name → {"": keys, index: keys}
        # table name → {index: (projection type, non-key attributes)}: what an index entry holds
        self.projections: dict[str, dict[str, tuple[str, frozenset[str]]]] = {}
        self.own_keys = {physical_ids[k]: physical_ids[k] for k, r in self._resources.items()
                         if r["Type"] == "AWS::KMS::Key" and k in physical_ids}  # the stack's KMS keys, by id
        roles: dict[str, str] = {}
        for logical, resource in self._resources.items():
            props = resource.get("Properties", {})
            if resource["Type"] == "AWS::Lambda::Function":
                role = props["Role"]["Fn::GetAtt"][0] if isinstance(props.get("Role"), dict) else None
                name = props["Handler"].split(".")[-2]
                roles[role] = name
                self.policies.setdefault(name, [])
                if role:
                    self.function_role[name] = role_arn(role)
            elif resource["Type"] == "AWS::IAM::Role":
                arn = role_by_logical[logical] = role_arn(logical)
                self.role_policies.setdefault(arn, [])
                self.max_session_seconds[arn] = int(props.get("MaxSessionDuration", 3600))
            elif resource["Type"] == "AWS::DynamoDB::Table" and logical in physical_ids:
                keys = {"": _key_names(props["KeySchema"])}
                projections = {}
                for index in props.get("GlobalSecondaryIndexes", []) + props.get("LocalSecondaryIndexes", []):
                    keys[index["IndexName"]] = _key_names(index["KeySchema"])
                    projection = index.get("Projection", {})
                    projections[index["IndexName"]] = (projection.get("ProjectionType", "KEYS_ONLY"),
                                                       frozenset(projection.get("NonKeyAttributes", ())))
                self.tables[physical_ids[logical]] = keys
                self.projections[physical_ids[logical]] = projections
        for logical, resource in self._resources.items():
            props = resource.get("Properties", {})
            if resource["Type"] == "AWS::IAM::Policy":
                for role_ref in props.get("Roles", []):
                    ref = role_ref.get("Ref") if isinstance(role_ref, dict) else None
                    parsed = [_statement(s, self.resolve) for s in props["PolicyDocument"]["Statement"]]
                    if roles.get(ref):
                        self.policies[roles[ref]].extend(parsed)
                    if ref in role_by_logical:
                        self.role_policies[role_by_logical[ref]].extend(parsed)
            elif resource["Type"] == "AWS::IAM::Role":
                if props.get("ManagedPolicyArns") and logical in roles:
                    raise StrictLayerError(f"{logical}: managed policies are not resolved by the strict layer")
                for inline in props.get("Policies", []):
                    parsed = [_statement(s, self.resolve) for s in inline["PolicyDocument"]["Statement"]]
                    self.role_policies[role_by_logical[logical]].extend(parsed)
                    if logical in roles:
                        self.policies[roles[logical]].extend(parsed)
                self.trust[role_by_logical[logical]] = [
                    _trust_statement(raw, self.resolve)
                    for raw in (props.get("AssumeRolePolicyDocument") or {}).get("Statement", [])]
            elif resource["Type"] in ("AWS::SQS::QueuePolicy", "AWS::SNS::TopicPolicy"):
                for raw in props["PolicyDocument"]["Statement"]:
                    if raw.get("Effect") == "Deny" and raw.get("Principal") in ("*", {"AWS": "*"}):
                        self.resource_denies.append(_statement(raw, self.resolve))

    def resolve(self, value: Any) -> str:
        if isinstance(value, str):
            return value
        if "Ref" in value:
            ref = value["Ref"]
            pseudo = {"AWS::Partition": "aws", "AWS::AccountId": ACCOUNT, "AWS::Region": REGION,
                      "AWS::URLSuffix": "amazonaws.com", "AWS::StackName": "Jobsched"}
            if ref in pseudo:
                return pseudo[ref]
            return self._arn(ref) if self._resources.get(ref, {}).get("Type") == "AWS::SNS::Topic" \
                else self._physical.get(ref, ref)
        if "Fn::GetAtt" in value:
            logical, attribute = value["Fn::GetAtt"]
            if attribute != "Arn":
                raise StrictLayerError(f"Fn::GetAtt {logical}.{attribute} is not resolved by the strict layer")
            return self._arn(logical)
        if "Fn::Join" in value:
            separator, parts = value["Fn::Join"]
            return separator.join(self.resolve(p) for p in parts)
        if "Fn::Sub" in value:
            text = value["Fn::Sub"] if isinstance(value["Fn::Sub"], str) else value["Fn::Sub"][0]
            extra = {} if isinstance(value["Fn::Sub"], str) else value["Fn::Sub"][1]

            def substitute(match: re.Match) -> str:
                name = match.group(1)
                if name in extra:
                    return self.resolve(extra[name])
                if "." in name:
                    return self.resolve({"Fn::GetAtt": name.split(".", 1)})
                return self.resolve({"Ref": name})
            return re.sub(r"\$\{([^}!]+)\}", substitute, text)
        raise StrictLayerError(f"cannot resolve {value!r}")

    def _arn(self, logical: str) -> str:
        kind = self._resources[logical]["Type"]
        physical = self._physical.get(logical)
        if kind == "AWS::DynamoDB::Table" and physical:
            return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{physical}"
        if kind == "AWS::SQS::Queue" and physical:
            return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{physical.rsplit('/', 1)[-1]}"
        if kind == "AWS::KMS::Key" and physical:
            return f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{physical}"
        if kind == "AWS::SNS::Topic" and physical:
            return physical  # created in the emulator (the absence-alert topic): its physical id is its ARN
        if kind == "AWS::IAM::Role":
            return role_arn(logical)  # as the local stack gives it to the functions' environment
        # Not created in the emulator (log groups, topics, functions): an ARN of its own that no
        # call the functions make can name, so a grant on it allows nothing else.
        service = kind.split("::")[1].lower()
        return f"arn:aws:{service}:{REGION}:{ACCOUNT}:jobsched-uncreated/{logical}"


def _cluster_name(params: dict) -> str:
    cluster = params.get("cluster") or "default"
    return cluster.rsplit("/", 1)[-1] if cluster.startswith("arn:") else cluster


def _task_definition_arn(value: str) -> str:
    """RunTask's taskDefinition (an ARN, or family:revision) as the ARN IAM sees."""
    return value if value.startswith("arn:") else f"arn:aws:ecs:{REGION}:{ACCOUNT}:task-definition/{value}"


def _key_names(schema: list[dict]) -> tuple[str, str | None]:
    hash_key = next(k["AttributeName"] for k in schema if k["KeyType"] == "HASH")
    range_key = next((k["AttributeName"] for k in schema if k["KeyType"] == "RANGE"), None)
    return hash_key, range_key


# ---------------------------------------------------------------------------------------------
# Capacity

@dataclass
class PartitionUse:
    read_units: float = 0.0
    write_units: float = 0.0
    peak_rcu: float = 0.0
    peak_wcu: float = 0.0
    throttled: int = 0


@dataclass(frozen=True)
class RoleSession:
    """Credentials AssumeRole handed out: the role they act as, their session tags, their end (on
    the emulator's clock), a label for reports, and the session's principal ARN."""
    role: str
    tags: dict
    expires_ms: int
    label: str
    principal_arn: str


@dataclass
class Report:
    hottest: list[tuple[str, PartitionUse]]
    kms_peak_per_second: int
    kms_requests: int
    throttled: int
    denied: list[str]
    assumed_roles: int = 0

    def text(self, top: int = 5) -> str:
        lines = [f"strict AWS: peak per partition key (limit {PARTITION_WCU_PER_SECOND} WCU/s, "
                 f"{PARTITION_RCU_PER_SECOND} RCU/s per key)"]
        for key, use in self.hottest[:top]:
            lines.append(f"  {key}: peak {use.peak_wcu:g} WCU/s, {use.peak_rcu:g} RCU/s "
                         f"(total {use.write_units:g} WCU, {use.read_units:g} RCU, throttled {use.throttled})")
        lines.append(f"  KMS: peak {self.kms_peak_per_second} requests/s ({self.kms_requests} in all)")
        lines.append(f"  STS AssumeRole: {self.assumed_roles}")
        if self.denied:
            lines.append(f"  AccessDenied: {len(self.denied)} ({', '.join(sorted(set(self.denied))[:5])})")
        return "\n".join(lines)


class Ledger:
    """Capacity units per partition key per second of the emulator's clock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.partitions: dict[str, PartitionUse] = defaultdict(PartitionUse)
        self._second: dict[str, tuple[int, float, float]] = {}  # key → (second, rcu, wcu)
        self.kms_second = (0, 0)
        self.kms_peak = 0
        self.kms_total = 0
        self.denied: list[str] = []
        self.allowed: set[tuple[str, str]] = set()  # (caller, IAM action) allowed at least once (grant_report.py)
        self.assumed_roles = 0
        self.buckets: dict[str, tuple[float, int]] = {}  # token buckets: name → (tokens, when)
        self.throttled_calls = 0

    def used(self, key: str, second: int) -> tuple[float, float]:
        with self._lock:
            at, rcu, wcu = self._second.get(key, (second, 0.0, 0.0))
            return (rcu, wcu) if at == second else (0.0, 0.0)

    def bill(self, key: str, second: int, rcu: float = 0.0, wcu: float = 0.0) -> None:
        with self._lock:
            at, used_r, used_w = self._second.get(key, (second, 0.0, 0.0))
            if at != second:
                used_r = used_w = 0.0
            used_r, used_w = used_r + rcu, used_w + wcu
            self._second[key] = (second, used_r, used_w)
            use = self.partitions[key]
            use.read_units += rcu
            use.write_units += wcu
            use.peak_rcu = max(use.peak_rcu, used_r)
            use.peak_wcu = max(use.peak_wcu, used_w)

    def count_assume_role(self) -> None:
        with self._lock:
            self.assumed_roles += 1

    def take_tokens(self, bucket: str, now_ms: int, size: int, per_second: int, count: int = 1) -> bool:
        """A token bucket of the account's (full at first): False, and nothing taken, when it has
        fewer than `count` tokens now."""
        with self._lock:
            tokens, at = self.buckets.get(bucket, (float(size), now_ms))
            tokens = min(float(size), tokens + (now_ms - at) * per_second / 1000)
            taken = tokens >= count
            self.buckets[bucket] = (tokens - count if taken else tokens, now_ms)
            if not taken:
                self.throttled_calls += 1
            return taken

    def count_kms(self, second: int) -> int:
        with self._lock:
            at, count = self.kms_second
            count = count + 1 if at == second else 1
            self.kms_second = (second, count)
            self.kms_peak = max(self.kms_peak, count)
            self.kms_total += 1
            return count


# ---------------------------------------------------------------------------------------------
# The layer

@dataclass
class Limits:
    partition_wcu: int = PARTITION_WCU_PER_SECOND
    partition_rcu: int = PARTITION_RCU_PER_SECOND
    kms_per_second: int = KMS_REQUESTS_PER_SECOND
    run_task_calls: tuple[int, int] = RUN_TASK_CALLS
    fargate_launches: tuple[int, int] = FARGATE_LAUNCHES
    sqs_in_flight: int = SQS_IN_FLIGHT_PER_QUEUE  # per queue; a test sets it small


@dataclass
class _Call:
    """One call's state between its check and its bill (kept in botocore's request context)."""
    service: str
    operation: str
    params: dict
    second: int
    before: dict = field(default_factory=dict)  # (table, key json) → the item before a write
    after: dict = field(default_factory=dict)  # (table, key json) → the item after it (or as read), reported
    unreported: bool = False  # reports on, but the answer carried none
    answer_empty: bool = False  # a long-polling ReceiveMessage past the in-flight limit: answered empty


class InFlight:
    """Each queue's in-flight messages (message id → when it is visible again), found by their
    receipt handles. A message visible again, or deleted, is in flight no more."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str, dict[str, int]] = defaultdict(dict)
        self._handles: dict[str, tuple[str, str]] = {}  # receipt handle → (queue, message id)
        self.defaults: dict[tuple[str, str], int] = {}  # (queue url, attribute) → value
        self.peak: dict[str, int] = defaultdict(int)

    def count(self, queue: str, now_ms: int) -> int:
        with self._lock:
            messages = self._queues[queue]
            for message_id in [m for m, until in messages.items() if until <= now_ms]:
                del messages[message_id]
            self._handles = {h: ref for h, ref in self._handles.items() if ref[1] in self._queues[ref[0]]} \
                if len(self._handles) > 2 * sum(len(q) for q in self._queues.values()) + 1000 else self._handles
            return len(messages)

    def received(self, queue: str, message_id: str, handle: str, visible_at_ms: int) -> None:
        with self._lock:
            self._queues[queue][message_id] = visible_at_ms
            self._handles[handle] = (queue, message_id)
            self.peak[queue] = max(self.peak[queue], len(self._queues[queue]))

    def changed(self, handle: str, visible_at_ms: int) -> None:
        """A visibility change (a deletion: visible at once, never again)."""
        with self._lock:
            ref = self._handles.get(handle)
            if ref is None or ref[1] not in self._queues[ref[0]]:
                return
            self._queues[ref[0]][ref[1]] = visible_at_ms


class StrictAws:
    def __init__(self, template: dict, physical_ids: dict[str, str], now_ms: Callable[[], int] | None = None,
                 limits: Limits | None = None, region: str = REGION) -> None:
        # The emulator's region whose backend holds this stack (a simulated region of its own,
        # local/regions.py): the items the layer bills are read there. ARNs keep REGION's name in the
        # template's policies and in the calls alike, so IAM decides the same in every region.
        self.region = region
        self.template = _parsed(json.dumps(template, sort_keys=True), json.dumps(physical_ids, sort_keys=True))
        self.now_ms = now_ms or (lambda: int(time.time() * 1000))
        self.limits = limits or Limits()
        self.ledger = Ledger()
        self._raw_client = None
        self._kms_ids: dict[str, str] = {}  # a key id a ciphertext names -> the key's id now
        self._peek_fn: Callable[[str, dict], dict | None] | None = None
        self._reports = False  # use_reports
        self._sessions: dict[str, RoleSession] = {}  # access key id → the role session it signs as
        self._tag_clients: dict[str, Any] = {}
        self.in_flight = InFlight()
        self._raw_sqs = None
        self._queue_attributes = True  # a send is held to its queue's own MaximumMessageSize
        # (caller, queue or topic) -> until when SQS reuses the data key it got for them (SSE-KMS).
        self._sse_reuse: dict[tuple[str | None, str], int] | None = {}

    @classmethod
    def billing_only(cls, tables: dict[str, tuple[str, ...]], now_ms: Callable[[], int] | None = None,
                     peek: Callable[[str, dict], dict | None] | None = None,
                     region: str = REGION, queue_attributes: bool = False) -> "StrictAws":
        """Bills capacity per key and refuses what AWS refuses by size, but checks no IAM and
        throttles nothing: for benchmarks whose AWS is answered in-process (bench/instant_aws.py,
        no template, and a clock that stands still over a whole hand-off, so that the ledger's
        "second" is the whole run). `tables`: name → (partition key, sort key); `peek` gives the
        item before a write (none: billed on the item written); `queue_attributes`: read each
        queue's MaximumMessageSize (else SQS's 1 MiB: a queue answered in-process has none to read)."""
        layer = cls.__new__(cls)
        layer.region = region
        layer.template = _TablesOnly({name: {"": (keys[0], keys[1] if len(keys) > 1 else None)}
                                      for name, keys in tables.items()})
        layer.now_ms = now_ms or (lambda: int(time.time() * 1000))
        unlimited = 10 ** 15
        layer.limits = Limits(partition_wcu=unlimited, partition_rcu=unlimited, kms_per_second=unlimited)
        layer.ledger = Ledger()
        layer._raw_client = None
        layer._peek_fn = peek or (lambda table, key: None)
        layer._reports = False
        layer._sessions = {}
        layer._tag_clients = {}
        layer.in_flight = InFlight()
        layer._raw_sqs = None
        layer._sse_reuse = None  # answered in-process: no queue or topic attributes to read
        layer._queue_attributes = queue_attributes
        return layer

    # --- entry points from botocore's events ---------------------------------------------------

    def before(self, client, model, params: dict, context: dict) -> None:
        if _internal.get():
            return
        service = model.service_model.signing_name or model.service_model.endpoint_prefix
        call = _Call(service, model.name, params, self.now_ms() // 1000)
        function = current_function.get()
        session = self._sessions.get(_access_key(client) or "")
        caller = None  # (who, their statements, principal ARN, principal tags): None for an unchecked call
        if session is not None:
            # Signed with a role session's credentials (AssumeRole): that role decides, whoever calls.
            if self.now_ms() >= session.expires_ms:
                code = "ExpiredToken" if service in ("sqs", "sns", "sts") else "ExpiredTokenException"
                raise _error(client, call.operation, code, "The security token included in the request is expired",
                             403 if service in ("sqs", "sns") else 400)
            caller = (session.label, self.template.role_policies.get(session.role, []), session.principal_arn,
                      session.tags)
        elif function is not None:
            statements = self.template.policies.get(function)
            if statements is None:
                raise StrictLayerError(f"no function {function!r} in the template")
            caller = (function, statements, self.template.function_role.get(function), None)
        if caller is not None:
            self._authorize(client, caller[0], caller[1], call, principal=caller[2], principal_tags=caller[3])
        check = getattr(self, f"_check_{service}", None)
        if check:
            check(client, call)
        if (service, call.operation) in strict_kms.SSE_SENDS and self._sse_reuse is not None:
            self._check_sse_kms(client, call, caller)
        context["strict_aws"] = call

    def after(self, client, http_response, parsed: dict, model, context: dict) -> None:
        call = context.get("strict_aws")
        if call is None or _internal.get():
            return
        if call.service == "sts" and call.operation == "AssumeRole" and http_response.status_code < 300:
            self._remember_session(call, parsed)
        if call.service == "ecs" and http_response.status_code < 300:  # tasks' tags as ECS keeps them
            strict_ecs.after_call(self._tag_client("ecs"), call.operation, call.params, parsed, _internal)
        if self._reports and call.service == "dynamodb":
            self._take_report(call, http_response)
        bill = getattr(self, f"_bill_{call.service}", None)
        if bill:
            bill(client, call, parsed, http_response.status_code < 300)

    def report(self) -> Report:
        hottest = sorted(self.ledger.partitions.items(),
                         key=lambda kv: max(kv[1].peak_wcu / self.limits.partition_wcu,
                                            kv[1].peak_rcu / self.limits.partition_rcu), reverse=True)
        return Report(hottest, self.ledger.kms_peak, self.ledger.kms_total,
                      sum(u.throttled for u in self.ledger.partitions.values()), list(self.ledger.denied),
                      self.ledger.assumed_roles)

    # --- IAM ---------------------------------------------------------------------------------

    def _authorize(self, client, who: str, statements: list[Statement], call: _Call, principal: str | None = None,
                   principal_tags: dict[str, str] | None = None) -> None:
        action = IAM_ACTION_OF.get((call.service, call.operation), f"{call.service}:{call.operation}")
        context = self._condition_context(call, principal, principal_tags)
        if call.service == "sts" and call.operation == "AssumeRole":
            self._authorize_assume_role(client, who, statements, call, principal, context)
            return
        # A transaction is authorized item by item, by each item's own action (_actions_on).
        for item_action, resource in self._actions_on(call, action):
            resource_context = {**context, **self._resource_tags(call, resource, statements)}
            self._decide(client, who, statements + self.template.resource_denies, item_action, resource,
                         resource_context, call)

    def _decide(self, client, who: str, statements: list[Statement], action: str, resource: str, context: dict,
                call: _Call, denied_by_trust: bool = False,
                refuse: Callable[[str], ClientError] | None = None) -> None:
        denied = any(not s.allow and s.applies(action, resource, context) for s in statements)
        allowed = any(s.allow and s.applies(action, resource, context) for s in statements)
        if denied or not allowed or denied_by_trust:
            self.ledger.denied.append(f"{who}:{action}")
            role = f"arn:aws:sts::{ACCOUNT}:assumed-role/jobsched-{who}/jobsched-{who}"
            how = "with an explicit deny in an identity-based policy" if denied \
                else "because no identity-based policy allows the" if not denied_by_trust \
                else "because the role's trust policy does not allow the"
            message = (f"User: {role} is not authorized to perform: {action} on resource: {resource} "
                       f"{how} {action} action")
            if refuse is not None:  # another service's call made for the caller (SSE-KMS), in that service's words
                raise refuse(message)
            code, status = ACCESS_DENIED.get(call.service, ("AccessDeniedException", 400))
            raise _error(client, call.operation, code, message, status)
        self.ledger.allowed.add((who, action))

    def _authorize_assume_role(self, client, who: str, statements: list[Statement], call: _Call,
                               principal: str | None, context: dict) -> None:
        """sts:AssumeRole (and sts:TagSession when tags are passed) must be allowed by the caller's
        policies on the role, and by the role's trust policy for the caller's role ARN, with the
        request's tags (aws:RequestTag/<key>, aws:TagKeys) in the conditions."""
        p = call.params
        target = p["RoleArn"]
        tags = p.get("Tags") or []
        self._check_session_request(client, call, target, tags)
        actions = ["sts:AssumeRole"] + (["sts:TagSession"] if tags else [])
        trust = self.template.trust.get(target)
        for action in actions:
            self._decide(client, who, statements, action, target, context, call)
            trusted = trust is not None and principal is not None and any(
                ("*" in names or principal in names) and statement.applies(action, "*", context)
                for names, statement in trust)
            untrusted = trust is not None and principal is not None and any(
                ("*" in names or principal in names) and not statement.allow and statement.applies(action, "*", context)
                for names, statement in trust)
            if not trusted or untrusted:
                self._decide(client, who, statements, action, target, context, call, denied_by_trust=True)

    def _check_session_request(self, client, call: _Call, target: str, tags: list[dict]) -> None:
        """What STS refuses whatever the policies: a session longer than the role allows, or than an
        hour for a role assumed with a role session's credentials (role chaining: every function's
        are), and session tags past their limits (AWS-LIMITS.md §8)."""
        duration = int(call.params.get("DurationSeconds", 3600))
        longest = min(self.template.max_session_seconds.get(target, 3600), 3600)
        if not 900 <= duration <= longest:
            raise _error(client, call.operation, "ValidationError",
                         f"The requested DurationSeconds exceeds the {longest} s session limit for roles assumed by "
                         "role chaining" if duration > longest else "DurationSeconds must be at least 900", 400)
        if len(tags) > 50 or any(not _SESSION_TAG_KEY.fullmatch(t["Key"]) or not _SESSION_TAG_VALUE.fullmatch(t["Value"])
                                 for t in tags):
            raise _error(client, call.operation, "ValidationError",
                         "1 validation error detected: Value at 'tags' failed to satisfy constraint: at most 50 tags, "
                         "keys of 1-128 and values of 0-256 letters, digits, spaces or _.:/=+-@", 400)

    def _remember_session(self, call: _Call, parsed: dict) -> None:
        credentials = parsed.get("Credentials") or {}
        key = credentials.get("AccessKeyId")
        if not key:
            return
        tags = {t["Key"]: t["Value"] for t in call.params.get("Tags") or []}
        role = call.params["RoleArn"]
        name = call.params.get("RoleSessionName", "")
        duration = int(call.params.get("DurationSeconds", 3600))
        label = f"{role.rsplit('/', 1)[-1]}({','.join(f'{k}={v}' for k, v in tags.items())})"
        principal = f"arn:aws:sts::{ACCOUNT}:assumed-role/{role.rsplit('/', 1)[-1]}/{name}"
        self._sessions[key] = RoleSession(role, tags, self.now_ms() + duration * 1000, label, principal)
        self.ledger.count_assume_role()

    def _actions_on(self, call: _Call, action: str) -> list[tuple[str, str]]:
        """(IAM action, resource) pairs a call needs. A transaction has no action of its own: IAM
        authorizes each of its items by the underlying action (Put → dynamodb:PutItem, ConditionCheck
        → dynamodb:ConditionCheckItem; AWS, "Using IAM with DynamoDB transactions")."""
        if call.service == "ecs" and call.operation == "RunTask":
            return self._run_task_actions(call)
        if call.service == "dynamodb" and call.operation in ("TransactWriteItems", "TransactGetItems"):
            return list(dict.fromkeys(
                (f"dynamodb:{TRANSACTION_ACTIONS[kind]}", self._table_arn(entry["TableName"]))
                for item in call.params.get("TransactItems", []) for kind, entry in item.items()))
        return [(action, resource) for resource in self._resources_of(call)]

    def _run_task_actions(self, call: _Call) -> list[tuple[str, str]]:
        """ECS authorizes RunTask on the task definition, ecs:TagResource on the new task when the
        call tags it (ecs:CreateAction = RunTask), and iam:PassRole for each role the task will
        use: its task definition's task and execution roles, and those the overrides name."""
        p = call.params
        definition = _task_definition_arn(p.get("taskDefinition", ""))
        pairs = [("ecs:RunTask", definition)]
        if p.get("tags"):
            pairs.append(("ecs:TagResource", f"arn:aws:ecs:{REGION}:{ACCOUNT}:task/{_cluster_name(p)}/*"))
        roles = [(p.get("overrides") or {}).get(k) for k in ("taskRoleArn", "executionRoleArn")]
        token = _internal.set(True)
        try:
            described = self._tag_client("ecs").describe_task_definition(taskDefinition=definition)["taskDefinition"]
            roles += [described.get("taskRoleArn"), described.get("executionRoleArn")]
        except ClientError:
            pass  # no such task definition: ECS answers that, after IAM
        finally:
            _internal.reset(token)
        pairs += [("iam:PassRole", role) for role in dict.fromkeys(r for r in roles if r)]
        return pairs

    @staticmethod
    def _condition_context(call: _Call, principal: str | None = None,
                           principal_tags: dict[str, str] | None = None) -> dict[str, Any]:
        context: dict[str, Any] = {"aws:securetransport": "true", "aws:requestedregion": REGION}
        if call.service == "ecs":
            # ECS's keys: the cluster a call acts in; which call creates (and so tags) a resource;
            # the service a role is passed to (RunTask passes its roles to ECS's tasks).
            context["ecs:cluster"] = f"arn:aws:ecs:{REGION}:{ACCOUNT}:cluster/{_cluster_name(call.params)}"
            if call.operation == "RunTask":
                context["ecs:createaction"] = "RunTask"
                context["iam:passedtoservice"] = "ecs-tasks.amazonaws.com"
        for key, value in (call.params.get("EncryptionContext") or {}).items():
            context[f"kms:encryptioncontext:{key}".lower()] = value
        if principal:
            context["aws:principalarn"] = principal
        for key, value in (principal_tags or {}).items():
            context[f"aws:principaltag/{key}".lower()] = value
        if call.service == "sts" and call.params.get("Tags"):
            for tag in call.params["Tags"]:
                context[f"aws:requesttag/{tag['Key']}".lower()] = tag["Value"]
            context["aws:tagkeys"] = [tag["Key"] for tag in call.params["Tags"]]
        return context

    # Resource tags, as the emulator stores them: read only when a statement's condition names
    # aws:ResourceTag (the target actions of a role session), with unchecked calls.
    def _resource_tags(self, call: _Call, resource: str, statements: list[Statement]) -> dict[str, str]:
        if not any(s.names_resource_tags for s in statements):
            return {}
        token = _internal.set(True)
        try:
            tags = self._read_tags(call.service, resource, call.params)
        except ClientError:
            tags = {}  # a resource that does not exist has no tags: the condition does not hold
        finally:
            _internal.reset(token)
        return {f"aws:resourcetag/{k}".lower(): v for k, v in tags.items()}

    def _tag_client(self, service: str):
        if service not in self._tag_clients:
            import boto3

            self._tag_clients[service] = boto3.session.Session().client(service, region_name=self.region)
        return self._tag_clients[service]

    def _read_tags(self, service: str, resource: str, params: dict) -> dict[str, str]:
        client = self._tag_client(service)
        if service == "ecs":  # a task definition's or a task's (strict_ecs.py: as ECS keeps them)
            return strict_ecs.tags_of(client, resource)
        if service == "sqs":
            return client.list_queue_tags(QueueUrl=params["QueueUrl"]).get("Tags") or {}
        if service == "sns":
            return {t["Key"]: t["Value"] for t in client.list_tags_for_resource(ResourceArn=resource).get("Tags", [])}
        if service == "events":
            return {t["Key"]: t["Value"] for t in client.list_tags_for_resource(ResourceARN=resource).get("Tags", [])}
        if service == "kms":  # a key's tags (strict_kms: the targets role's keys are granted by tag)
            return {t["TagKey"]: t["TagValue"] for t in client.list_resource_tags(KeyId=resource).get("Tags", [])}
        if service == "lambda":
            unqualified = ":".join(resource.split(":")[:7])  # tags are the function's, not an alias's
            return client.list_tags(Resource=unqualified).get("Tags") or {}
        return {}

    def _resources_of(self, call: _Call) -> list[str]:
        p, service = call.params, call.service
        if service == "dynamodb":
            tables = list(p.get("RequestItems", {})) or [t for item in p.get("TransactItems", [])
                                                         for t in [next(iter(item.values()))["TableName"]]]
            if "TableName" in p:
                tables = [p["TableName"]]
            arns = [self._table_arn(t) for t in dict.fromkeys(tables)]
            if p.get("IndexName"):
                arns = [f"{arns[0]}/index/{p['IndexName']}"]
            return arns or ["*"]
        if service == "sqs":
            if "QueueUrl" in p:
                return [_queue_arn(p["QueueUrl"])]
            if "QueueName" in p:
                return [f"arn:aws:sqs:{REGION}:{p.get('QueueOwnerAWSAccountId') or ACCOUNT}:{p['QueueName']}"]
        if service == "sns":
            return [p.get("TopicArn") or p.get("TargetArn") or "*"]
        if service == "events" and call.operation == "PutEvents":
            buses = {e.get("EventBusName") or "default" for e in p.get("Entries", [])}
            return [b if b.startswith("arn:") else f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/{b}" for b in buses]
        if service == "lambda" and "FunctionName" in p:
            name = p["FunctionName"]
            if name.startswith("arn:"):
                return [name]
            return [f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"]
        if service == "ecs":
            cluster = _cluster_name(p)
            if call.operation == "ListTasks":  # IAM names the container instances of the cluster
                return [f"arn:aws:ecs:{REGION}:{ACCOUNT}:container-instance/{cluster}/*"]
            tasks = p.get("tasks") or ([p["task"]] if p.get("task") else [])
            if tasks:
                return [t if t.startswith("arn:") else f"arn:aws:ecs:{REGION}:{ACCOUNT}:task/{cluster}/{t}"
                        for t in tasks]
        if service == "kms":
            key = p.get("KeyId")
            if key is None and "CiphertextBlob" in p:
                key = _moto_ciphertext_key(p["CiphertextBlob"])
                key = self._kms_ids.get(key, key)
            if key is None:
                return ["*"]
            if key.startswith("arn:"):
                return [key]
            if key.startswith("alias/"):
                return [f"arn:aws:kms:{REGION}:{ACCOUNT}:{key}"]
            return [f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{key}"]
        return ["*"]

    @staticmethod
    def _table_arn(name: str) -> str:
        return name if name.startswith("arn:") else f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"

    # --- DynamoDB: limits, throttle, bill -----------------------------------------------------

    def _keys_of(self, table: str, item: dict, index: str = "") -> tuple[str, str | None] | None:
        keys = self.template.tables.get(table, {}).get(index)
        return keys

    def _partition(self, table: str, item: dict, index: str = "") -> str | None:
        keys = self._keys_of(table, item, index)
        if keys is None or keys[0] not in item:
            return None
        (kind, value), = item[keys[0]].items()
        name = f"{table}/{index}" if index else table
        return f"{name}[{value if kind != 'B' else '<binary>'}]"

    def _check_key(self, client, operation: str, table: str, key: dict) -> None:
        keys = self.template.tables.get(table, {}).get("")
        if keys is None:
            return
        for name, limit in zip(keys, (MAX_PARTITION_KEY_BYTES, MAX_SORT_KEY_BYTES)):
            if name and name in key and value_size(key[name]) > limit:
                raise _error(client, operation, "ValidationException",
                             f"One or more parameter values were invalid: Size of {'hashkey' if limit == MAX_PARTITION_KEY_BYTES else 'rangekey'} "
                             f"has exceeded the maximum size limit of {limit} bytes", 400)

    def _check_expressions(self, client, operation: str, request: dict) -> None:
        for name in ("KeyConditionExpression", "FilterExpression", "ConditionExpression", "UpdateExpression",
                     "ProjectionExpression"):
            text = request.get(name)
            if isinstance(text, str) and len(text.encode("utf-8")) > MAX_EXPRESSION_BYTES:
                raise _error(client, operation, "ValidationException",
                             f"Invalid {name}: Expression size has exceeded the maximum allowed size; "
                             f"expression size: {len(text.encode())}", 400)
        for placeholder in list(request.get("ExpressionAttributeNames") or {}) + list(
                request.get("ExpressionAttributeValues") or {}):
            if len(placeholder.encode("utf-8")) > MAX_PLACEHOLDER_BYTES:
                raise _error(client, operation, "ValidationException",
                             f"ExpressionAttributeNames or Values contains invalid key: {placeholder[:40]}...: "
                             f"longer than {MAX_PLACEHOLDER_BYTES} bytes", 400)
        values = request.get("ExpressionAttributeValues") or {}
        if values and sum(value_size(v) for v in values.values()) > MAX_SUBSTITUTION_BYTES:
            raise _error(client, operation, "ValidationException",
                         "ExpressionAttributeValues exceed the 2 MB limit of all substitutions", 400)

    def _check_item(self, client, operation: str, table: str, item: dict) -> None:
        size = item_size(item)
        if size > MAX_ITEM_BYTES:
            raise _error(client, operation, "ValidationException",
                         f"Item size has exceeded the maximum allowed size (item of {size} bytes in {table})", 400)
        self._check_key(client, operation, table, item)

    def _throttle(self, client, call: _Call, partitions: list[str | None], reads: bool) -> None:
        for key in partitions:
            if key is None:
                continue
            rcu, wcu = self.ledger.used(key, call.second)
            over = rcu >= self.limits.partition_rcu if reads else wcu >= self.limits.partition_wcu
            if over:
                self.ledger.partitions[key].throttled += 1
                raise _error(client, call.operation, "ProvisionedThroughputExceededException",
                             f"Throughput exceeds the current capacity for one or more partitions: {key} "
                             f"(ThrottlingReason: KeyRange{'Read' if reads else 'Write'}ThroughputExceeded)", 400)

    def _check_dynamodb(self, client, call: _Call) -> None:
        p, op = call.params, call.operation
        self._check_expressions(client, op, p)
        table = p.get("TableName")
        if op == "PutItem":
            self._check_item(client, op, table, p["Item"])
            self._throttle(client, call, [self._partition(table, p["Item"])], reads=False)
            self._note_before(call, table, self._primary(table, p["Item"]))
        elif op in ("UpdateItem", "DeleteItem"):
            self._check_key(client, op, table, p["Key"])
            self._throttle(client, call, [self._partition(table, p["Key"])], reads=False)
            self._note_before(call, table, p["Key"])
        elif op == "GetItem":
            self._check_key(client, op, table, p["Key"])
            self._throttle(client, call, [self._partition(table, p["Key"])], reads=True)
        elif op in ("Query", "Scan"):
            index = p.get("IndexName") or ""
            values = p.get("ExpressionAttributeValues") or {}
            partition = None
            keys = self.template.tables.get(table, {}).get(index)
            if op == "Query" and keys:
                # The partition is the value the key condition compares the hash key with.
                names = p.get("ExpressionAttributeNames") or {}
                match = re.search(r"([#\w]+)\s*=\s*(:\w+)", p.get("KeyConditionExpression", ""))
                if match and names.get(match.group(1), match.group(1)) == keys[0] and match.group(2) in values:
                    partition = self._partition(table, {keys[0]: values[match.group(2)]}, index)
            call.before["partition"] = partition
            self._throttle(client, call, [partition], reads=True)
        elif op == "BatchGetItem":
            count = sum(len(r["Keys"]) for r in p["RequestItems"].values())
            if count > BATCH_GET_MAX_KEYS:
                raise _error(client, op, "ValidationException",
                             f"Too many items requested for the BatchGetItem call: {count} > {BATCH_GET_MAX_KEYS}", 400)
            for name, request in p["RequestItems"].items():
                self._check_expressions(client, op, request)
                for key in request["Keys"]:
                    self._check_key(client, op, name, key)
                self._throttle(client, call, [self._partition(name, k) for k in request["Keys"]], reads=True)
        elif op == "BatchWriteItem":
            requests = [(name, r) for name, rs in p["RequestItems"].items() for r in rs]
            if len(requests) > BATCH_WRITE_MAX_ITEMS:
                raise _error(client, op, "ValidationException",
                             "1 validation error detected: Value at 'requestItems' failed to satisfy constraint: "
                             f"Map value must satisfy constraint: [Member must have length less than or equal to "
                             f"{BATCH_WRITE_MAX_ITEMS}] ({len(requests)} requests)", 400)
            for name, request in requests:
                item = request["PutRequest"]["Item"] if "PutRequest" in request else request["DeleteRequest"]["Key"]
                if "PutRequest" in request:
                    self._check_item(client, op, name, item)
                else:
                    self._check_key(client, op, name, item)
                self._throttle(client, call, [self._partition(name, item)], reads=False)
                self._note_before(call, name, self._primary(name, item))
        elif op in ("TransactWriteItems", "TransactGetItems"):
            items = p["TransactItems"]
            if len(items) > TRANSACTION_MAX_ITEMS:
                raise _error(client, op, "ValidationException",
                             f"Member must have length less than or equal to {TRANSACTION_MAX_ITEMS}", 400)
            total = 0
            for entry in items:
                (kind, action), = entry.items()
                self._check_expressions(client, op, action)
                name = action["TableName"]
                key = self._primary(name, action.get("Item") or action["Key"])
                if kind == "Put":
                    self._check_item(client, op, name, action["Item"])
                    total += item_size(action["Item"])
                else:
                    self._check_key(client, op, name, key)
                self._throttle(client, call, [self._partition(name, key)], reads=(kind == "Get"))
                if op == "TransactWriteItems":
                    self._note_before(call, name, key)
            if total > TRANSACTION_MAX_BYTES:
                raise _error(client, op, "ValidationException",
                             f"Transaction request cannot be larger than 4 MB ({total} bytes)", 400)

    def _primary(self, table: str, item: dict) -> dict:
        keys = self.template.tables.get(table, {}).get("")
        if keys is None:
            return item
        return {k: item[k] for k in keys if k and k in item}

    def _bill_write(self, table: str, key: dict, before: dict | None, after: dict | None, units_factor: int,
                    second: int, written: bool = True) -> None:
        size = max(item_size(before), item_size(after))
        wcu = write_units(size) * units_factor
        partition = self._partition(table, key)
        if partition:
            self.ledger.bill(partition, second, wcu=wcu)
        # An index is written only where its entry changes (DynamoDB's GSI write rules): none when
        # neither its key nor a projected attribute changed, one to add, update or remove an entry,
        # two when its key changed (the old entry removed, the new one added). An entry is sized
        # by what the index projects (KEYS_ONLY: the table's and the index's keys). A write refused
        # by its condition writes no index.
        if not written or (after is None and before is None):
            return
        for index in self.template.tables.get(table, {}):
            if not index:
                continue
            old, new = self._index_entry(table, index, before), self._index_entry(table, index, after)
            if old == new:
                continue
            keys_of = self.template.tables[table][index]
            moved = old is not None and new is not None and any(old.get(k) != new.get(k) for k in keys_of if k)
            for version, entry in ((before, old), (after, new)) if moved or new is None else ((after, new),):
                part = self._partition(table, version or {}, index)
                if part and entry is not None:
                    self.ledger.bill(part, second, wcu=write_units(item_size(entry)))

    def _index_entry(self, table: str, index: str, item: dict | None) -> dict | None:
        """The entry `item` has in `index` (None: the item is not in it: a key attribute missing)."""
        keys = self.template.tables[table][index]
        if not item or any(k and k not in item for k in keys):
            return None
        kind, extra = self.template.projections.get(table, {}).get(index, ("ALL", frozenset()))
        if kind == "ALL":
            return item
        wanted = {k for k in keys + self.template.tables[table][""] if k} | (extra if kind == "INCLUDE" else set())
        return {k: v for k, v in item.items() if k in wanted}

    def _bill_dynamodb(self, client, call: _Call, parsed: dict, ok: bool) -> None:
        p, op, second = call.params, call.operation, call.second
        table = p.get("TableName")
        consistent = bool(p.get("ConsistentRead"))
        if op in ("PutItem", "UpdateItem", "DeleteItem"):
            key = self._primary(table, p["Item"]) if op == "PutItem" else p["Key"]
            before = call.before.get(_ref(table, key))
            after = None if op == "DeleteItem" else (p["Item"] if op == "PutItem" else self._peek_after(call, table, key))
            if not ok:
                after = p["Item"] if op == "PutItem" else None  # a failed condition is billed too
            if ok and op == "UpdateItem" and item_size(after) > MAX_ITEM_BYTES:
                if not call.unreported:  # the item before unknown: never "restored" by deleting it
                    self._restore(table, key, before)
                raise _error(client, op, "ValidationException",
                             f"Item size to update has exceeded the maximum allowed size ({item_size(after)} bytes)", 400)
            self._bill_write(table, key, before, after, 1, second, written=ok)
        elif op == "GetItem" and ok:
            item = parsed.get("Item")
            size = item_size(self._peek_after(call, table, p["Key"])) if item and "ProjectionExpression" in p else item_size(item)
            self.ledger.bill(self._partition(table, p["Key"]) or table, second, rcu=read_units(size, consistent))
        elif op in ("Query", "Scan") and ok:
            size = sum(item_size(i) for i in parsed.get("Items", []))
            self.ledger.bill(call.before.get("partition") or f"{table}(scan)", second,
                             rcu=read_units(size, consistent))
        elif op == "BatchGetItem" and ok:
            unprocessed = {_ref(n, k) for n, r in (parsed.get("UnprocessedKeys") or {}).items() for k in r["Keys"]}
            for name, request in p["RequestItems"].items():
                consistent = bool(request.get("ConsistentRead"))
                if "ProjectionExpression" in request:
                    # Billed on the whole item, which the answer does not hold (nor, projected
                    # away, its key): each key asked for, as stored (a missing item costs a read).
                    for key in request["Keys"]:
                        if _ref(name, key) not in unprocessed:
                            self.ledger.bill(self._partition(name, key) or name, second,
                                             rcu=read_units(item_size(self._peek_after(call, name, key)), consistent))
                    continue
                items = parsed.get("Responses", {}).get(name, [])
                for item in items:
                    key = self._primary(name, item)
                    self.ledger.bill(self._partition(name, key) or name, second, rcu=read_units(item_size(item), consistent))
                found = {_ref(name, self._primary(name, i)) for i in items}
                for key in request["Keys"]:  # a missing item still costs a read
                    if _ref(name, key) not in found and _ref(name, key) not in unprocessed:
                        self.ledger.bill(self._partition(name, key) or name, second, rcu=read_units(0, consistent))
        elif op == "BatchWriteItem" and ok:
            unprocessed = {_ref(n, self._primary(n, (r.get("PutRequest") or {}).get("Item")
                                                 or r.get("DeleteRequest", {}).get("Key")))
                           for n, rs in (parsed.get("UnprocessedItems") or {}).items() for r in rs}
            for name, requests in p["RequestItems"].items():
                for request in requests:
                    item = request.get("PutRequest", {}).get("Item")
                    key = self._primary(name, item or request["DeleteRequest"]["Key"])
                    if _ref(name, key) in unprocessed:
                        continue
                    self._bill_write(name, key, call.before.get(_ref(name, key)), item, 1, second)
        elif op == "TransactWriteItems":
            for entry in p["TransactItems"]:
                (kind, action), = entry.items()
                name = action["TableName"]
                key = self._primary(name, action.get("Item") or action["Key"])
                after = action.get("Item") if kind == "Put" else (self._peek_after(call, name, key) if kind == "Update" and ok else None)
                self._bill_write(name, key, call.before.get(_ref(name, key)), after, 2, second, written=ok)
        elif op == "TransactGetItems" and ok:
            for entry in p["TransactItems"]:
                action = entry["Get"]
                self.ledger.bill(self._partition(action["TableName"], action["Key"]) or action["TableName"], second,
                                 rcu=2 * read_units(item_size(self._peek_after(call, action["TableName"], action["Key"])), True))

    def _note_before(self, call: _Call, table: str, key: dict) -> None:
        """The item before a write: read now, or (reports on) answered with the write itself."""
        if not self._reports:
            call.before[_ref(table, key)] = self._peek(table, key)

    def _peek_after(self, call: _Call, table: str, key: dict) -> dict | None:
        """The item after a write (or in full, for a projected read): as reported, else read now."""
        ref = _ref(table, key)
        return call.after[ref] if ref in call.after else self._peek(table, key)

    def _take_report(self, call: _Call, http_response) -> None:
        """The items the emulator read for this call under the same hold of its lock (before the
        write and after it), in the order of report_keys: no request of their own."""
        keys = report_keys(call.operation, call.params, self._primary)
        if not keys:
            return  # nothing to report (a query, a read without projection): the answer is not read again
        content = http_response.content or b""
        at = content.rfind(b'"' + REPORT_FIELD.encode() + b'":')
        try:
            reported = json.loads(content[at + len(REPORT_FIELD) + 3:-1]) if at >= 0 else None
        except ValueError:
            reported = None
        if not isinstance(reported, list) or len(reported) != len(keys):
            # Not reported (a request the emulator could not read for): billed on what the call
            # carries and the item as it now is, and an oversize update is refused but not undone.
            call.unreported = True
            logger.warning("the emulator sent no items report for %s; billed without the item before it",
                           call.operation)
            return
        for (table, key, kind), (before, after) in zip(keys, reported):
            ref = _ref(table, key)
            if kind != "read":
                call.before[ref] = before
            if kind in ("update", "read"):
                call.after[ref] = after

    def use_reports(self) -> None:
        """Have the emulator's process answer each DynamoDB call with the items the layer bills
        and checks (read in the request's own hold of the lock), instead of a read before and one
        after: the local stack's emulator, whose lock those reads held most of the time."""
        self._reports = True

    # The item as stored, without billing it: from moto's backend when it runs in this process,
    # else with an unchecked GetItem to the emulator.
    def _peek(self, table: str, key: dict) -> dict | None:
        if self._peek_fn is not None:
            try:
                return self._peek_fn(table, key)
            except LookupError:
                pass  # a table the peek does not hold: read as below
        found, item = _peek_moto(table, key, self.region)
        if found:
            return item
        token = _internal.set(True)
        try:
            return self._client().get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        except ClientError:
            return None
        finally:
            _internal.reset(token)

    def use_peek(self, peek: Callable[[str, dict], dict | None]) -> None:
        """Read the items the layer bills and checks with `peek` (the local stack's emulator
        process reads them from moto's backend, without a GetItem request through moto's API);
        `peek` raises LookupError for a table it does not hold, which is then read by GetItem."""
        self._peek_fn = peek

    def _restore(self, table: str, key: dict, before: dict | None) -> None:
        token = _internal.set(True)
        try:
            if before is None:
                self._client().delete_item(TableName=table, Key=key)
            else:
                self._client().put_item(TableName=table, Item=before)
        finally:
            _internal.reset(token)

    def same_keys(self, ids: dict[str, str]) -> None:
        """Key ids the emulator answers for another key (the local stack's key restored under a
        new id, local/state.py): a ciphertext naming one is checked on the key it is now, as a
        key on AWS keeps its one id."""
        self._kms_ids.update(ids)

    def _client(self):
        if self._raw_client is None:
            import boto3

            self._raw_client = boto3.session.Session().client("dynamodb", region_name=self.region)
        return self._raw_client

    # --- SQS, SNS, EventBridge, KMS ---------------------------------------------------------------

    def _check_sqs(self, client, call: _Call) -> None:
        p, op = call.params, call.operation
        if op == "ReceiveMessage":
            queue = _queue_arn(p.get("QueueUrl", ""))
            count = self.in_flight.count(queue, self.now_ms())
            if count >= self.limits.sqs_in_flight:
                wait = p.get("WaitTimeSeconds")
                if wait is None:
                    wait = self._queue_default(p["QueueUrl"], "ReceiveMessageWaitTimeSeconds")
                if int(wait):
                    call.answer_empty = True  # a long poll past the limit: no error, no message (_empty_receive)
                else:
                    raise _error(client, op, "OverLimit", f"The maximum number of in flight messages ({count}) "
                                 "is reached", 403)
        elif op == "SetQueueAttributes":  # the attributes read once (_queue_default) are read again
            for key in [k for k in list(self.in_flight.defaults) if k[0] == p.get("QueueUrl")]:
                self.in_flight.defaults.pop(key, None)
        if op in ("SendMessageBatch", "DeleteMessageBatch", "ChangeMessageVisibilityBatch"):
            entries = p.get("Entries", [])
            if len(entries) > SQS_MAX_BATCH_ENTRIES:
                raise _error(client, op, "TooManyEntriesInBatchRequest",
                             f"Maximum number of entries per request are {SQS_MAX_BATCH_ENTRIES}. You have sent "
                             f"{len(entries)}.", 400)
            if op == "SendMessageBatch":
                sizes = [_sqs_size(e) for e in entries]
                if any(s > SQS_MAX_MESSAGE_BYTES for s in sizes) or sum(sizes) > SQS_MAX_BATCH_BYTES:
                    raise _error(client, op, "BatchRequestTooLong",
                                 f"Batch requests cannot be longer than {SQS_MAX_BATCH_BYTES} bytes. You have sent "
                                 f"{sum(sizes)} bytes.", 400)
        if op in ("SendMessage", "SendMessageBatch"):
            # The queue's own MaximumMessageSize (1,024 B to 1 MiB, default 1 MiB), of each message;
            # a batch with one entry over it is refused whole, as the emulator does for its body.
            limit = min(SQS_MAX_MESSAGE_BYTES, self._queue_default(p.get("QueueUrl", ""), "MaximumMessageSize")
                        if self._queue_attributes else SQS_MAX_MESSAGE_BYTES)
            if any(_sqs_size(m) > limit for m in (p.get("Entries", []) if op == "SendMessageBatch" else [p])):
                raise _error(client, op, "InvalidParameterValue",
                             f"One or more parameters are invalid. Reason: Message must be shorter than "
                             f"{limit} bytes.", 400)

    def _bill_sqs(self, client, call: _Call, parsed: dict, ok: bool) -> None:
        """The queue's in-flight messages, as SQS counts them: received, until deleted or visible
        again (the receive's visibility timeout or the queue's, changed by ChangeMessageVisibility)."""
        p, op, now = call.params, call.operation, self.now_ms()
        if not ok or op not in ("ReceiveMessage", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch",
                                "DeleteMessage", "DeleteMessageBatch"):
            return
        queue = _queue_arn(p.get("QueueUrl", ""))
        if op == "ReceiveMessage":
            messages = parsed.get("Messages") or []
            if messages:
                seconds = p.get("VisibilityTimeout")
                if seconds is None:
                    seconds = self._queue_default(p["QueueUrl"], "VisibilityTimeout")
                for message in messages:
                    self.in_flight.received(queue, message["MessageId"], message["ReceiptHandle"],
                                            now + int(seconds) * 1000)
            return
        if op == "ChangeMessageVisibility":
            entries, done = [p], None
        elif op == "DeleteMessage":
            entries, done = [p], None
        else:
            entries, done = p.get("Entries", []), {e.get("Id") for e in parsed.get("Successful") or []}
        for entry in entries:
            if done is not None and entry.get("Id") not in done:
                continue
            seconds = 0 if op.startswith("Delete") else int(entry.get("VisibilityTimeout") or 0)
            self.in_flight.changed(entry.get("ReceiptHandle", ""), now + seconds * 1000)

    def _queue_default(self, url: str, attribute: str) -> int:
        """A queue attribute the checks need (VisibilityTimeout, ReceiveMessageWaitTimeSeconds,
        MaximumMessageSize), read once per queue (again after a SetQueueAttributes of it) without a
        check of its own."""
        key = (url, attribute)
        if key not in self.in_flight.defaults:
            token = _internal.set(True)
            try:
                if self._raw_sqs is None:  # a client of its own: the caller's counts no call of the layer's
                    import boto3

                    self._raw_sqs = boto3.session.Session().client("sqs", region_name=self.region)
                answer = self._raw_sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[attribute])
                self.in_flight.defaults[key] = int(answer.get("Attributes", {}).get(attribute) or 0)
                if attribute not in answer.get("Attributes", {}):
                    self.in_flight.defaults[key] = _QUEUE_FALLBACKS.get(attribute, 0)
            except ClientError:
                self.in_flight.defaults[key] = _QUEUE_FALLBACKS.get(attribute, 0)
            finally:
                _internal.reset(token)
        return self.in_flight.defaults[key]

    def _check_sns(self, client, call: _Call) -> None:
        p, op = call.params, call.operation
        if op == "Publish" and _sns_size(p) > SNS_MAX_MESSAGE_BYTES:
            raise _error(client, op, "InvalidParameter",
                         f"Invalid parameter: Message too long ({_sns_size(p)} bytes > {SNS_MAX_MESSAGE_BYTES})", 400)
        if op == "PublishBatch":
            entries = p.get("PublishBatchRequestEntries", [])
            if len(entries) > SNS_MAX_BATCH_ENTRIES:
                raise _error(client, op, "TooManyEntriesInBatchRequest",
                             f"The batch request contains more entries than permissible ({len(entries)})", 400)
            if sum(_sns_size(e) for e in entries) > SNS_MAX_BATCH_BYTES:
                raise _error(client, op, "BatchRequestTooLong",
                             f"The length of all the messages put together is more than the limit "
                             f"({SNS_MAX_BATCH_BYTES} bytes)", 400)

    def _check_events(self, client, call: _Call) -> None:
        if call.operation != "PutEvents":
            return
        entries = call.params.get("Entries", [])
        if len(entries) > EVENTS_MAX_ENTRIES:
            raise _error(client, call.operation, "ValidationException",
                         f"1 validation error detected: Value at 'entries' failed to satisfy constraint: Member "
                         f"must have length less than or equal to {EVENTS_MAX_ENTRIES}", 400)
        for entry in entries:
            size = (14 if entry.get("Time") else 0) + sum(len(str(entry.get(k) or "").encode("utf-8"))
                                                          for k in ("Source", "DetailType", "Detail")) \
                + sum(len(r.encode("utf-8")) for r in entry.get("Resources") or [])
            if size > EVENTS_MAX_ENTRY_BYTES:
                raise _error(client, call.operation, "ValidationException",
                             f"Total size of the entries in the request is over the limit ({size} bytes > "
                             f"{EVENTS_MAX_ENTRY_BYTES}).", 400)

    def _check_ecs(self, client, call: _Call) -> None:
        """RunTask over Fargate's rates (the calls', then the tasks launched) is throttled."""
        if call.operation != "RunTask":
            return
        now = self.now_ms()
        if not (self.ledger.take_tokens("ecs:RunTask", now, *self.limits.run_task_calls)
                and self.ledger.take_tokens("fargate:launches", now, *self.limits.fargate_launches,
                                            count=int(call.params.get("count") or 1))):
            raise _error(client, call.operation, "ThrottlingException", "Rate exceeded", 400)
    def _check_sse_kms(self, client, call: _Call, caller: tuple | None) -> None:
        """A send to a queue or topic under a customer-managed key: the key must be usable, and the
        caller allowed kms:GenerateDataKey and kms:Decrypt on it through the service (strict_kms.py);
        a caller allowed once is not asked again within SQS's data-key reuse period."""
        address = strict_kms.address_of(call.service, call.params)
        who = caller[0] if caller else None
        if not address or self._sse_reuse.get((who, address), 0) > self.now_ms():
            return
        token = _internal.set(True)
        try:
            key = strict_kms.sse_key(self._tag_client, call.service, address, REGION, ACCOUNT,
                                     {**self.template.own_keys, **self._kms_ids})
        finally:
            _internal.reset(token)
        if key is None:  # not asked again for a while either (the layer's shortcut: encryption set later waits)
            self._sse_reuse[(who, address)] = self.now_ms() + strict_kms.unencrypted_recheck_ms(call.service)
            return
        refused = strict_kms.key_state_refusal(client, call.operation, call.service, key)
        if refused is not None:
            raise refused
        if caller is not None:
            who, statements, principal, tags = caller
            context = {**self._condition_context(call, principal, tags),
                       **strict_kms.condition_keys(call.service, address, key, REGION, ACCOUNT)}
            for action in strict_kms.SSE_KEY_ACTIONS:
                self._decide(client, f"{who}(via {call.service})", statements, action, key.arn, context, call,
                             refuse=functools.partial(strict_kms.refusal, client, call.operation, call.service,
                                                      "denied"))
        self._sse_reuse[(who, address)] = self.now_ms() + key.reuse_seconds * 1000

    def _check_kms(self, client, call: _Call) -> None:
        if call.operation not in KMS_CRYPTO_OPERATIONS:
            return
        if self.ledger.count_kms(call.second) > self.limits.kms_per_second:
            raise _error(client, call.operation, "ThrottlingException",
                         "You have exceeded the rate at which you may call KMS. Reduce the frequency of your calls.",
                         400)


@dataclass
class _TablesOnly:
    """A template's stand-in for a billing-only layer: key schemas, no policies."""
    tables: dict
    policies: dict = field(default_factory=dict)
    resource_denies: list = field(default_factory=list)


@functools.lru_cache(maxsize=8)
def _parsed(template_json: str, physical_json: str) -> Template:
    """The template's policies parsed once per template and stack (the same for every test)."""
    return Template(json.loads(template_json), json.loads(physical_json))


def _ref(table: str, key: dict) -> str:
    return table + json.dumps(key, sort_keys=True, default=str)


def _access_key(client) -> str | None:
    """The access key id a client signs with (None: unsigned, or none resolved yet)."""
    credentials = getattr(getattr(client, "_request_signer", None), "_credentials", None)
    return getattr(credentials, "access_key", None) if credentials is not None else None


def _queue_arn(url: str) -> str:
    parts = url.rstrip("/").split("/")
    account = parts[-2] if len(parts) >= 2 and parts[-2].isdigit() else ACCOUNT
    return f"arn:aws:sqs:{REGION}:{account}:{parts[-1]}"


def _moto_ciphertext_key(blob: Any) -> str | None:
    # The emulator's ciphertext starts with the key id (moto's own format; AWS's is opaque).
    raw = _raw_bytes(blob) if not isinstance(blob, (bytes, bytearray)) else bytes(blob)
    try:
        text = raw[:36].decode("ascii")
    except UnicodeDecodeError:
        return None
    return text if re.fullmatch(r"[0-9a-f-]{36}", text) else None


def _attributes_size(attributes: dict | None) -> int:
    total = 0
    for name, value in (attributes or {}).items():
        total += len(name.encode()) + len(value.get("DataType", "").encode())
        total += len((value.get("StringValue") or "").encode()) + len(_raw_bytes(value["BinaryValue"])
                                                                      if "BinaryValue" in value else b"")
    return total


def _sqs_size(params: dict) -> int:
    return len(params.get("MessageBody", "").encode("utf-8")) + _attributes_size(params.get("MessageAttributes"))


def _sns_size(params: dict) -> int:
    return len(params.get("Message", "").encode("utf-8")) + _attributes_size(params.get("MessageAttributes"))


def _error(client, operation: str, code: str, message: str, status: int) -> ClientError:
    """The exception botocore raises for an error answer: the client's modeled class for the code."""
    response = {"Error": {"Code": code, "Message": message},
                "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {}, "RetryAttempts": 0}}
    return client.exceptions.from_code(code)(response, operation)


# ---------------------------------------------------------------------------------------------
# Reports: the items a DynamoDB call's bill needs, read by the emulator's process in the call's own
# hold of its lock and returned in the answer's body (a field botocore's parser ignores), for a
# request that asks with REPORT_HEADER.

REPORT_FIELD = "__jobschedItems"


def report_keys(operation: str, request: dict, primary: Callable[[str, dict], dict]) -> list[tuple[str, dict, str]]:
    """(table, key, kind) for each item the bill of `operation` needs, in the request's order.
    kind: "put", "delete", "check" (the item before), "update" (before and after), "read" (the
    whole item, for a projected read)."""
    if operation == "PutItem":
        return [(request["TableName"], primary(request["TableName"], request["Item"]), "put")]
    if operation in ("UpdateItem", "DeleteItem"):
        return [(request["TableName"], request["Key"], "update" if operation == "UpdateItem" else "delete")]
    if operation == "GetItem":
        return [(request["TableName"], request["Key"], "read")] if "ProjectionExpression" in request else []
    if operation == "BatchGetItem":
        return [(name, key, "read") for name, r in request["RequestItems"].items()
                if "ProjectionExpression" in r for key in r["Keys"]]
    if operation == "BatchWriteItem":
        return [(name, primary(name, r["PutRequest"]["Item"]), "put") if "PutRequest" in r
                else (name, primary(name, r["DeleteRequest"]["Key"]), "delete")
                for name, rs in request["RequestItems"].items() for r in rs]
    if operation == "TransactWriteItems":
        kinds = {"Put": "put", "Update": "update", "Delete": "delete", "ConditionCheck": "check"}
        return [(action["TableName"], primary(action["TableName"], action.get("Item") or action["Key"]), kinds[kind])
                for entry in request["TransactItems"] for kind, action in entry.items()]
    if operation == "TransactGetItems":
        return [(e["Get"]["TableName"], e["Get"]["Key"], "read") for e in request["TransactItems"]]
    return []


def items_report(operation: str, request: dict) -> Callable[[], list] | None:
    """In the emulator's process, with its lock held, before the request is answered: reads the
    items before, and returns what reads them after ([before, after] per report_keys entry).
    None for a request with nothing to report (or on tables this process does not hold)."""
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.models.dynamo_type import DynamoType

    backend = dynamodb_backends.get(ACCOUNT, {}).get(REGION) if ACCOUNT in dynamodb_backends else None
    if backend is None:
        return None

    def primary(table: str, item: dict) -> dict:
        stored = backend.tables.get(table)
        if stored is None:
            return item
        return {k: item[k] for k in (stored.hash_key_attr, stored.range_key_attr) if k and k in item}

    def peek(table: str, key: dict) -> dict | None:
        # A binary key value arrives base64 in the request's JSON; moto keeps it as bytes.
        stored_key = {name: {"B": base64.b64decode(value["B"])} if isinstance(value, dict) and "B" in value else value
                      for name, value in key.items()}
        return _peek_locked(dynamodb_backends, DynamoType, table, stored_key)[1]

    try:
        keys = report_keys(operation, request, primary)
        if not keys:
            return None
        before = [peek(table, key) if kind != "read" else None for table, key, kind in keys]
    except Exception:  # noqa: BLE001 - a request moto refuses: it answers with its error, unreported
        return None

    def finish() -> list:
        return [[b, peek(table, key) if kind in ("update", "read") else None]
                for (table, key, kind), b in zip(keys, before)]
    return finish


def _peek_moto(table: str, key: dict, region: str = REGION) -> tuple[bool, dict | None]:
    """(found the table in this process's moto, the item's wire form)."""
    try:
        from moto.dynamodb.models import dynamodb_backends
        from moto.dynamodb.models.dynamo_type import DynamoType
    except ImportError:  # pragma: no cover - moto is a dev dependency
        return False, None
    from jobsched.local.emulator import EMULATOR_LOCK

    with EMULATOR_LOCK:  # moto is not thread-safe: read it as a request would
        return _peek_locked(dynamodb_backends, DynamoType, table, key, region)


def _peek_locked(dynamodb_backends, DynamoType, table: str, key: dict,
                 region: str = REGION) -> tuple[bool, dict | None]:
    backend = dynamodb_backends.get(ACCOUNT, {}).get(region) if ACCOUNT in dynamodb_backends else None
    stored = backend.tables.get(table) if backend is not None else None
    if stored is None:
        return False, None
    hash_name, range_name = stored.hash_key_attr, stored.range_key_attr
    if hash_name not in key or (range_name and range_name not in key):
        return True, None  # no such item (DynamoDB refuses the request itself)
    item = stored.get_item(DynamoType(key[hash_name]), DynamoType(key[range_name]) if range_name else None)
    return True, (item.to_json()["Attributes"] if item is not None else None)


# ---------------------------------------------------------------------------------------------
# Installation

_active: StrictAws | None = None
_installed = False


def activate(layer: StrictAws | None) -> StrictAws | None:
    """Make `layer` the one every client of the process answers to (None: off); returns the previous."""
    global _active
    previous, _active = _active, layer
    return previous


def active() -> StrictAws | None:
    return _active


def _before(client_ref, params, model, context, **_):
    layer = _active
    if layer is not None:
        layer.before(client_ref(), model, params, context)


def _after(client_ref, http_response, parsed, model, context, **_):
    layer = _active
    if layer is not None:
        layer.after(client_ref(), http_response, parsed, model, context)


def _empty_receive(context, **_):
    """A long-polling ReceiveMessage past the queue's in-flight limit (StrictAws._check_sqs): AWS
    answers no message and no error; so does this, without asking the emulator."""
    call = context.get("strict_aws")
    if call is None or not call.answer_empty:
        return None
    from botocore.awsrequest import AWSResponse

    return AWSResponse("", 200, {}, None), {"Messages": [], "ResponseMetadata": {"HTTPStatusCode": 200}}


def _ask_report(request, **_):
    """Only a call whose bill needs items asks for them: a query, a scan or a whole-item read
    would have the emulator read its request again under its lock for nothing."""
    layer = _active
    call = request.context.get("strict_aws")
    if layer is not None and layer._reports and call is not None and \
            report_keys(call.operation, call.params, layer._primary):
        request.headers[REPORT_HEADER] = "1"


def install() -> None:
    """Hook every botocore client built from now on (idempotent). The hooks do nothing while no
    layer is active. Also: a thread of a function's thread pool acts as that function (in Lambda
    the whole process is the function)."""
    global _installed
    if _installed:
        return
    import weakref

    import botocore.session

    original = botocore.session.Session.create_client

    @functools.wraps(original)
    def create_client(self, *args, **kwargs):
        client = original(self, *args, **kwargs)
        ref = weakref.ref(client)
        # Last: after boto3's resource layer has turned Python values into DynamoDB's wire form.
        client.meta.events.register_last("before-parameter-build", functools.partial(_before, ref))
        # First: before boto3's resource layer turns the answer's wire form into Python values.
        # (a handler on the service's own event name runs before those on its parents).
        service = client.meta.service_model.service_id.hyphenize()
        client.meta.events.register_first(f"after-call.{service}", functools.partial(_after, ref))
        if service == "dynamodb":
            client.meta.events.register("before-sign.dynamodb", _ask_report)
        if service == "sqs":
            client.meta.events.register_first("before-call.sqs.ReceiveMessage", _empty_receive)
        return client

    botocore.session.Session.create_client = create_client
    original_submit = ThreadPoolExecutor.submit

    def submit(self, fn, /, *args, **kwargs):
        return original_submit(self, contextvars.copy_context().run, fn, *args, **kwargs)

    ThreadPoolExecutor.submit = submit
    _lift_moto_item_limit()
    _installed = True


def _lift_moto_item_limit() -> None:
    """moto refuses items past 405,000 bytes by a count of its own (not DynamoDB's formula), which
    refuses items AWS stores (400 KB = 409,600 bytes by AWS's formula) and sums the whole item on
    every attribute set. While a layer is active, the layer alone decides, by AWS's formula."""
    try:
        from moto.dynamodb.models import dynamo_type
    except ImportError:  # pragma: no cover - moto is a dev dependency
        return
    limited = dynamo_type.LimitedSizeDict
    original = limited.__setitem__

    def setitem(self, key, value):
        if _active is None:
            return original(self, key, value)
        return dict.__setitem__(self, key, value)

    limited.__setitem__ = setitem
