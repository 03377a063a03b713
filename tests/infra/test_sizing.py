"""The sizing rule and the end-to-end sizing model (jobsched/sizing.py) are computed from the
code's own constants and AWS's documented limits; the documented figures are the model's, and the
template a profile synthesizes carries exactly the model's settings."""
import dataclasses
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import bench.cost_prices
import bench.cpu
from jobsched import sizing
from jobsched.api.mapping import to_spec
from jobsched.api.models import JobRequest
from jobsched.domain.item_size import attribute_bytes
from jobsched.domain.jobs import Job, JobState, new_job_id
from jobsched.domain.lane_shares import parse_caps
from jobsched.service import signing
from jobsched.service.handoff import LOOK_AHEAD_MINUTES
from jobsched.settings import WORKER_BATCH_SIZE, Env
from jobsched.store import dynamo
from jobsched.store import timers as timers_store

from ..conftest import _template_inputs_digest, kept_json

ROOT = Path(__file__).resolve().parents[2]


def test_the_rule_uses_the_constants_the_code_runs_with(template):
    tick = next(r["Properties"] for r in template["Resources"].values()
                if r["Type"] == "AWS::Lambda::Function"
                and r["Properties"]["Handler"] == "jobsched.handlers.tick.handler")
    assert tick["MemorySize"] == sizing.TICK_MEMORY_MB
    assert sizing.TICK_CPU_MS_PER_TIMER == bench.cpu.BOUND_TICK_MS  # the bound `bench cpu` checks
    assert sizing.PAGE_SIZE == timers_store.TimersStore.__init__.__defaults__[0]
    assert dynamo.GET_PARALLELISM * dynamo.BATCH_GET_LIMIT >= sizing.PAGE_SIZE  # one wave of job reads a page
    # The look-ahead leaves at least a minute; the goal leaves room for a minute twice as busy.
    assert (LOOK_AHEAD_MINUTES - 1) * 60 >= 2 * sizing.HANDOFF_GOAL_S
    assert tick["Timeout"] >= 2 * sizing.HANDOFF_GOAL_S


def test_the_rule_hands_a_segment_off_within_the_goal_at_its_own_peak():
    per_segment = sizing.timers_per_segment_minute()
    assert per_segment * sizing.handoff_ms_per_timer() <= sizing.HANDOFF_GOAL_S * 1000
    assert (per_segment + 100) * sizing.handoff_ms_per_timer() > sizing.HANDOFF_GOAL_S * 1000
    for jobs_per_minute in (1, 10_000, 600_000, 1_000_000):
        segments = sizing.segments_for(jobs_per_minute)
        assert jobs_per_minute / segments <= per_segment and segments <= sizing.MAX_SEGMENTS


def test_the_documented_figures_are_the_rules():
    text = (ROOT / "docs" / "operations.md").read_text()
    figures = {int(n.replace(",", "")): int(s) for n, s in
               re.findall(r"([\d,]+) jobs/min → (\d+) segments", text)}
    assert figures, "docs/operations.md lists the rule worked through"
    for jobs_per_minute, segments in figures.items():
        assert sizing.segments_for(jobs_per_minute) == segments, jobs_per_minute
    assert f"{sizing.timers_per_segment_minute():,} timers" in text


# ---- The end-to-end model (issue 27.1) ----

def test_the_model_uses_the_figures_the_code_and_the_benches_run_with(template):
    worker = next(r["Properties"] for r in template["Resources"].values()
                  if r["Type"] == "AWS::Lambda::Function"
                  and r["Properties"]["Handler"] == "jobsched.handlers.worker.handler")
    # The default template's worker: 256 MB, a quiet deployment's (its invocations mostly wait, billed
    # by the memory; docs/performance.md, "A quiet deployment"); a profile's 512, its lanes' model
    assert worker["MemorySize"] == sizing.QUIET_WORKER_MEMORY_MB == 256
    assert sizing.WORKER_BATCH == WORKER_BATCH_SIZE
    from jobsched.handlers.worker import IN_PLACE_HAND_BACK_SECONDS
    assert sizing.IN_PLACE_HAND_BACK_S == IN_PLACE_HAND_BACK_SECONDS  # the lanes' in-flight bound
    assert sizing.WORKER_CPU_MS_PER_RECORD == bench.cpu.BOUND_WORKER_MS
    assert (sizing.KMS_COLD_BURST, sizing.KMS_DECRYPTS_PER_CONTAINER_SECOND) == \
        (signing.DECRYPT_BURST, signing.DECRYPT_PER_SECOND)
    price = bench.cost_prices.price  # the bench's dated price table
    assert sizing.PRICE_ON_DEMAND_WRITE * 1e6 == pytest.approx(price("ddb_wru"))
    assert sizing.PRICE_ON_DEMAND_READ * 1e6 == pytest.approx(price("ddb_rru"))
    assert sizing.PRICE_PROVISIONED_WCU_HOUR == price("ddb_wcu_hour")
    assert sizing.PRICE_PROVISIONED_RCU_HOUR == price("ddb_rcu_hour")
    # A typical job's item besides its payload (an HTTP cron job, as DynamoDB counts it).
    now = 1_900_000_000_000
    spec = to_spec(JobRequest(name="nightly-report", type="CRON", schedule="*/5 * * * *", timezone="Europe/Paris",
                              target={"type": "HTTP", "url": "https://api.example.com/hooks/run"}, payload={}), now)
    job = Job(tenant_id="tenant-0001", job_id=new_job_id(now), spec=spec, state=JobState.ACTIVE, generation=1,
              version=1, created_ms=now, updated_ms=now)
    item_bytes = sum(attribute_bytes(name, value) for name, value in job.to_item().items())
    assert item_bytes <= sizing.JOB_ITEM_BYTES_BESIDES_PAYLOAD < 2 * item_bytes


@pytest.mark.parametrize("name", sorted(sizing.PROFILES))
def test_each_profile_stays_within_what_aws_documents(name):
    s = sizing.profile_sizing(name)
    w = s.workload
    assert s.segments == sizing.segments_for(max(w.herd, 60 * w.jobs_per_second)) <= sizing.MAX_SEGMENTS
    caps = {lane.lane: lane.max_concurrency for lane in s.lanes}
    assert caps["HIGH"] > caps["NORMAL"] > caps["LOW"] >= sizing.ESM_MAX_CONCURRENCY_LOW
    for lane in s.lanes:
        if lane.mode == "standard":
            # MaximumConcurrency's documented range, and standard polling's own ceiling.
            assert sizing.ESM_MAX_CONCURRENCY_LOW <= lane.max_concurrency <= sizing.ESM_MAX_CONCURRENCY_HIGH
            assert lane.max_concurrency <= sizing.STANDARD_MAX_PER_ESM and lane.max_pollers == 0
        else:
            assert lane.mode == "provisioned"
            assert sizing.MIN_POLLERS_LOW <= lane.min_pollers <= min(sizing.MIN_POLLERS_HIGH, lane.max_pollers)
            assert lane.max_pollers <= sizing.MAX_POLLERS_HIGH
            assert lane.max_concurrency == lane.max_pollers * sizing.POLLER_INVOCATIONS
    # The NORMAL lane alone drains the workload's peak (the wait for the due second included).
    needed = max(w.jobs_per_second, w.herd / w.herd_spread_s)
    assert s.drain_per_second >= needed
    assert caps["NORMAL"] * sizing.WORKER_BATCH / (sizing.worker_batch_ms(w.target_latency_ms) / 1000) >= needed
    # The lanes' caps are reserved for the worker, and everything reserved fits the quota asked for.
    assert s.worker_reserved_concurrency == sum(caps.values())
    concurrency = next(q for q in s.quotas if q.service == "Lambda")
    assert s.account_concurrency_needed == concurrency.needed
    assert s.reserved_concurrency + sizing.UNRESERVED_MINIMUM <= (concurrency.raise_to or concurrency.default)
    # Tables: warmed to their peak when the new-table default would not take it, and every figure the
    # template sets is within the table quota the page says to ask for.
    quotas = {q.name: q for q in s.quotas}
    for table in s.tables:
        assert table.peak_read <= max(table.warm_read, sizing.NEW_TABLE_WARM_READ, table.read_min)
        assert table.peak_write <= max(table.warm_write, sizing.NEW_TABLE_WARM_WRITE, table.write_min)
        for kind, units in (("read", max(table.warm_read, table.read_max)), ("write", max(table.warm_write, table.write_max))):
            quota = quotas[f"Table-level {kind} throughput ({table.table})"]
            assert units <= (quota.raise_to or quota.default)
    # A bucket's slices take the tick's next-timer writes of a segment at full speed.
    assert s.timer_slices_needed <= sizing.TIMER_SLICES
    # Every partition key is under one partition's limits with the layout the code has, or the
    # model says what layout it needs.
    for key in s.keys:
        per_key_read = key.peak_read / key.spread_needed
        per_key_write = key.peak_write / key.spread_needed
        assert per_key_read <= sizing.PARTITION_RCU * sizing.KEY_HEADROOM
        assert per_key_write <= sizing.PARTITION_WCU * sizing.KEY_HEADROOM
        assert key.within_limits or key.finding in s.findings
    for quota in s.quotas:
        assert quota.raise_to == 0 or quota.raise_to >= quota.needed > quota.default


def test_one_tenant_at_10k_a_second_fits_its_32_job_keys_and_its_creates_are_a_finding():
    one_tenant = sizing.profile_sizing("10k")
    [jobs, own] = [k for k in one_tenant.keys if k.table == "Jobs"]
    # The tick's reads of one tenant's jobs are over one key's 3,000 and within the 32 it has.
    assert jobs.peak_read > sizing.PARTITION_RCU and 1 < jobs.spread_needed <= jobs.spread_in_code == 32
    assert jobs.within_limits and not any("job items take" in f for f in one_tenant.findings)
    # Recurring runs write nothing on the tenant's keys (the lane shares' slots have keys of their
    # own); one-time jobs write their item at creation and at completion.
    assert jobs.peak_write == 0 and own.peak_write == 0
    one_time = sizing.size(sizing.Workload(jobs_per_second=2000, herd=120_000, one_tenant_whole_rate=True,
                                           one_time_share=1.0))
    [one_time_jobs, one_time_own] = [k for k in one_time.keys if k.table == "Jobs"]
    job_write_units = 2  # a job item of 600 B plus a 1 KB payload
    creates = sizing.TENANT_CREATES_PER_SECOND_LIMIT  # ahead of time, at most this fast
    assert one_time_jobs.peak_write == (2000 + creates) * job_write_units and one_time_jobs.within_limits
    # ... cannot be created that fast through the API by one tenant, and its creates' small items
    # stay on its own key, which they fill.
    assert one_time_own.peak_write == math.ceil(creates * sizing.ONE_TIME_EXTRA_SMALL_WRITES)
    assert not one_time_own.within_limits and one_time_own.finding in one_time.findings
    assert any("cannot create 2,000 one-time jobs a second" in f for f in one_time.findings)
    # The same rate over a thousand tenants needs no spread; a tenant gets its whole lane only when
    # it may be the whole rate.
    spread = sizing.size(sizing.Workload(jobs_per_second=10_000, herd=600_000, tenants=1000))
    assert all(k.within_limits for k in spread.keys) and spread.lane_tenant_percent == 50
    assert one_tenant.lane_tenant_percent == 100


def test_a_herd_from_quiet_gets_warm_pollers_and_a_steady_rate_grows_into_standard_polling():
    herd = sizing.profile_sizing("herd1m")
    assert all(lane.mode == "provisioned" for lane in herd.lanes)
    # The NORMAL lane's whole need is polled from the first second of the herd.
    assert herd.lane("NORMAL").min_pollers * sizing.POLLER_INVOCATIONS >= herd.lane("NORMAL").max_concurrency
    steady = sizing.profile_sizing("10k")
    assert steady.lane("NORMAL").mode == "standard" and steady.lane("HIGH").mode == "provisioned"
    # ...whose ramp from idle is a finding (bench e2e measured it: 170 s late at the start)
    ramp = [f for f in steady.findings if f.startswith("lane NORMAL: standard polling from idle")]
    assert ramp and "in about 170 s" in ramp[0], steady.findings
    assert not any("standard polling from idle" in f for f in sizing.profile_sizing("1k").findings)
    assert steady.lane("HIGH").min_pollers == sizing.MIN_POLLERS_LOW  # a steady rate ramps its own pollers
    # 5,000 a second arriving at once: standard polling would reach only 305 in its first minute.
    burst = sizing.size(sizing.Workload(jobs_per_second=10, herd=300_000, herd_spread_s=60))
    assert burst.lane("NORMAL").max_concurrency > sizing.STANDARD_START_CONCURRENCY + sizing.STANDARD_RAMP_PER_MINUTE
    assert burst.lane("NORMAL").mode == "provisioned"


def test_provisioned_capacity_is_chosen_only_where_cheaper_and_the_table_has_no_index():
    flat = sizing._table("Timers", 100, 10_000, 100, 10_000, has_index=False)
    assert flat.billing == "provisioned" and flat.hourly_provisioned < flat.hourly_on_demand
    assert flat.write_min == math.ceil(10_000 / 0.7) and flat.write_max == 2 * flat.write_min
    indexed = sizing._table("Executions", 100, 10_000, 100, 10_000, has_index=True)
    assert indexed.billing == "on-demand" and indexed.warm_write == 12_500
    bursty = sizing._table("Timers", 100, 40_000, 100, 10_000, has_index=False)
    assert bursty.billing == "on-demand" and bursty.hourly_on_demand < bursty.hourly_provisioned


def test_the_operations_page_shows_each_profile_as_the_model_gives_it():
    text = (ROOT / "docs" / "operations.md").read_text()
    for name in sizing.PROFILES:
        assert sizing.describe(name) in text, name


class _Node:
    def __init__(self, context: dict):
        self._context = context

    def try_get_context(self, key):
        return self._context.get(key)


def test_a_profile_sets_the_models_values_and_explicit_keys_still_win():
    from jobsched_infra.config import ConfigError, StackConfig

    s = sizing.profile_sizing("10k")
    config = StackConfig.from_context(_Node({"profile": "10k"}))
    assert config.segments == s.segments and config.tables == s.tables
    assert dict(config.lane_max_concurrency) == {lane.lane: lane.max_concurrency for lane in s.lanes}
    assert config.lane_pollers == (("HIGH", 2, s.lane("HIGH").max_pollers),)
    assert config.worker_reserved_concurrency == s.worker_reserved_concurrency
    # Explicit keys override: a lane given a cap runs in standard mode with it, and the worker's
    # reservation follows the caps.
    config = StackConfig.from_context(_Node({"profile": "10k", "segments": 20, "laneMaxConcurrency": {"HIGH": 1000}}))
    assert config.segments == 20 and config.lane_pollers == ()
    assert dict(config.lane_max_concurrency)["HIGH"] == 1000
    assert config.worker_reserved_concurrency == 1000 + s.lane("NORMAL").max_concurrency + s.lane("LOW").max_concurrency
    assert StackConfig.from_context(_Node({})) == StackConfig()  # no profile: today's template
    with pytest.raises(ConfigError, match="profile"):
        StackConfig.from_context(_Node({"profile": "100k"}))
    with pytest.raises(ConfigError, match="laneMaxConcurrency.HIGH"):
        StackConfig.from_context(_Node({"profile": "10k", "laneMaxConcurrency": {"HIGH": 1710}}))
    with pytest.raises(ConfigError, match="laneMaxConcurrency.MEDIUM"):
        StackConfig.from_context(_Node({"laneMaxConcurrency": {"MEDIUM": 100}}))


# A table the model provisions (steady, no index) and one it warms: no profile provisions a table
# today (docs/operations.md says why), so that path is synthesized on the Storage construct alone.
STEADY_TIMERS = sizing._table("Timers", 100, 10_000, 100, 10_000, has_index=False)
READ_HEAVY_JOBS = sizing._table("Jobs", 20_000, 100, 20_000, 100, has_index=True)

# Run in one process (one CDK runtime start, tens of seconds on a busy machine): infra/app.py as
# `cdk deploy -c profile=10k` runs it (the CLI passes context in CDK_CONTEXT_JSON), then a stack
# holding only the Storage construct with the two tables above, and two holding a function made
# by the function factory as `-c tracing=off` and `-c tracing=on` make it.
_SYNTH_SCRIPT = """
import json, os, runpy, sys
from pathlib import Path
runpy.run_path(sys.argv[1], run_name="__main__")
import aws_cdk as cdk
from jobsched.sizing import TableSizing
from jobsched_infra.config import StackConfig
from jobsched_infra.functions import FunctionFactory
from jobsched_infra.storage import Storage
app = cdk.App(outdir=os.environ["CDK_OUTDIR"] + "-storage")
stack = cdk.Stack(app, "StorageOnly")
Storage(stack, "Storage", encryption="aws-owned",
        tables=tuple(TableSizing(**t) for t in json.loads(os.environ["STORAGE_TABLES"])))
Storage(cdk.Stack(app, "StorageSharded"), "Storage", encryption="aws-owned", state_index="JobsByState")
for name, mode in (("TracingOff", "off"), ("TracingOn", "on")):
    single = cdk.Stack(app, name)
    single.node.set_context("tracing", mode)
    config = StackConfig.from_context(single.node)
    FunctionFactory(single, "Functions", Path(os.environ["LAYER_DIR"]), {}, tracing=config.traced).create(
        "Worker", "jobsched.handlers.worker.handler", {}, cdk.Duration.seconds(30), 512)
app.synth()
"""


@pytest.fixture(scope="session")
def synthesized():
    """{"profile-10k": the app's template, "storage": the Storage-only template}, synthesized once
    per input change and kept in .build/test-template beside the default template (one parallel
    test worker synthesizes while the others wait)."""
    cache = ROOT / ".build" / "test-template"
    tables = [dataclasses.asdict(t) for t in (STEADY_TIMERS, READ_HEAVY_JOBS)]
    digest = hashlib.sha256((_template_inputs_digest() + json.dumps(tables)).encode()).hexdigest()[:24]
    outdir = cache / "cdk.out.sizing"

    def synthesize() -> dict:
        for old in (outdir, Path(f"{outdir}-storage")):
            shutil.rmtree(old, ignore_errors=True)
        context = {**json.loads((ROOT / "cdk.json").read_text())["context"], "profile": "10k",
                   "layerDir": str(ROOT / ".build" / "layer")}
        env = {**os.environ, "CDK_OUTDIR": str(outdir), "CDK_CONTEXT_JSON": json.dumps(context),
               "LAYER_DIR": str(ROOT / ".build" / "layer"),
               "STORAGE_TABLES": json.dumps(tables), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
               "PYTHONPATH": os.pathsep.join([str(ROOT / "functions"), str(ROOT / "infra")])}
        subprocess.run([sys.executable, "-c", _SYNTH_SCRIPT, str(ROOT / "infra" / "app.py")], env=env,
                       check=True, capture_output=True)
        result = {"profile-10k": json.loads((outdir / "Jobsched.template.json").read_text()),
                  "storage": json.loads(Path(f"{outdir}-storage", "StorageOnly.template.json").read_text()),
                  "storage-sharded": json.loads(Path(f"{outdir}-storage", "StorageSharded.template.json").read_text()),
                  **{f"tracing-{mode}": json.loads(Path(f"{outdir}-storage", f"{name}.template.json").read_text())
                     for name, mode in (("TracingOff", "off"), ("TracingOn", "on"))}}
        for old in (outdir, Path(f"{outdir}-storage")):
            shutil.rmtree(old, ignore_errors=True)
        return result

    return kept_json(cache / f"sizing-{digest}.json", cache / ".sizing-lock", synthesize, "sizing-*.json")


@pytest.fixture(scope="session")
def profile_10k_template(synthesized):
    return synthesized["profile-10k"]


def _of(template, kind):
    return [r["Properties"] for r in template["Resources"].values() if r["Type"] == kind]


def test_the_10k_template_carries_exactly_the_models_settings(profile_10k_template):
    s = sizing.profile_sizing("10k")
    t = profile_10k_template
    assert len(_of(t, "AWS::Events::Rule")) == s.segments
    functions = {p["Handler"].split(".")[2]: p for p in _of(t, "AWS::Lambda::Function") if "Handler" in p
                 and p["Handler"].startswith("jobsched.handlers.")}
    assert functions["worker"]["ReservedConcurrentExecutions"] == s.worker_reserved_concurrency
    assert functions["api"]["ReservedConcurrentExecutions"] == s.api_reserved_concurrency
    assert functions["tick"]["ReservedConcurrentExecutions"] == s.tick_reserved_concurrency
    env = functions["worker"]["Environment"]["Variables"]
    assert {p.value: c for p, c in parse_caps(env[Env.LANE_CAPS]).items()} == \
        {lane.lane: lane.max_concurrency for lane in s.lanes}
    assert env[Env.LANE_TENANT_PERCENT] == str(s.lane_tenant_percent)
    assert env[Env.SEGMENTS] == str(s.segments)
    # Each lane's event source mapping: MaximumConcurrency in standard mode, pollers in provisioned
    # mode, never both.
    queues = {k: r for k, r in t["Resources"].items() if r["Type"] == "AWS::SQS::Queue"}
    mappings = {}
    for mapping in _of(t, "AWS::Lambda::EventSourceMapping"):
        queue = mapping["EventSourceArn"]["Fn::GetAtt"][0]
        assert queue in queues
        mappings[next(lane for lane in ("HIGH", "NORMAL", "LOW") if lane.capitalize() + "Lane" in queue)] = mapping
    for lane in s.lanes:
        mapping = mappings[lane.lane]
        if lane.mode == "standard":
            assert mapping["ScalingConfig"] == {"MaximumConcurrency": lane.max_concurrency}
            assert "ProvisionedPollerConfig" not in mapping
        else:
            assert mapping["ProvisionedPollerConfig"] == {"MinimumPollers": lane.min_pollers,
                                                          "MaximumPollers": lane.max_pollers}
            assert "ScalingConfig" not in mapping
    [stage] = _of(t, "AWS::ApiGatewayV2::Stage")  # the HTTP API's $default stage
    assert stage["DefaultRouteSettings"]["ThrottlingRateLimit"] == s.api_rate_limit
    assert stage["DefaultRouteSettings"]["ThrottlingBurstLimit"] == s.api_burst_limit
    # Tables: the model's billing and warm throughput, by key schema.
    names = {"tenantId": "Jobs", "bucket": "Timers", "jobId": "Executions"}
    seen = set()
    for table in _of(t, "AWS::DynamoDB::Table"):
        name = names.get(table["KeySchema"][0]["AttributeName"])
        if name is None:
            assert "WarmThroughput" not in table and table["BillingMode"] == "PAY_PER_REQUEST"
            continue
        seen.add(name)
        model = s.table(name)
        assert model.billing == "on-demand" and table["BillingMode"] == "PAY_PER_REQUEST"
        expected = {k: v for k, v in (("ReadUnitsPerSecond", model.warm_read),
                                      ("WriteUnitsPerSecond", model.warm_write)) if v}
        assert table.get("WarmThroughput", {}) == expected
    assert seen == {"Jobs", "Timers", "Executions"}


def test_the_default_template_sets_no_profile_settings(template):
    assert all("WarmThroughput" not in p and p["BillingMode"] == "PAY_PER_REQUEST"
               for p in _of(template, "AWS::DynamoDB::Table"))
    assert all("ProvisionedPollerConfig" not in p for p in _of(template, "AWS::Lambda::EventSourceMapping"))
    worker = next(p for p in _of(template, "AWS::Lambda::Function")
                  if p.get("Handler") == "jobsched.handlers.worker.handler")
    assert "ReservedConcurrentExecutions" not in worker


def test_the_operations_page_lists_each_profiles_findings():
    text = " ".join((ROOT / "docs" / "operations.md").read_text().split())
    for name in sizing.PROFILES:
        for finding in sizing.profile_sizing(name).findings:
            assert " ".join(finding.split()) in text, finding


def test_the_default_reads_the_sharded_state_index_alone_and_the_step_from_before_it_keeps_both(synthesized):
    """The default deploys JobsByStateShard alone (the tests' template: test_template.py);
    `-c stateIndex=JobsByState`, the step of a deployment from a release before it, keeps the old
    index beside it (CloudFormation's one index change per update: the step adds one, the default
    then deletes one); a value of its own is refused by name."""
    from jobsched_infra.config import ConfigError, StackConfig

    assert StackConfig().state_index == "JobsByStateShard"
    assert StackConfig.from_context(_Node({})).state_index == "JobsByStateShard"
    assert StackConfig.from_context(_Node({"stateIndex": "JobsByState"})).state_index == "JobsByState"
    with pytest.raises(ConfigError, match="stateIndex"):
        StackConfig.from_context(_Node({"stateIndex": "sharded"}))
    [jobs] = [t["Properties"] for t in synthesized["storage-sharded"]["Resources"].values()
              if t["Type"] == "AWS::DynamoDB::Table" and t["Properties"]["KeySchema"][0]["AttributeName"] == "tenantId"]
    assert [i["IndexName"] for i in jobs["GlobalSecondaryIndexes"]] == ["JobsByState", "JobsByStateShard"]


def test_a_table_the_model_provisions_gets_its_capacity_and_auto_scaling(synthesized):
    timers, jobs = STEADY_TIMERS, READ_HEAVY_JOBS
    assert timers.billing == "provisioned" and jobs.billing == "on-demand" and jobs.warm_read == 25_000
    template = synthesized["storage"]
    tables = {t["Properties"]["KeySchema"][0]["AttributeName"]: t["Properties"]
              for t in template["Resources"].values() if t["Type"] == "AWS::DynamoDB::Table"}
    assert tables["bucket"]["ProvisionedThroughput"] == {"ReadCapacityUnits": timers.read_min,
                                                          "WriteCapacityUnits": timers.write_min}
    assert tables["bucket"].get("BillingMode", "PROVISIONED") == "PROVISIONED"
    assert "WarmThroughput" not in tables["bucket"]
    assert tables["tenantId"]["BillingMode"] == "PAY_PER_REQUEST"
    assert tables["tenantId"]["WarmThroughput"] == {"ReadUnitsPerSecond": 25_000}
    targets = sorted((t["Properties"]["ScalableDimension"], t["Properties"]["MinCapacity"], t["Properties"]["MaxCapacity"])
                     for t in template["Resources"].values() if t["Type"] == "AWS::ApplicationAutoScaling::ScalableTarget")
    assert targets == [("dynamodb:table:ReadCapacityUnits", timers.read_min, timers.read_max),
                       ("dynamodb:table:WriteCapacityUnits", timers.write_min, timers.write_max)]
    policies = [p["Properties"]["TargetTrackingScalingPolicyConfiguration"]["TargetValue"]
                for p in template["Resources"].values() if p["Type"] == "AWS::ApplicationAutoScaling::ScalingPolicy"]
    assert policies == [sizing.PROVISIONED_TARGET_UTILIZATION] * 2


def test_cfn_lint_passes_on_the_profiles_templates(synthesized, tmp_path):
    """CloudFormation's own schema (ranges of MaximumPollers, WarmThroughput, ScalingConfig) holds
    what the model writes."""
    paths = []
    for name, template in synthesized.items():
        paths.append(tmp_path / f"{name}.template.json")
        paths[-1].write_text(json.dumps(template))
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    # W3005: the CDK adds a DependsOn on each function's role next to its GetAtt; redundant, harmless.
    run = subprocess.run([str(cfn_lint), *map(str, paths), "--format", "parseable", "--ignore-checks", "W3005"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_lane_beyond_one_mappings_pollers_is_a_finding():
    # Minute-long targets at 10,000 a second: HIGH would need 151,500 invocations at once.
    slow = sizing.size(sizing.Workload(jobs_per_second=10_000, herd=600_000, target_latency_ms=60_000))
    assert slow.lane("HIGH").max_pollers == sizing.MAX_POLLERS_HIGH
    assert slow.lane("NORMAL").max_pollers < sizing.MAX_POLLERS_HIGH
    assert [f for f in slow.findings if "pollers'" in f] == [
        "lane HIGH needs more than 10,000 pollers' 100,000 invocations: a second event source mapping (queue) per "
        "lane would be needed"]


def test_functions_are_untraced_by_default_and_traced_with_tracing_on(synthesized):
    from jobsched_infra.config import ConfigError, StackConfig

    # Off by default (the quiet deployment, docs/performance.md: Lambda's fixed sampling, which
    # cannot be configured, traces nearly every invocation at one a second, about $14 of its $59
    # a month): no tracing mode (Lambda's PassThrough) and no X-Ray statement in the roles
    def xray_actions(template) -> set[str]:
        actions = set()
        for policy in (r for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Policy"):
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                listed = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                actions |= {a for a in listed if a.startswith("xray:")}
        return actions

    deployed = synthesized["profile-10k"]  # no tracing context: as deployed by default
    functions = [r for r in deployed["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    assert functions and all(f["Properties"].get("TracingConfig", {}).get("Mode") != "Active" for f in functions)
    assert xray_actions(deployed) == set()
    [profiled] = [r for r in functions if r["Properties"]["Handler"] == "jobsched.handlers.worker.handler"]
    assert profiled["Properties"]["MemorySize"] == sizing.WORKER_MEMORY_MB == 512  # a profile's worker
    untraced = synthesized["tracing-off"]
    [function] = [r for r in untraced["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    assert function["Properties"].get("TracingConfig", {}).get("Mode") != "Active"
    assert xray_actions(untraced) == set()
    # `-c tracing=on` (or active) traces the function, with the grant it needs
    traced = synthesized["tracing-on"]
    [function] = [r for r in traced["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    assert function["Properties"]["TracingConfig"] == {"Mode": "Active"}
    assert "xray:PutTraceSegments" in xray_actions(traced)
    # and `bench cost` prices traces only for a template that traces
    assert bench.cost_prices.traced_functions(traced) and not bench.cost_prices.traced_functions(deployed)
    assert not StackConfig.from_context(_Node({})).traced and not StackConfig.from_context(_Node({"tracing": "off"})).traced
    assert StackConfig.from_context(_Node({"tracing": "on"})).traced
    assert StackConfig.from_context(_Node({"tracing": "active"})).traced
    with pytest.raises(ConfigError, match="'tracing' must be one of active, on, off"):
        StackConfig.from_context(_Node({"tracing": "Off"}))


def test_the_workers_memory_is_a_quiet_deployments_unless_a_profile_or_the_context_sets_it():
    from jobsched_infra.config import ConfigError, StackConfig

    assert StackConfig.from_context(_Node({})).worker_memory_mb == 256
    assert StackConfig.from_context(_Node({"profile": "1k"})).worker_memory_mb == 512
    assert StackConfig.from_context(_Node({"workerMemoryMb": 1024})).worker_memory_mb == 1024
    with pytest.raises(ConfigError, match="workerMemoryMb"):
        StackConfig.from_context(_Node({"workerMemoryMb": 64}))
