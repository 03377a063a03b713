"""A deployment in several regions (issue 25): which stack holds what, and the names the stacks
share. Everything here is decided at synthesis from context, offline: the stacks of different
regions never read each other's outputs, except the multi-Region key's ARN (storage.py).

- `-c regions=us-east-1,eu-west-1,...`: 2..9 distinct regions, in a fixed order: a region's
  place is its number in job ids and in global segment numbers (global segment = region index x
  SEGMENTS + local segment). One stack per region, `Jobsched-<region>`.
- `-c ownershipRegions=a,b,c`: the three regions of the segment-lease table, a multi-Region
  strongly consistent (MRSC) global table. AWS: MRSC spans exactly three Regions (three replicas,
  or two replicas and a witness) of one Region set (US, EU or AP):
  https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-properties-dynamodb-globaltable-globaltablewitness.html
  and https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/V2globaltables_HowItWorks.html
"""
from __future__ import annotations

from dataclasses import dataclass

from jobsched.domain.jobs import Priority
from jobsched.domain.ownership import nearest_first
from jobsched.sizing import MAX_SEGMENTS
from jobsched_infra.errors import ConfigError

APP_NAME = "Jobsched"
MAX_REGIONS = 9
# Lease timing (functions/jobsched/settings.py checks LEASE_MS >= 70,000 and >= 4 x CLOCK_BOUND_MS).
LEASE_MS = 90_000
CLOCK_BOUND_MS = 2_000
# MRSC Region sets, as the CloudFormation reference above lists them.
MRSC_REGION_SETS = {
    "US": ("us-east-1", "us-east-2", "us-west-2"),
    "EU": ("eu-west-1", "eu-west-2", "eu-west-3", "eu-central-1"),
    "AP": ("ap-northeast-1", "ap-northeast-2", "ap-northeast-3"),
}
# EventBridge: 300 rules per event bus by default (100 in af-south-1 and eu-south-1), adjustable:
# https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-quota.html. Every region's stack
# runs a tick rule for every global segment; the stack's own bound (MAX_SEGMENTS rules: one
# stack's CloudFormation resources) is the lower one.
EVENTBRIDGE_RULES_PER_BUS = 300
# The data tables, replicated everywhere (MREC); the ownership table (MRSC) is apart.
DATA_TABLES = ("Jobs", "Timers", "Executions", "Segments", "ApiKeys")
OWNERSHIP_TABLE = "Ownership"


def stack_name(region: str) -> str:
    return f"{APP_NAME}-{region}"


def table_name(table: str) -> str:
    """A global table's name, the same in every replica region (the stacks reference it by name)."""
    return f"{APP_NAME}-{table}"


def lane_name(region: str, priority: Priority) -> str:
    """A lane's queue name in multi-region mode: a region's API may send to another region's lanes
    (a non-owner dispatching to the owner), granted on exactly these names."""
    return f"{stack_name(region)}-lane-{priority.value.lower()}"


def api_function_name(region: str) -> str:
    """A region's API function in multi-region mode: another region's API forwards the changes it
    does not schedule to it (Lambda Invoke, functions/jobsched/store/region_apis.py), granted on
    exactly these names. `{region}` stays a placeholder for the functions' REGION_API_FUNCTION."""
    return f"{stack_name(region)}-api"


def region_set(region: str) -> str | None:
    return next((name for name, members in MRSC_REGION_SETS.items() if region in members), None)


@dataclass(frozen=True)
class RegionPlan:
    regions: tuple[str, ...]
    # The MRSC table's three regions; `witness` is one of them (or ""): a witness holds no replica.
    ownership_regions: tuple[str, ...]
    witness: str = ""

    @property
    def primary(self) -> str:
        """Where the multi-Region key's primary is made: the first region."""
        return self.regions[0]

    @property
    def data_home(self) -> str:
        """The stack that defines the data tables (global tables, MREC): the LAST region's. Their
        replicas are encrypted with each region's replica of the multi-Region key, which must exist
        when the replica is made; the replica keys are made by the other regions' stacks, which take
        the primary key's ARN from the first stack. First stack -> the others -> the last stack
        (which holds the tables) is an order without a cycle; tables in the first stack would need
        the replica keys before the primary key exists."""
        return self.regions[-1]

    @property
    def ownership_replicas(self) -> tuple[str, ...]:
        return tuple(r for r in self.ownership_regions if r != self.witness)

    @property
    def ownership_home(self) -> str:
        """The stack that defines the ownership table: the first deployment region holding a replica
        (CloudFormation makes a global table from a stack in one of its replica regions)."""
        return next(r for r in self.regions if r in self.ownership_replicas)

    def index(self, region: str) -> int:
        return self.regions.index(region)

    def ownership_endpoints(self, region: str) -> tuple[str, ...]:
        """Where a function in `region` calls the ownership table, in order: every replica region
        (two with a witness, else three), its own first when it holds one, then the nearest
        (domain/ownership.nearest_first). It fails over to the next on a connection or region-level
        error (store/ownership.py): a witness serves no requests, so it is never one of them."""
        return nearest_first(region, self.ownership_replicas)


def parse_regions(value) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
        raise ConfigError("context 'regions' must be a comma-separated list such as us-east-1,eu-west-1")
    regions = tuple(i.strip() for i in items if i.strip())
    if len(set(regions)) != len(regions):
        raise ConfigError(f"context 'regions' names a region twice: {','.join(regions)}")
    if len(regions) > MAX_REGIONS:
        raise ConfigError(f"context 'regions' names {len(regions)} regions; at most {MAX_REGIONS}")
    for region in regions:
        parts = region.split("-")
        if len(parts) < 3 or not parts[-1].isdigit():
            raise ConfigError(f"context 'regions': {region!r} is not a region name such as us-east-1")
    return regions


def plan(regions: tuple[str, ...], ownership_regions: tuple[str, ...], segments: int) -> RegionPlan | None:
    """The deployment's plan, or None for the single-region scheduler (no regions or one)."""
    if len(regions) <= 1:
        if ownership_regions:
            raise ConfigError("context 'ownershipRegions' needs context 'regions' with 2 to 9 regions")
        return None
    total = len(regions) * segments
    if total > MAX_SEGMENTS:
        raise ConfigError(
            f"{len(regions)} regions x {segments} segments = {total} tick rules in every region's stack; "
            f"at most {MAX_SEGMENTS} (one stack's resources; EventBridge allows {EVENTBRIDGE_RULES_PER_BUS} "
            f"rules per bus): lower context 'segments' to {MAX_SEGMENTS // len(regions)} or fewer")
    if not ownership_regions:
        ownership_regions = _default_ownership(regions)
    if len(ownership_regions) != 3 or len(set(ownership_regions)) != 3:
        raise ConfigError("context 'ownershipRegions' must name exactly three distinct regions "
                          "(a multi-Region strongly consistent table spans three)")
    sets = {region_set(r) for r in ownership_regions}
    if len(sets) != 1 or None in sets:
        raise ConfigError(f"context 'ownershipRegions' ({','.join(ownership_regions)}) must lie in one MRSC "
                          f"Region set: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in MRSC_REGION_SETS.items()))
    outside = [r for r in ownership_regions if r not in regions]
    if len(outside) == 3:
        raise ConfigError("context 'ownershipRegions' must include at least one of context 'regions' "
                          "(the ownership table is defined in that region's stack)")
    # One ownership region without a stack of the deployment: a witness there (it serves no
    # reads, it only takes part in the writes' quorum); two or none: three replicas.
    witness = outside[0] if len(outside) == 1 else ""
    return RegionPlan(regions=regions, ownership_regions=tuple(ownership_regions), witness=witness)


def _default_ownership(regions: tuple[str, ...]) -> tuple[str, ...]:
    for name in MRSC_REGION_SETS:
        members = [r for r in regions if region_set(r) == name]
        if len(members) >= 3:
            return tuple(members[:3])
    raise ConfigError(
        f"no three of context 'regions' ({','.join(regions)}) lie in one MRSC Region set; set context "
        f"'ownershipRegions' to three regions of one set (e.g. -c ownershipRegions=us-east-1,us-east-2,us-west-2): "
        + "; ".join(f"{k}: {', '.join(v)}" for k, v in MRSC_REGION_SETS.items()))
