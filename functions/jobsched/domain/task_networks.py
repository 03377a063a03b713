"""Container networks (shared/API.md, "Container networks"): which subnets and security groups a
tenant's container tasks may join, and whether they may have a public IP.

The operator names them per tenant (CDK context `ecsNetworks`, docs/operations.md); the API
refuses a job outside its tenant's networks (422 naming the field) and the worker checks again
before RunTask, so a job created before the policy changed never runs in a network it no longer
may use. IAM cannot narrow this: ecs:RunTask has no condition key for subnets, security groups
or the public IP (docs/architecture.md, "ECS_TASK"). A tenant with no entry, and no deployment-wide
default, may run no container task; an empty security-group list is always refused (ECS would
put the task in the VPC's default security group). Plain Python."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from jobsched.domain.container_tasks import SECURITY_GROUP, SUBNET

# The entry for every tenant the operator does not name (optional).
DEFAULT_TENANT = "*"
# The policy rides in one environment variable of the API and the worker: Lambda allows 4 KB for
# all of a function's variables, so the policy keeps to half of it (checked when the stack is made).
MAX_POLICY_CHARS = 2048


@dataclass(frozen=True)
class Network:
    subnets: frozenset[str]
    security_groups: frozenset[str]
    assign_public_ip: bool = False


class NetworkPolicyError(ValueError):
    pass


@dataclass(frozen=True)
class TaskNetworks:
    """Tenant id (or DEFAULT_TENANT) → the network its tasks may use."""

    by_tenant: tuple[tuple[str, Network], ...] = ()

    def of(self, tenant_id: str) -> Network | None:
        tenants = dict(self.by_tenant)
        return tenants.get(tenant_id) or tenants.get(DEFAULT_TENANT)

    def text(self) -> str:
        """The policy as its environment variable carries it (compact JSON)."""
        return json.dumps({tenant: {"subnets": sorted(n.subnets), "securityGroups": sorted(n.security_groups),
                                    "assignPublicIp": n.assign_public_ip} for tenant, n in self.by_tenant},
                          separators=(",", ":"), sort_keys=True)

    @classmethod
    def parse(cls, value: Any) -> "TaskNetworks":
        """From a mapping, or its JSON text (the CDK CLI hands `-c ecsNetworks=...` over as a string).
        Raises NetworkPolicyError naming the entry at fault."""
        if isinstance(value, str):
            try:
                value = json.loads(value) if value.strip() else {}
            except ValueError as exc:
                raise NetworkPolicyError(f"not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise NetworkPolicyError("an object of tenant id (or \"*\") to {subnets, securityGroups, assignPublicIp}")
        return cls(tuple(sorted((str(tenant), _network(tenant, entry)) for tenant, entry in value.items())))


def _network(tenant: str, entry: Any) -> Network:
    if not isinstance(entry, dict) or set(entry) - {"subnets", "securityGroups", "assignPublicIp"}:
        raise NetworkPolicyError(f"{tenant}: an object with subnets, securityGroups and assignPublicIp only")
    subnets, groups = entry.get("subnets"), entry.get("securityGroups")
    if not (isinstance(subnets, list) and subnets and all(isinstance(s, str) and SUBNET.fullmatch(s) for s in subnets)):
        raise NetworkPolicyError(f"{tenant}.subnets: a non-empty list of subnet ids (subnet-<hex>)")
    if not (isinstance(groups, list) and groups
            and all(isinstance(g, str) and SECURITY_GROUP.fullmatch(g) for g in groups)):
        raise NetworkPolicyError(f"{tenant}.securityGroups: a non-empty list of security group ids (sg-<hex>)")
    public = entry.get("assignPublicIp", False)
    if not isinstance(public, bool):
        raise NetworkPolicyError(f"{tenant}.assignPublicIp: true or false")
    return Network(frozenset(subnets), frozenset(groups), public)


def network_problem(policy: TaskNetworks | None, tenant_id: str, config: dict) -> tuple[str, str] | None:
    """(the target's field, why) when the task may not run in the network its target names; None
    when it may. `policy` None: no policy to hold it to (tests of other parts), only the empty
    security-group list is refused."""
    groups = list(config.get("securityGroups") or [])
    if not groups:
        return "securityGroups", ("name at least one security group: without one ECS puts the task in the "
                                  "VPC's default security group")
    if policy is None:
        return None
    allowed = policy.of(tenant_id)
    if allowed is None:
        return "subnets", ("no networks are granted to this tenant for container tasks (the deployment's "
                           "ecsNetworks): ask the operator")
    outside = [s for s in config.get("subnets") or [] if s not in allowed.subnets]
    if outside:
        return "subnets", (f"{outside[0]} is not among the subnets this tenant may use "
                           f"({', '.join(sorted(allowed.subnets))})")
    outside = [g for g in groups if g not in allowed.security_groups]
    if outside:
        return "securityGroups", (f"{outside[0]} is not among the security groups this tenant may use "
                                  f"({', '.join(sorted(allowed.security_groups))})")
    if config.get("assignPublicIp") and not allowed.assign_public_ip:
        return "assignPublicIp", "this tenant's tasks may not have a public IP"
    return None
