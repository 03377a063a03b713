"""Create the synthesized template's data resources in the emulator's CloudFormation and read
each function's environment from the template, so local and cloud cannot drift."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

# What the emulator creates: the resources that hold state. Functions run in-process, rules are
# replaced by the local tick loop, the REST API by the loopback adapter.
# (SNS topics: the worker publishes absence alerts to the deployment's alert topic.)
DATA_RESOURCE_TYPES = ("AWS::DynamoDB::Table", "AWS::SQS::Queue", "AWS::KMS::Key", "AWS::SNS::Topic")
STACK_NAME = "Jobsched"
JOBS_LOGICAL_PREFIX = "StorageJobs"
ACCOUNT = "123456789012"  # the emulator's account


def role_arn(logical: str) -> str:
    """The ARN the local stack gives a role of the template. Roles are not created in the emulator
    (its STS answers AssumeRole for any ARN); the strict layer names the same roles the same way."""
    return f"arn:aws:iam::{ACCOUNT}:role/{STACK_NAME}-{logical}"


class TemplateError(RuntimeError):
    pass


def function_name(handler: str) -> str:
    """'jobsched.handlers.api.handler' → 'api'."""
    parts = handler.split(".")
    if len(parts) < 2:
        raise TemplateError(f"unexpected handler {handler!r}")
    return parts[-2]


def data_template(template: dict) -> dict:
    resources = {
        logical: resource
        for logical, resource in template["Resources"].items()
        if resource["Type"] in DATA_RESOURCE_TYPES
    }
    return {"AWSTemplateFormatVersion": "2010-09-09", "Resources": resources}


@dataclass
class LocalStack:
    envs: dict[str, dict[str, str]]  # function name → environment, as in the template
    physical_ids: dict[str, str]  # logical id → table name or queue URL

    @classmethod
    def create(cls, session, template: dict) -> "LocalStack":
        cfn = session.client("cloudformation")
        cfn.create_stack(StackName=STACK_NAME, TemplateBody=json.dumps(data_template(template)))
        resources = cfn.describe_stack_resources(StackName=STACK_NAME)["StackResources"]
        physical = {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in resources}
        return cls(function_envs(template, physical), physical)


def function_envs(template: dict, physical: dict[str, str]) -> dict[str, dict[str, str]]:
    envs: dict[str, dict[str, str]] = {}
    for logical, resource in template["Resources"].items():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        props = resource["Properties"]
        variables = props.get("Environment", {}).get("Variables", {})
        envs[function_name(props["Handler"])] = {k: _resolve(v, physical, f"{logical}.{k}", template["Resources"])
                                                 for k, v in variables.items()}
    return envs


def reserved_concurrency(template: dict, name: str) -> int | None:
    """The function's reserved concurrency in the template (None: not reserved)."""
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::Lambda::Function" and function_name(props["Handler"]) == name:
            value = props.get("ReservedConcurrentExecutions")
            return int(value) if isinstance(value, int) else None
    return None


def _resolve(value: Any, physical: dict[str, str], where: str, resources: dict | None = None) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Ref" in value and value["Ref"] in physical:
        return physical[value["Ref"]]
    if value == {"Ref": "AWS::AccountId"}:
        return ACCOUNT
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        logical, attribute = value["Fn::GetAtt"]
        if attribute == "Arn" and (resources or {}).get(logical, {}).get("Type") == "AWS::IAM::Role":
            return role_arn(logical)
    raise TemplateError(f"{where}: cannot resolve {value!r} locally; only Refs to tables and queues, the account "
                        "and role ARNs are supported")
