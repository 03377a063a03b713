"""The documented `cdk deploy -c key=value` commands, with their values as the CDK CLI hands them
over (a string, after the shell's quoting), through StackConfig.from_context."""
import json
import re
import shlex
from pathlib import Path

import pytest

from jobsched_infra.config import ConfigError, StackConfig

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "docs" / "guide").glob("*.md"))]
# `-c key=value`, the value as typed: quoted for the shell, or up to a space or a backquote.
OPTION = re.compile(r"""-c ([A-Za-z]+)=('[^']*'|"[^"]*"|[^\s`"]+)""")
# What the docs leave as "...": a value of the documented kind.
SAMPLES = {"ecsTaskDefinitions": "arn:aws:ecs:us-east-1:123456789012:task-definition/app:3",
           "ecsClusters": "arn:aws:ecs:us-east-1:123456789012:cluster/jobs",
           "ecsTaskRoles": "arn:aws:iam::123456789012:role/app"}
# The front door's keys go together, with the regions its certificates are for.
FRONT_DOOR = {"domainName", "hostedZoneId", "certificateArns"}


class Node:
    def __init__(self, context: dict[str, str]) -> None:
        self.context = context

    def try_get_context(self, key):
        return self.context.get(key)


def documented_options() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        for key, typed in OPTION.findall(doc.read_text()):
            [value] = shlex.split(typed)  # what the shell hands the CLI: a string
            value = value.replace("arn:...", SAMPLES.get(key, "arn:..."))
            for one in value.split("|") if "|" in value and "=" not in value else [value]:
                if key == "key" or one in ("...", "N", "NAME") or one.startswith("<") or one.endswith(",..."):
                    continue  # a placeholder, not a value
                found.append((key, one))
    return found


OPTIONS = documented_options()


def test_the_docs_document_the_list_valued_keys_in_their_json_form():
    keys = {key for key, value in OPTIONS if value.startswith("[")}
    assert {"ecsTaskDefinitions", "ecsClusters", "ecsTaskRoles"} <= keys, OPTIONS


@pytest.mark.parametrize("key,value", OPTIONS, ids=[f"{k}={v[:40]}" for k, v in OPTIONS])
def test_each_documented_context_value_as_the_cli_passes_it(key, value):
    context = {key: value}
    if key in FRONT_DOOR:
        context = {k: v for k, v in OPTIONS if k in FRONT_DOOR} | {"regions": "us-east-1,eu-west-1"}
    config = StackConfig.from_context(Node(context))
    if key in SAMPLES:
        items = getattr(config, re.sub(r"([A-Z])", r"_\1", key).lower())
        given = json.loads(value) if value.startswith("[") else value.split(",")  # a sample, or the docs' ARNs
        assert items and set(items) == {item.strip() for item in given}, items


@pytest.mark.parametrize("key,field,items", [
    ("ecsTaskDefinitions", "ecs_task_definitions", [SAMPLES["ecsTaskDefinitions"], SAMPLES["ecsTaskDefinitions"] + "9"]),
    ("ecsClusters", "ecs_clusters", [SAMPLES["ecsClusters"], SAMPLES["ecsClusters"] + "-2"]),
    ("ecsTaskRoles", "ecs_task_roles", [SAMPLES["ecsTaskRoles"], SAMPLES["ecsTaskRoles"] + "-2"]),
    ("targetArnPatterns", "target_arn_patterns", ["arn:aws:sqs:*:111122223333:*", "arn:aws:sns:*:111122223333:*"]),
    ("regions", "regions", ["us-east-1", "eu-west-1"]),
])
def test_a_list_valued_key_takes_a_list_a_json_array_string_and_a_comma_string_alike(key, field, items):
    import json
    for given in (items, json.dumps(items), " " + json.dumps(items, indent=1), ",".join(items)):
        assert getattr(StackConfig.from_context(Node({key: given})), field) == tuple(items), given


def test_an_object_valued_key_takes_its_json_string_and_bad_json_names_the_key():
    config = StackConfig.from_context(Node({"laneMaxConcurrency": '{"HIGH": 300}'}))
    assert dict(config.lane_max_concurrency)["HIGH"] == 300
    with pytest.raises(ConfigError, match="'ecsClusters' is not valid JSON"):
        StackConfig.from_context(Node({"ecsClusters": '["arn:aws:ecs:us-east-1:1:cluster/a"'}))
    with pytest.raises(ConfigError, match="'targetArnPatterns' must be a list"):
        StackConfig.from_context(Node({"targetArnPatterns": '{"a": 1}'}))
