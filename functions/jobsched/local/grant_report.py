"""Grants that no call uses: each principal's allowed IAM actions in the synthesized template,
against the (caller, action) pairs the strict layer allowed during a run or a test suite
(`StrictAws.ledger.allowed`). A grant no call made is a permission an attacker with that role's
credentials has and the code does not need (docs/architecture.md, "Grants: what the calls use").

The caller is named as the strict layer names it: a function by its handler module ("api",
"worker", ...), a role session by its role's name and session tags ("Jobsched-TargetAccessRole...(
jobsched:tenant=a)"), reported under the role's name. `JOBSCHED_GRANT_REPORT=<file>` makes the
test suite write the report of everything its tests called (tests/conftest.py)."""
from __future__ import annotations

import fnmatch
from collections.abc import Iterable

from jobsched.local.stack import role_arn

# Actions a function's role holds for the runtime itself, not for our code's calls.
RUNTIME_ACTIONS = frozenset({"logs:CreateLogStream", "logs:PutLogEvents", "xray:PutTraceSegments",
                             "xray:PutTelemetryRecords"})


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def granted(template: dict) -> dict[str, set[str]]:
    """principal → the actions its role's Allow statements name (patterns as written): a
    function's role under the function's name, every other role under its name."""
    resources = template["Resources"]
    by_role: dict[str, str] = {}
    for logical, resource in resources.items():
        if resource["Type"] == "AWS::IAM::Role":
            by_role.setdefault(logical, role_arn(logical).rsplit("/", 1)[-1])
    for resource in resources.values():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::Lambda::Function" and isinstance(props.get("Role"), dict) \
                and props.get("Handler", "").startswith("jobsched."):
            by_role[props["Role"]["Fn::GetAtt"][0]] = props["Handler"].split(".")[-2]
    actions: dict[str, set[str]] = {}
    for logical, resource in resources.items():
        props = resource.get("Properties", {})
        documents = []
        if resource["Type"] == "AWS::IAM::Policy":
            roles = [r.get("Ref") for r in props.get("Roles", []) if isinstance(r, dict)]
            documents = [(role, props["PolicyDocument"]) for role in roles]
        elif resource["Type"] == "AWS::IAM::Role":
            documents = [(logical, inline["PolicyDocument"]) for inline in props.get("Policies", [])]
        for role, document in documents:
            if role not in by_role:
                continue
            for statement in document.get("Statement", []):
                if statement.get("Effect", "Allow") == "Allow" and "Action" in statement:
                    actions.setdefault(by_role[role], set()).update(_as_list(statement["Action"]))
    return actions


def unused(grants: dict[str, set[str]], used: Iterable[tuple[str, str]],
           principals: Iterable[str] | None = None) -> dict[str, list[str]]:
    """principal → its granted actions that no used action matches (an action pattern such as
    `dynamodb:Get*` counts as used when any call it allows was made), for `principals` (default:
    every principal that made a call; one that made none tells nothing about a run that never
    started it). The runtime's own actions (logs, X-Ray) are left out."""
    calls: dict[str, set[str]] = {}
    for caller, action in used:
        calls.setdefault(caller.split("(", 1)[0], set()).add(action.lower())
    report = {}
    for principal in (calls if principals is None else principals):
        made = calls.get(principal, set())
        idle = sorted(a for a in grants.get(principal, ()) if a not in RUNTIME_ACTIONS
                      and not any(fnmatch.fnmatchcase(m, a.lower()) for m in made))
        if idle:
            report[principal] = idle
    return report


def text(report: dict[str, list[str]]) -> str:
    """One line per principal: `api: sqs:SendMessage, ...`; empty when every grant was used."""
    return "\n".join(f"{principal}: {', '.join(actions)}" for principal, actions in sorted(report.items()))
