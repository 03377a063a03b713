"""Container networks in the deployment: the context key ecsNetworks (docs/operations.md) and the
setting the API and the worker read (functions/jobsched/domain/task_networks.py)."""
import json

import pytest

from jobsched.domain.task_networks import MAX_POLICY_CHARS, TaskNetworks
from jobsched.local.stack import function_name
from jobsched.settings import FUNCTION_ENV, Env, Settings, SettingsError

from .test_template import resources

ENTRY = {"subnets": ["subnet-0a1b2c3d", "subnet-0a1b2c3e"], "securityGroups": ["sg-0a1b2c3d"]}


class Node:
    def __init__(self, **context):
        self.context = context

    def try_get_context(self, key):
        return self.context.get(key)


def test_the_api_and_the_worker_carry_the_networks_and_a_deployment_names_none_by_default(template):
    """Without ecsNetworks every container job is refused (no tenant joins any network, least of
    all the VPC's default security group); the tick and task_events functions never need them."""
    functions = {function_name(r["Properties"]["Handler"]): r["Properties"]["Environment"]["Variables"]
                 for r in resources(template, "AWS::Lambda::Function").values()}
    for name, env in functions.items():
        assert (env.get(Env.ECS_NETWORKS) == "{}") is (name in ("api", "worker")), name
        if name in ("api", "worker"):
            assert Settings.from_env({k: v if isinstance(v, str) else "x" for k, v in env.items()},
                                     name).ecs_networks == TaskNetworks()


def test_ecs_networks_is_taken_as_the_cli_passes_it_a_json_string_or_as_an_object():
    from jobsched_infra.config import StackConfig

    text = json.dumps({"tenant-a": ENTRY, "*": {**ENTRY, "assignPublicIp": True}})
    from_cli = StackConfig.from_context(Node(ecsNetworks=text)).ecs_networks
    assert from_cli == StackConfig.from_context(Node(ecsNetworks=json.loads(text))).ecs_networks
    assert from_cli.of("tenant-a").assign_public_ip is False and from_cli.of("tenant-z").assign_public_ip is True
    assert TaskNetworks.parse(from_cli.text()) == from_cli  # the setting reads back what the stack writes
    assert StackConfig.from_context(Node()).ecs_networks == TaskNetworks()


@pytest.mark.parametrize("value, named", [
    ("{not json", "not valid JSON"),
    (["subnet-0a1b2c3d"], "an object"),
    ({"tenant-a": {**ENTRY, "securityGroups": []}}, "tenant-a.securityGroups"),
    ({"tenant-a": {"securityGroups": ["sg-0a1b2c3d"]}}, "tenant-a.subnets"),
    ({"tenant-a": {**ENTRY, "subnets": ["subnet-0a1b2c3d\n"]}}, "tenant-a.subnets"),
    ({"tenant-a": {**ENTRY, "assignPublicIp": "yes"}}, "tenant-a.assignPublicIp"),
    ({"tenant-a": {**ENTRY, "vpc": "vpc-1"}}, "tenant-a: an object with"),
])
def test_a_bad_ecs_networks_fails_synthesis_naming_the_entry(value, named):
    from jobsched_infra.config import ConfigError, StackConfig

    with pytest.raises(ConfigError, match="context 'ecsNetworks'") as raised:
        StackConfig.from_context(Node(ecsNetworks=value))
    assert named in str(raised.value)


def test_ecs_networks_over_its_share_of_the_functions_environment_fails_synthesis():
    from jobsched_infra.config import ConfigError, StackConfig

    many = {f"tenant-{i:03}": ENTRY for i in range(MAX_POLICY_CHARS // 80)}
    with pytest.raises(ConfigError, match="over 2048"):
        StackConfig.from_context(Node(ecsNetworks=many))


def test_a_bad_ecs_networks_setting_stops_the_function_at_its_start():
    with pytest.raises(SettingsError, match=Env.ECS_NETWORKS):
        Settings.from_env({**{name: "1" for name in FUNCTION_ENV["worker"]}, Env.SEGMENTS: "1",
                           Env.ECS_NETWORKS: '{"t": {"subnets": []}}'}, "worker")


def test_the_operations_guides_ecs_networks_command_works_as_written():
    """docs/operations.md's `cdk deploy -c ecsNetworks='...'`, split as a shell splits it: the CDK
    CLI hands the value over as the string after `ecsNetworks=`."""
    import shlex
    from pathlib import Path

    from jobsched_infra.config import StackConfig

    guide = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    [line] = [line for line in guide.splitlines() if line.startswith("cdk deploy -c ecsNetworks=")]
    words = shlex.split(line)
    value = words[words.index("-c") + 1].split("=", 1)[1]
    networks = StackConfig.from_context(Node(ecsNetworks=value)).ecs_networks
    assert networks.of("acme") is not None and networks.of("someone-else") is not None
