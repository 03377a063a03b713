"""Container networks and RunTask's capacity refusals, as plain rules (domain/task_networks.py,
domain/container_tasks.py)."""
from jobsched.domain.container_tasks import capacity_refusal
from jobsched.domain.task_networks import TaskNetworks, network_problem

POLICY = TaskNetworks.parse({"acme": {"subnets": ["subnet-0a0a0a0a", "subnet-0b0b0b0b"],
                                      "securityGroups": ["sg-0a0a0a0a"]},
                             "*": {"subnets": ["subnet-0c0c0c0c"], "securityGroups": ["sg-0c0c0c0c"],
                                   "assignPublicIp": True}})


def target(subnets=("subnet-0a0a0a0a",), groups=("sg-0a0a0a0a",), public=False) -> dict:
    return {"subnets": list(subnets), "securityGroups": list(groups), "assignPublicIp": public}


def test_a_named_tenant_is_held_to_its_own_entry_and_every_other_to_the_default():
    assert network_problem(POLICY, "acme", target(("subnet-0b0b0b0b", "subnet-0a0a0a0a"))) is None
    assert network_problem(POLICY, "acme", target(("subnet-0a0a0a0a", "subnet-0c0c0c0c")))[0] == "subnets"
    assert network_problem(POLICY, "acme", target(groups=("sg-0a0a0a0a", "sg-0c0c0c0c")))[0] == "securityGroups"
    assert network_problem(POLICY, "acme", target(public=True))[0] == "assignPublicIp"  # "*" allows it, acme not
    assert network_problem(POLICY, "other", target(("subnet-0c0c0c0c",), ("sg-0c0c0c0c",), True)) is None
    assert network_problem(POLICY, "other", target())[0] == "subnets"


def test_no_entry_means_no_network_and_no_security_group_is_never_allowed():
    named_only = TaskNetworks.parse({"acme": {"subnets": ["subnet-0a0a0a0a"], "securityGroups": ["sg-0a0a0a0a"]}})
    assert network_problem(named_only, "other", target())[0] == "subnets"
    assert network_problem(TaskNetworks(), "acme", target())[0] == "subnets"
    for policy in (POLICY, None):
        assert network_problem(policy, "acme", target(groups=()))[0] == "securityGroups"
        assert network_problem(policy, "acme", {"subnets": ["subnet-0a0a0a0a"]})[0] == "securityGroups"
    assert network_problem(None, "acme", target(("subnet-0f0f0f0f",))) is None  # no policy: nothing else held


def test_only_an_answer_whose_every_failure_is_of_capacity_is_a_capacity_refusal():
    capacity = {"reason": "Capacity is unavailable at this time. Please try again later or in a different "
                          "availability zone"}
    quota = {"reason": "You've reached the limit on the number of vCPUs you can run concurrently"}
    assert capacity_refusal([capacity]) and capacity_refusal([quota, {"reason": "RESOURCE:ENI"}])
    assert not capacity_refusal([]) and not capacity_refusal([capacity, {"reason": "MISSING"}])
    assert not capacity_refusal([{"reason": "subnet-0a0a0a0a does not exist", "detail": "Capacity"}])
