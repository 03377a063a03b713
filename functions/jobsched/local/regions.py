"""Several AWS regions in one process, on moto, under one fake clock: the harness of the
multi-region scenarios (issue 25: five regions, failover with nothing lost, nothing run twice).

Each region runs the whole stack (`InProcessStack`: api, tick, worker, task_events, its lane
pollers) on the emulator's backends of its own region: moto keeps DynamoDB tables, SQS queues,
KMS keys and SNS topics per (account, region), so region A's Jobs table and region B's are two
tables, as two replicas of a global table are. The caller enters `mock_aws()` and
`emulator_time(clock.now_ms)` (tests/integration/conftest.py does the same for one stack), with
`serialized_in_process()` wherever threads share the emulator.

What is modelled, from AWS's documentation of DynamoDB global tables ("How DynamoDB global tables
work", "Global tables - multi-active, multi-Region replication", and the prescriptive guidance
"Using Amazon DynamoDB global tables"):

- The data tables (every AWS::DynamoDB::Table of the template: Jobs, Timers, Executions,
  Segments, ApiKeys) are global tables in multi-Region eventual consistency (MREC), the default
  mode: any replica takes reads and writes; a write is applied in its region at once and
  replicated to every other replica in the background (`Replicator`). Items are replicated one
  by one: the items of one transaction or one batch are not replicated together. A conditional
  write, a transaction's condition and a strongly consistent read are evaluated against the
  local replica only, so a region can act on a stale copy. Concurrent writes of one item resolve
  by last writer wins: the write with the later timestamp wins in every replica (equal
  timestamps: the region later in REGIONS wins, a deterministic tie-break of our own: AWS does
  not document one). A delete replicates as a delete, and its timestamp is kept (a tombstone),
  so an older write arriving later does not bring the item back.
- The segment leases' table (`OWNERSHIP_TABLE`) models a multi-Region strongly consistent (MRSC)
  table: its replicas (`ownership_replicas`, by default the first two regions, the third member
  being a witness that serves no requests) are one copy of the items, reachable through each
  replica region's endpoint (one moto table in each of their backends: the same object), so every
  read and every conditional write, in any replica, sees every other. Each region's functions are
  told the replica regions nearest first (OWNERSHIP_REGIONS, domain/ownership.nearest_first), as the
  stacks tell them. Key: `segment` (Number), on demand.
- A replica's loss: `kill` of a replica region, or `lose_ownership_replica` (the region runs, its
  DynamoDB endpoint fails): calls to that endpoint fail (a killed region's as an unreachable
  endpoint, EndpointConnectionError; a lost replica's with HTTP 500 InternalServerError) while
  the other replica serves (MRSC with two of its three members left). Losing every replica fails
  every call.
- A region's loss (`kill`): its functions stop (no tick, no poll, its API refuses requests); the
  writes it made that had not yet left it are lost to the other regions (`lose_unreplicated=True`,
  what the issue's scenarios assume; AWS's guidance says an MREC region that goes offline
  propagates them once it is back: `lose_unreplicated=False` holds them until `revive`). Its
  queues keep their messages. `revive` brings it back with its tables as they were at its death,
  then the replication it missed arrives (a returning replica catching up).
- A network partition (`partition`): the region keeps running, but its calls to the ownership
  table fail as an unreachable endpoint does (botocore's EndpointConnectionError), and, with
  `replication=True`, its outbound and inbound replication is held until `heal`.
- Clock skew (`skew_ms`): a region's functions read the shared clock plus its skew (`RegionClock`).
  The emulator's own time (SQS delays and visibility timeouts) and the ticks' schedule (on each
  minute boundary of the shared clock, as EventBridge's rules fire on AWS's time) are not skewed;
  replication timestamps are the writing region's (skewed) time, as a skewed region's writes
  would be stamped.

What is not modelled:
- The replication lag's distribution: a fixed lag per pair of regions (`lag_ms`, `pair_lag_ms`)
  plus a uniform jitter from a seeded random (`jitter_ms`, `seed`); AWS publishes no
  distribution (it reports ReplicationLatency, typically around a second). Replicated writes are
  applied on the driver's steps (`advance`'s step_ms grid), not at their exact millisecond.
- Replicated write units are not billed (the strict layer bills what each region's functions
  send; AWS bills replicated writes in every replica), nor throttled.
- How AWS stamps a write's timestamp: here, a region's clock, never below the timestamp of the
  version it overwrites in its replica (or replicas could diverge forever).
- PartiQL writes (ExecuteStatement) and TTL deletions are not replicated (the scheduler makes
  neither: TTL deletes are AWS's background work, which the emulator does not run).
- The ownership table's own latency and its quorum beyond "one replica left serves": one copy,
  available through every replica endpoint not lost, to a region that is not partitioned from it.
- A write captured between its call and our read of its image by another thread's write of the same
  item would replicate the later image under the earlier timestamp: `advance` runs everything on
  one thread, so it does not happen there.

The strict AWS layer (strict_aws) is one process-wide hook: `RegionsSim` activates a dispatcher
(`RegionalStrict`) that hands each call to the layer of the region whose backend it reaches
(the client's region): each region's stack has its own StrictAws (its IAM decisions, its bill,
its throttling), and every call to the ownership table, whichever replica's endpoint it reaches,
a billing-only one (sizes and capacity billed, no IAM: the single-region template does not hold
that table, so the grant the lease code needs is checked in tests/infra/test_regions.py instead).
The same dispatcher captures each region's successful writes for the replicator and fails a
partitioned region's calls, or a lost replica's, to the ownership table.

A region's API forwards a change it does not schedule to the API function of the region that does
(Lambda's Invoke, store/region_apis.py): `RegionStack` answers the Invoke in process with that
region's API (`_invoke_api`, recorded in `forwarded`), or EndpointConnectionError when that region
was killed. The Invoke is not checked by a strict layer (the single-region template holds no grant
for another region's function: tests/infra/test_regions.py checks the stacks' grant).

Integration notes for the scheduler's lease code: each function gets REGIONS (comma-separated, in
order), THIS_REGION, OWNERSHIP_TABLE, OWNERSHIP_REGIONS, LEASE_MS and CLOCK_BOUND_MS in its
environment (Settings.regions, .this_region, ...); its clock is the region's RegionClock (the
`clock` every handler's make_handler takes); a call to the ownership table is recognised as the
calling region's by the function it is made in (`calling_region`, set around each invocation),
whatever session or client makes it, and it must name the table by OWNERSHIP_TABLE.
"""
from __future__ import annotations

import contextvars
import io
import json
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import boto3
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError, EndpointConnectionError
from botocore.response import StreamingBody

from jobsched.domain.executions import AttemptOutcome, Dispatch, ExecutionStatus
from jobsched.domain.ownership import nearest_first
from jobsched.domain.schedule import MS_PER_MINUTE
from jobsched.local import strict_aws
from jobsched.local.inprocess import InProcessStack, step_clock
from jobsched.local.replication import Replicator, _tables_named
from jobsched.local.stack import ACCOUNT
from jobsched.settings import Env

API_FUNCTION = "jobsched-{region}-api"  # each region's API function (REGION_API_FUNCTION)
OWNERSHIP_LAYER = "ownership"  # RegionalStrict's key for the ownership table's billing-only layer
DEFAULT_OWNERSHIP_TABLE = "jobsched-ownership"
FUNCTIONS = ("api", "tick", "worker", "task_events")
WRITE_OPERATIONS = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})

# The region whose function is running (set around each invocation of a region's function): a call
# it makes to the ownership table, in another region's endpoint, is still that region's call.
calling_region: contextvars.ContextVar[str | None] = contextvars.ContextVar("regions_sim_calling", default=None)


class RegionDown(ConnectionError):
    """A request to a region that `kill` took down (its API endpoint does not answer)."""


class RegionClock:
    """A region's view of the shared clock: the shared clock plus the region's skew. Its functions
    read it; sleeping moves the shared clock (a fake clock's sleep does not wait)."""

    def __init__(self, base, skew_ms: int = 0) -> None:
        self.base = base
        self.skew_ms = skew_ms

    def now_ms(self) -> int:
        return self.base.now_ms() + self.skew_ms

    def sleep(self, seconds: float) -> None:
        self.base.sleep(seconds)


@dataclass
class Fire:
    """One call a region's worker made to a job's target."""
    region: str
    execution_id: str
    attempt: int
    at_ms: int  # the shared clock's time (not the region's skewed view)
    job_id: str
    epoch: int = 0  # the lease epoch the message was sent under (service/ownership.py)


@dataclass
class RecordingInvoker:
    """A region's target invoker that records every call (a side effect each: nothing is deduped)
    and answers success; `script` maps a job id to outcomes consumed call by call."""
    region: str
    clock: Any
    calls: list[Fire] = field(default_factory=list)
    script: dict[str, list[AttemptOutcome]] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)  # execution id -> its last callback token

    def invoke(self, job, dispatch: Dispatch, attempt: int, callback_token: str | None = None,
               progress=None) -> AttemptOutcome:
        self.calls.append(Fire(self.region, dispatch.execution_id, attempt, self.clock.now_ms(), job.job_id,
                               dispatch.epoch))
        if callback_token:
            self.tokens[dispatch.execution_id] = callback_token
        planned = self.script.get(job.job_id)
        return planned.pop(0) if planned else AttemptOutcome(True, ExecutionStatus.SUCCEEDED, None, {"ok": True})


# --- The strict layer, per region ------------------------------------------------------------------

class RegionalStrict:
    """The process's one active strict layer while a RegionsSim runs: each call goes to the
    StrictAws of the region whose backend it reaches (the client's region); a region without a
    layer is not checked. `hooks` (the simulation) sees every call too: it may refuse one before
    it is sent (a partition) and sees the successful ones after (replication)."""

    _reports = False  # the emulator is in-process: the layers read items from moto's backends

    def __init__(self, layers: dict[str, strict_aws.StrictAws], hooks: "RegionsSim | None" = None,
                 unchecked: Iterable[str] = (), ownership_table: str = "") -> None:
        self.layers = layers
        self.unchecked = frozenset(unchecked)  # layers that check no IAM (billing only)
        self.hooks = hooks
        self.ownership_table = ownership_table  # its calls go to OWNERSHIP_LAYER, whatever the endpoint

    def _layer_key(self, client, model, params: dict) -> str:
        service = model.service_model.endpoint_prefix
        if self.ownership_table and service == "dynamodb" and self.ownership_table in _tables_named(params):
            return OWNERSHIP_LAYER
        if service == "lambda" and model.name == "Invoke":
            return ""  # another region's API (RegionsSim._invoke_api): no layer, see the module's docstring
        return client.meta.region_name

    def before(self, client, model, params: dict, context: dict) -> None:
        region = client.meta.region_name
        if self.hooks is not None:
            self.hooks._before_call(client, region, model, params, context)
        key = context["regions_layer"] = self._layer_key(client, model, params)
        layer = self.layers.get(key)
        if layer is None:
            return
        if key in self.unchecked:
            # A billing-only layer has no policies: the call is sized and billed, not authorized.
            token = strict_aws.current_function.set(None)
            try:
                layer.before(client, model, params, context)
            finally:
                strict_aws.current_function.reset(token)
        else:
            layer.before(client, model, params, context)

    def after(self, client, http_response, parsed: dict, model, context: dict) -> None:
        region = client.meta.region_name
        layer = self.layers.get(context.get("regions_layer", region))
        if layer is not None:
            layer.after(client, http_response, parsed, model, context)  # may refuse (an item too large)
        if self.hooks is not None:
            self.hooks._after_call(region, http_response, parsed, model, context)

    def report(self) -> dict[str, strict_aws.Report]:
        return {region: layer.report() for region, layer in self.layers.items()}


# --- The regions -----------------------------------------------------------------------------------

class RegionStack(InProcessStack):
    """One region's stack. Its functions run with `calling_region` set to the region; `invoke_api`
    answers its functions' Lambda Invoke calls (botocore's before-call: nothing is sent)."""

    def __init__(self, region: str, template: dict, clock, invoke_api: Callable | None = None, **kwargs) -> None:
        self.region_name = region
        # No tick while it is built: only its own strict layer is active then, and a tick's lease
        # calls reach the ownership table, which that layer does not know (RegionsSim ticks later).
        self._built = False
        session = boto3.session.Session(region_name=region)
        if invoke_api is not None:
            session.events.register("before-call.lambda.Invoke", invoke_api)
        super().__init__(template, clock, session=session, **kwargs)
        self._built = True
        for function in (self.api, self.tick_fn, self.worker, self.task_events):
            function._handler = self._in_region(function._handler)

    def tick_all(self) -> None:
        if self._built:
            super().tick_all()

    def _in_region(self, handler: Callable) -> Callable:
        region = self.region_name

        def run(event, context):
            token = calling_region.set(region)
            try:
                return handler(event, context)
            finally:
                calling_region.reset(token)
        return run


class RegionsSim:
    """`regions` (3-5 in the issue's scenarios; any number ≥ 1) each running the whole stack, the
    data tables replicated between them (`Replicator`), one ownership table for their leases, one
    shared clock (`clock`, a FakeClock) that `advance` moves. Call inside `mock_aws()` and
    `emulator_time(clock.now_ms)`.

    - `lag_ms`, `pair_lag_ms` {(src, dst): ms}, `jitter_ms`, `seed`: replication's lag.
    - `replicate`: False, every write stays in its region (versions still kept).
    - `ownership_replicas`, `ownership_table`: the regions of the leases' replicas (default: the
      first two regions; any regions, scheduler's or not) and the table's name (created here).
    - `lease_ms`, `clock_bound_ms`: handed to every function (LEASE_MS, CLOCK_BOUND_MS).
    - `keys`: tenant → API key, registered in the first region only (the registration replicates
      like any write; `register_keys(region, keys)` registers elsewhere); the first key is every
      region's default for `request`.
    - `invoker_factory(region, clock) -> invoker`: each region's target invoker (default: a
      `RecordingInvoker`, on the shared clock).
    - `segments`: the segment numbers every region's tick is invoked for on each minute boundary
      (default: 0..SEGMENTS-1 of the template, which is what the tick accepts today; pass
      range(len(regions) * SEGMENTS) when segments are numbered globally).
    - `skew_ms` {region: ms}: what each region's functions read is the clock plus this.
    - `env_overrides` {function: {name: value}}: more environment for every region's functions.
    - `strict`: False, no strict layer (the calls are still captured for replication)."""

    def __init__(self, template: dict, regions: list[str], clock, lag_ms: int = 1000,
                 ownership_replicas: Iterable[str] | None = None, keys: dict[str, str] | None = None,
                 invoker_factory: Callable[[str, Any], Any] | None = None, segments: Iterable[int] | None = None,
                 pair_lag_ms: dict[tuple[str, str], int] | None = None, jitter_ms: int = 0, seed: int = 0,
                 skew_ms: dict[str, int] | None = None, ownership_table: str = DEFAULT_OWNERSHIP_TABLE,
                 lease_ms: int = 90_000, clock_bound_ms: int = 2_000, replicate: bool = True,
                 env_overrides: dict[str, dict[str, str]] | None = None, strict: bool = True,
                 batch_size: int = 10) -> None:
        if len(set(regions)) != len(regions) or not regions:
            raise ValueError(f"regions must be distinct and at least one, got {regions!r}")
        replicas = tuple(ownership_replicas) if ownership_replicas is not None else tuple(regions[:2])
        if not 1 <= len(replicas) <= 3 or len(set(replicas)) != len(replicas):
            raise ValueError(f"an MRSC table has one to three distinct replica regions, got {replicas!r}")
        self.clock = clock
        self.regions = list(regions)
        self.ownership_replicas = replicas
        self.ownership_table = ownership_table
        self.clocks = {r: RegionClock(clock, (skew_ms or {}).get(r, 0)) for r in self.regions}
        self._dead: set[str] = set()
        self._ownership_cut: set[str] = set()  # regions whose calls to the table all fail
        self._replicas_lost: set[str] = set()  # replica regions whose endpoint fails (lose_ownership_replica)
        self.failed_invocations: list[tuple[str, str, int, str]] = []  # (region, function, at_ms, error)
        self.forwarded: list[tuple[str, str, str, int]] = []  # (from region, to region, path, status)
        self._create_ownership_table()
        factory = invoker_factory or (lambda region, _clock: RecordingInvoker(region, clock))
        self.invokers = {r: factory(r, self.clocks[r]) for r in self.regions}
        self.stacks: dict[str, RegionStack] = {}
        previous = strict_aws.active()
        for region in self.regions:
            env = {Env.REGIONS: ",".join(self.regions), Env.THIS_REGION: region,
                   Env.OWNERSHIP_TABLE: ownership_table,
                   Env.OWNERSHIP_REGIONS: ",".join(self.ownership_endpoints(region)),
                   Env.REGION_API_FUNCTION: API_FUNCTION,
                   Env.LEASE_MS: str(lease_ms), Env.CLOCK_BOUND_MS: str(clock_bound_ms)}
            overrides = {name: {**env, **(env_overrides or {}).get(name, {})} for name in FUNCTIONS}
            # Each stack activates its own layer while it is built (only its own calls are made then).
            self.stacks[region] = RegionStack(region, template, self.clocks[region], invoke_api=self._invoke_api,
                                              invoker=self.invokers[region],
                                              batch_size=batch_size, env_overrides=overrides)
        first = self.stacks[self.regions[0]]
        self.segments = list(segments) if segments is not None else list(range(first.settings.total_segments))
        self.replicator = Replicator(
            clock, self.regions, {r: self._tables_of(s, template) for r, s in self.stacks.items()}, lag_ms=lag_ms,
            pair_lag_ms=pair_lag_ms, jitter_ms=jitter_ms, seed=seed, region_clocks=self.clocks)
        self.replicator.enabled = replicate
        # What was written while the stacks were built (watermarks, API keys) is where it was
        # written, and each region wrote its own: replication starts from here.
        layers = {r: s.strict for r, s in self.stacks.items()} if strict else {}
        if strict:
            layers[OWNERSHIP_LAYER] = strict_aws.StrictAws.billing_only(
                {ownership_table: ("segment",)}, clock.now_ms,
                peek=lambda table, key: strict_aws._peek_moto(table, key, replicas[0])[1],
                region=replicas[0])
        self.strict = RegionalStrict(layers, hooks=self, unchecked=(OWNERSHIP_LAYER,), ownership_table=ownership_table)
        self._previous_layer = previous
        strict_aws.activate(self.strict)
        if keys:
            # Registered in the first region once replication is on: the keys replicate from there.
            self.register_keys(self.regions[0], keys)
            for stack in self.stacks.values():
                stack.default_key = next(iter(keys.values()))

    # --- set-up ---------------------------------------------------------------------------------

    def _create_ownership_table(self) -> None:
        """Made in the first replica's backend; the others' backends hold the same table object (one
        copy through every replica's endpoint: strong consistency)."""
        from moto.dynamodb.models import dynamodb_backends

        first = self.ownership_replicas[0]
        client = boto3.session.Session(region_name=first).client("dynamodb")
        client.create_table(TableName=self.ownership_table, BillingMode="PAY_PER_REQUEST",
                            KeySchema=[{"AttributeName": "segment", "KeyType": "HASH"}],
                            AttributeDefinitions=[{"AttributeName": "segment", "AttributeType": "N"}])
        table = dynamodb_backends[ACCOUNT][first].tables[self.ownership_table]
        for other in self.ownership_replicas[1:]:
            dynamodb_backends[ACCOUNT][other].tables[self.ownership_table] = table

    def ownership_endpoints(self, region: str) -> tuple[str, ...]:
        """Where `region`'s functions call the ownership table, in order (its OWNERSHIP_REGIONS)."""
        return nearest_first(region, self.ownership_replicas)

    @staticmethod
    def _tables_of(stack: RegionStack, template: dict) -> dict[str, str]:
        from jobsched.local.stack import STACK_NAME

        cfn = stack.session.client("cloudformation")
        resources = cfn.describe_stack_resources(StackName=STACK_NAME)["StackResources"]
        return {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in resources
                if r["ResourceType"] == "AWS::DynamoDB::Table"}

    def register_keys(self, region: str, keys: dict[str, str]) -> None:
        from jobsched.service.auth import ApiKeys

        stack = self.stack(region)
        registry = ApiKeys(stack.stores.api_keys, stack.clock)
        for tenant, key in keys.items():
            registry.register(tenant, key)

    # --- access ---------------------------------------------------------------------------------

    def stack(self, region: str) -> RegionStack:
        return self.stacks[region]

    def table_name(self, region: str, logical_hint: str) -> str:
        """The physical name, in `region`, of the one data table whose logical id contains the hint
        ("Jobs", "Timers", "Executions", "Segments", "ApiKeys")."""
        names = self.replicator.tables[region]
        found = [logical for logical in names if logical_hint in logical]
        if len(found) != 1:
            raise KeyError(f"{logical_hint!r} names {found or 'no table'} of {sorted(names)}")
        return names[found[0]]

    def client(self, region: str, service: str = "dynamodb"):
        return self.stacks[region].session.client(service)

    def ownership_client(self, region: str):
        """A DynamoDB client as `region`'s functions reach the ownership table (for tests; a
        call through it is the region's only inside `as_region`)."""
        return self.stacks[region].session.client("dynamodb", region_name=self.ownership_endpoints(region)[0])

    def as_region(self, region: str):
        """A context in which calls count as `region`'s (as inside its functions)."""
        sim = self

        class _As:
            def __enter__(self):
                self._token = calling_region.set(region)
                return sim

            def __exit__(self, *exc):
                calling_region.reset(self._token)
        return _As()

    def request(self, region: str, method: str, path: str, body=None, key: str | None = "default", headers=None):
        if region in self._dead:
            raise RegionDown(f"{region} is down")
        return self.stacks[region].request(method, path, body, key, headers)

    def is_live(self, region: str) -> bool:
        return region not in self._dead

    def live_regions(self) -> list[str]:
        return [r for r in self.regions if r not in self._dead]

    # --- faults ---------------------------------------------------------------------------------

    def kill(self, region: str, lose_unreplicated: bool = True) -> int:
        """Take `region` down: its ticks, pollers and API stop; its writes not yet replicated are
        lost (returns how many); its queues keep their messages."""
        self._check(region)
        self._dead.add(region)
        return self.replicator.region_down(region, lose_unreplicated)

    def revive(self, region: str) -> None:
        """Bring `region` back with its tables as they were at its death; the replication it missed
        then arrives (what is due at once, on the next step)."""
        self._check(region)
        self._dead.discard(region)
        self.replicator.region_up(region)

    def partition(self, region: str, ownership: bool = True, replication: bool = False) -> None:
        self._check(region)
        if ownership:
            self._ownership_cut.add(region)
        if replication:
            self.replicator.isolate(region)

    def heal(self, region: str) -> None:
        self._check(region)
        self._ownership_cut.discard(region)
        self.replicator.reconnect(region)

    def lose_ownership_replica(self, region: str) -> None:
        """The ownership table's replica in `region` fails (HTTP 500 to every call through its
        endpoint) while the region's functions keep running; the other replicas serve."""
        if region not in self.ownership_replicas:
            raise KeyError(f"no ownership replica in {region!r}: {self.ownership_replicas}")
        self._replicas_lost.add(region)

    def restore_ownership_replica(self, region: str) -> None:
        self._replicas_lost.discard(region)

    def _check(self, region: str) -> None:
        if region not in self.stacks:
            raise KeyError(f"no region {region!r} in {self.regions}")

    # --- the strict layer's hooks ---------------------------------------------------------------

    def _before_call(self, client, region: str, model, params: dict, context: dict) -> None:
        service = model.service_model.endpoint_prefix
        if service != "dynamodb":
            return
        if self.ownership_table in _tables_named(params):
            if calling_region.get() in self._ownership_cut or region in self._dead:
                raise EndpointConnectionError(endpoint_url=client.meta.endpoint_url)
            if region in self._replicas_lost:
                raise ClientError({"Error": {"Code": "InternalServerError", "Message": "Internal server error"},
                                   "ResponseMetadata": {"HTTPStatusCode": 500}}, model.name)
        if model.name in WRITE_OPERATIONS and region in self.stacks:
            context["regions_sim"] = (region, model.name, params)

    def _after_call(self, region: str, http_response, parsed: dict, model, context: dict) -> None:
        captured = context.get("regions_sim")
        if captured is None or http_response.status_code >= 300:
            return
        origin, operation, params = captured
        self.replicator.capture(origin, operation, params, parsed)

    def _invoke_api(self, params: dict, model, **_) -> tuple:
        """Lambda's Invoke of a region's API function (store/region_apis.py), answered by that
        region's API in this process as Lambda would: the function's answer as the payload. A
        killed region's endpoint does not answer (EndpointConnectionError)."""
        url = params["url"]
        host = urllib.parse.urlsplit(url).hostname or ""
        region = host.split(".")[1] if host.count(".") >= 2 else ""
        name = urllib.parse.unquote(params["url_path"].split("/functions/", 1)[-1].split("/", 1)[0])
        if region not in self.stacks or region in self._dead or name != API_FUNCTION.replace("{region}", region):
            raise EndpointConnectionError(endpoint_url=url)
        event = json.loads(params["body"])
        answer = self.stacks[region].api.invoke(event)
        self.forwarded.append((calling_region.get() or "", region, event.get("path", ""), int(answer["statusCode"])))
        data = json.dumps(answer).encode()
        parsed = {"StatusCode": 200, "Payload": StreamingBody(io.BytesIO(data), len(data)),
                  "ResponseMetadata": {"HTTPStatusCode": 200}}
        return AWSResponse(url, 200, {}, None), parsed

    # --- time -----------------------------------------------------------------------------------

    def tick(self, region: str) -> None:
        """Invoke `region`'s tick for each of its segments (the EventBridge rules of one minute). A
        failing invocation is recorded (`failed_invocations`), as Lambda records it, not raised."""
        stack = self.stacks[region]
        if not stack.ticks_enabled or region in self._dead:
            return
        for segment in self.segments:
            try:
                stack.tick_fn.invoke({"segment": segment})
            except Exception as exc:  # noqa: BLE001 - a failed invocation, as Lambda reports it
                self.failed_invocations.append((region, "tick", self.clock.now_ms(), repr(exc)))

    def deliver(self) -> int:
        """Every live region's pollers hand their visible lane messages to its worker."""
        return sum(self.stacks[r].deliver() for r in self.regions if r not in self._dead)

    def advance(self, seconds: float, step_ms: int = 1000) -> None:
        """Move the shared clock in steps. On each minute boundary every live region ticks each of
        `segments`; each step the replication due is applied, then every live region delivers
        its visible lane messages. Steps in which nothing could happen are skipped (as
        InProcessStack does), bounded by the next replication due."""
        def on_minute() -> None:
            self.replicator.apply_due()
            for region in self.regions:
                self.tick(region)

        def on_step() -> None:
            self.replicator.apply_due()
            self.deliver()

        step_clock(self.clock, seconds, step_ms, on_minute, on_step, self._skip_quiet_steps)

    def _skip_quiet_steps(self, end: int, step_ms: int) -> None:
        now = self.clock.now_ms()
        horizon = min(end, (now // MS_PER_MINUTE + 1) * MS_PER_MINUTE)
        for region in self.live_regions():
            ready = self.stacks[region].next_ready_ms()
            if ready is not None:
                horizon = min(horizon, int(ready))
        due = self.replicator.next_due_ms()
        if due is not None:
            horizon = min(horizon, due)
        skip = (horizon - now - 1) // step_ms
        if skip > 0:
            self.clock.set_ms(now + skip * step_ms)

    # --- observation ----------------------------------------------------------------------------

    def fires(self) -> list[Fire]:
        """Every call any region's target received, in order of time."""
        calls = [call for invoker in self.invokers.values() for call in getattr(invoker, "calls", [])]
        return sorted(calls, key=lambda c: c.at_ms)

    def fires_by_execution(self) -> dict[str, list[tuple[str, int, int]]]:
        """execution id → [(region, attempt, at_ms)], for every call any region's target received."""
        by_execution: dict[str, list[tuple[str, int, int]]] = {}
        for region, invoker in self.invokers.items():
            for call in getattr(invoker, "calls", []):
                by_execution.setdefault(call.execution_id, []).append((region, call.attempt, call.at_ms))
        for calls in by_execution.values():
            calls.sort(key=lambda c: c[2])
        return by_execution

    def replication_backlog(self) -> dict[tuple[str, str], int]:
        """(source, destination) → writes queued and not yet applied there (held ones included)."""
        return self.replicator.backlog()

    def strict_reports(self) -> dict[str, strict_aws.Report]:
        return self.strict.report()

    def close(self) -> None:
        """Deactivate the strict layer (restoring the one active before)."""
        if strict_aws.active() is self.strict:
            strict_aws.activate(self._previous_layer)
