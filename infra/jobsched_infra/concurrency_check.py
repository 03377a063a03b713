"""Before `make deploy`: does the account's Lambda concurrency leave room for what the stacks reserve?

Lambda refuses a function's reserved concurrency that would leave the account fewer than 100
unreserved executions in the Region (or, on an account whose whole limit is below 100, any
reservation below its limit: "You can reserve up to the Unreserved account concurrency value ...,
minus 100 for functions that don't have reserved concurrency", Lambda Developer Guide,
"Configuring reserved concurrency"). New accounts start with a low limit, so the default stack's
reservations fail in the middle of `cdk deploy`. This check reads the account's settings
(`lambda:GetAccountSettings`: ConcurrentExecutions, UnreservedConcurrentExecutions) and what the
synthesized templates reserve, and says what to do before anything is deployed.

`check` is the decision (pure: settings and template in, a verdict out); `main` gathers the
settings per Region with boto3 for `make deploy` (python -m jobsched_infra.concurrency_check cdk.out)."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

MIN_UNRESERVED = 100
QUOTA_CODE = "L-B99A9384"  # Service Quotas: AWS Lambda, "Concurrent executions"
NO_RESERVATIONS = "-c reservedConcurrency=off"


@dataclass(frozen=True)
class Verdict:
    ok: bool
    message: str


def reserved_by(template: dict) -> dict[str, int]:
    """Each function's ReservedConcurrentExecutions in the template (logical id -> executions)."""
    out = {}
    for logical, resource in template.get("Resources", {}).items():
        value = resource.get("Properties", {}).get("ReservedConcurrentExecutions")
        if resource.get("Type") == "AWS::Lambda::Function" and isinstance(value, int):
            out[logical] = value
    return out


def check(settings: dict, templates: list[dict], held: int = 0, region: str = "") -> Verdict:
    """`settings`: GetAccountSettings' answer in the Region; `templates`: the stacks deployed there;
    `held`: what those stacks' functions reserve now (a redeploy: already out of the unreserved)."""
    limit = settings["AccountLimit"]
    total, unreserved = int(limit["ConcurrentExecutions"]), int(limit["UnreservedConcurrentExecutions"])
    wanted = sum(sum(reserved_by(t).values()) for t in templates)
    floor = min(MIN_UNRESERVED, total)
    left = unreserved + held - wanted
    where = f" in {region}" if region else ""
    if left >= floor:
        return Verdict(True, f"Lambda concurrency{where}: the stack reserves {wanted} of the account's {total} "
                             f"({unreserved + held} unreserved before it, {left} after; at least {floor} must stay)")
    needed = total + (floor - left)
    return Verdict(False, (
        f"Lambda concurrency{where}: the stack reserves {wanted} concurrent executions, but the account's limit is "
        f"{total} with {unreserved} unreserved now{f' ({held} of them held by this stack already)' if held else ''}, "
        f"and Lambda keeps at least {floor} unreserved: the deployment would fail when CloudFormation sets the "
        f"reservations. Either\n"
        f"  - request a higher limit: Service Quotas, AWS Lambda, \"Concurrent executions\" (quota code "
        f"{QUOTA_CODE}), to at least {needed}{where} (aws service-quotas request-service-quota-increase "
        f"--service-code lambda --quota-code {QUOTA_CODE} --desired-value {needed}); or\n"
        f"  - deploy without reserved concurrency: make deploy CDK_CONTEXT='{NO_RESERVATIONS}' (the API, the tick "
        f"and the authorizer then share the account's pool with the worker: docs/operations.md, "
        f"\"Lambda concurrency\"), or lower apiReservedConcurrency / authorizerReservedConcurrency."))


def stacks_in(assembly: Path, default_region: str) -> dict[str, list[tuple[str, dict]]]:
    """The cloud assembly's stacks by Region: (stack name, template) each."""
    manifest = json.loads((assembly / "manifest.json").read_text())
    by_region: dict[str, list[tuple[str, dict]]] = {}
    for name, artifact in manifest.get("artifacts", {}).items():
        if artifact.get("type") != "aws:cloudformation:stack":
            continue
        region = artifact.get("environment", "").rsplit("/", 1)[-1]
        region = default_region if region in ("", "unknown-region") else region
        template = json.loads((assembly / artifact["properties"]["templateFile"]).read_text())
        stack_name = artifact.get("properties", {}).get("stackName") or name
        by_region.setdefault(region, []).append((stack_name, template))
    return by_region


def held_by(cloudformation, lambda_client, stack_name: str) -> int:
    """What the deployed stack's functions reserve now (0: not deployed yet)."""
    from botocore.exceptions import ClientError

    # ListStackResources, page by page: DescribeStackResources answers only a stack's first 100
    # resources (CloudFormation API reference), and the default stack has about that many.
    resources = []
    token = None
    try:
        while True:
            page = cloudformation.list_stack_resources(StackName=stack_name, **({"NextToken": token} if token else {}))
            resources.extend(page.get("StackResourceSummaries") or [])
            token = page.get("NextToken")
            if not token:
                break
    except ClientError:
        return 0  # no such stack: a first deployment
    held = 0
    for resource in resources:
        if resource["ResourceType"] == "AWS::Lambda::Function" and resource.get("PhysicalResourceId"):
            answer = lambda_client.get_function_concurrency(FunctionName=resource["PhysicalResourceId"])
            held += int(answer.get("ReservedConcurrentExecutions") or 0)
    return held


def main(argv: list[str], client_for: Callable[[str, str], Any] | None = None, out=sys.stdout) -> int:
    """Check every Region of the assembly in argv[0]; 1 (and what to do) if any would fail."""
    import boto3

    session = boto3.session.Session()
    client_for = client_for or (lambda service, region: session.client(service, region_name=region))
    failed = False
    for region, stacks in stacks_in(Path(argv[0] if argv else "cdk.out"), session.region_name or "").items():
        if not region:
            print("Lambda concurrency: no Region (set AWS_REGION or the profile's region); not checked", file=out)
            return 1
        lambda_client = client_for("lambda", region)
        held = sum(held_by(client_for("cloudformation", region), lambda_client, name) for name, _ in stacks)
        verdict = check(lambda_client.get_account_settings(), [t for _, t in stacks], held, region)
        print(verdict.message, file=out)
        failed |= not verdict.ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
