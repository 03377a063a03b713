"""IAM evaluation: the synthesized template's policies as the strict layer reads them (its
statements, trust policies and resource policies' denies, every reference resolved to the
emulator's ARNs) and the condition operators IAM applies to a request's context."""
from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from jobsched.local.stack import role_arn
from jobsched.local.strict_aws.base import ACCOUNT, REGION, StrictLayerError


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


def _key_names(schema: list[dict]) -> tuple[str, str | None]:
    hash_key = next(k["AttributeName"] for k in schema if k["KeyType"] == "HASH")
    range_key = next((k["AttributeName"] for k in schema if k["KeyType"] == "RANGE"), None)
    return hash_key, range_key


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
