"""Cost per execution: every AWS call counted (botocore events) across create → tick → worker.

(a) recurring jobs over many fires, (b) one-time jobs. Prints DynamoDB write and read requests,
write units estimated from item sizes, SQS requests and Lambda invocations per executed job, and
a modelled cost per million executions next to EventBridge Scheduler's $1.00 per million."""
from __future__ import annotations

import sys

import boto3

from bench.common import NO_QUOTAS, READ_OPS, WRITE_OPS, CallCounter, emulator, machine, print_table, template, use_local_aws
from jobsched.sizing import TICK_CPU_MS_PER_TIMER, TICK_MEMORY_MB, segments_for

# us-east-1 list prices (USD), as published by AWS in 2025 (DynamoDB on-demand after the
# November 2024 reduction). Check the pricing pages before relying on them.
PRICES = {
    "ddb_on_demand_write_per_million": 0.625,
    "ddb_on_demand_read_per_million": 0.125,
    "ddb_provisioned_wcu_hour": 0.00065,
    "ddb_provisioned_rcu_hour": 0.00013,
    "sqs_per_million": 0.40,
    "lambda_per_million": 0.20,
    "lambda_arm_gb_second": 0.0000133334,
    "eventbridge_scheduler_per_million": 1.00,
}
PROVISIONED_UTILIZATION = 0.7
# Lambda duration assumptions (GB-seconds per invocation): worker batch 512 MB x 100 ms,
# tick 1769 MB x 500 ms, API 512 MB x 50 ms.
GB_SECONDS = {"worker": 0.5 * 0.1, "tick": TICK_MEMORY_MB / 1024 * 0.5, "api": 0.5 * 0.05}


class NoopTarget:
    def invoke(self, job, dispatch, attempt, callback_token=None, progress=None):
        from jobsched.domain.executions import AttemptOutcome, ExecutionStatus

        return AttemptOutcome(True, ExecutionStatus.SUCCEEDED)


def run(scenario: str, jobs: int, minutes: int) -> dict:
    from jobsched.domain.clock import FakeClock
    from jobsched.local.inprocess import InProcessStack

    clock = FakeClock(1_893_456_000_000 + 5_000)  # 2030-01-01T00:00:05Z
    counter = CallCounter()
    with emulator(clock):
        session = boto3.session.Session(region_name="us-east-1")
        counter.attach(session)
        # "sqs-target": the worker's real invoker, sending to a queue tagged for the tenant in the
        # tenant's session of the targets role (its AssumeRole calls are counted with the rest).
        aws_target = scenario == "sqs-target"
        stack = InProcessStack(template(), clock, invoker=None if aws_target else NoopTarget(), session=session,
                               keys={"bench": "bench-key"}, env_overrides=NO_QUOTAS)
        inbox = session.client("sqs").create_queue(QueueName="bench-inbox", tags={"jobsched:tenant": "bench"})[
            "QueueUrl"] if aws_target else None
        invocations = {"api": 0, "tick": 0, "worker": 0}
        for name in invocations:
            function = {"api": stack.api, "tick": stack.tick_fn, "worker": stack.worker}[name]
            original = function.invoke

            def counted(event, _original=original, _name=name):
                invocations[_name] += 1
                return _original(event)
            function.invoke = counted
        counter.calls.clear()
        counter.items_written.clear()
        counter.write_units = counter.items_read = 0
        invocations.update(api=0, tick=0, worker=0)
        for i in range(jobs):
            body = {"name": f"c{i}", "target": {"type": "HTTP", "url": "http://127.0.0.1:9/x"}, "payload": {"i": i}}
            if aws_target:
                body["target"] = {"type": "SQS", "queueUrl": inbox}
            if scenario in ("recurring", "sqs-target", "recurring-expect"):
                body.update(type="RATE", schedule="PT1M")
            else:
                body.update(type="DELAYED", delaySeconds=90 + (i % 60))
            if scenario == "recurring-expect":  # absence alerts: each fire checked at its deadline
                body["expect"] = {"successWithinSec": 120}
            status, answer = stack.request("POST", "/v1/jobs", body)
            assert status == 201, answer
            # At the default per-tenant create quota (50 a second), as a client would: the strict
            # layer throttles one tenant's partition past 1,000 write units in a second.
            clock.advance_ms(20)
        stack.advance(minutes * 60)
        executions = stack.stores.executions._table.scan(Select="COUNT")["Count"]
    return {"scenario": scenario, "jobs": jobs, "executions": executions, "counter": counter,
            "invocations": invocations}


def per_execution(result: dict) -> dict:
    c: CallCounter = result["counter"]
    n = result["executions"]
    ddb_write_requests = c.total("dynamodb", WRITE_OPS)
    ddb_items_written = sum(c.items_written.values())
    ddb_read_requests = c.total("dynamodb", READ_OPS)
    sqs_requests = c.total("sqs")
    inv = result["invocations"]
    lambda_invocations = sum(inv.values())
    figures = {
        "ddb_write_requests": ddb_write_requests / n,
        "ddb_items_written": ddb_items_written / n,
        "ddb_write_units": c.write_units / n,
        "ddb_read_requests": ddb_read_requests / n,
        "ddb_items_read": c.items_read / n,
        "sqs_requests": sqs_requests / n,
        "lambda_invocations": lambda_invocations / n,
    }
    million = 1_000_000
    lambda_cost = (lambda_invocations / n * PRICES["lambda_per_million"]
                   + sum(inv[k] * GB_SECONDS[k] for k in inv) / n * million * PRICES["lambda_arm_gb_second"])
    ddb_on_demand = (figures["ddb_write_units"] * PRICES["ddb_on_demand_write_per_million"]
                     + figures["ddb_items_read"] * PRICES["ddb_on_demand_read_per_million"])
    hours_per_million = million / 3600 / PROVISIONED_UTILIZATION
    ddb_provisioned = hours_per_million * (figures["ddb_write_units"] * PRICES["ddb_provisioned_wcu_hour"]
                                           + figures["ddb_items_read"] * PRICES["ddb_provisioned_rcu_hour"])
    sqs_cost = figures["sqs_requests"] * PRICES["sqs_per_million"]
    figures["cost_on_demand"] = ddb_on_demand + sqs_cost + lambda_cost
    figures["cost_provisioned"] = ddb_provisioned + sqs_cost + lambda_cost
    figures["cost_parts"] = (ddb_on_demand, ddb_provisioned, sqs_cost, lambda_cost)
    return figures


# --- the full model: what the counted calls leave out -------------------------------------
# Every line below is an assumption named here and printed with the figures; the counted calls
# (above) supply the DynamoDB and SQS request counts per execution.
FULL_PRICES = {
    "apigw_rest_per_million": 3.50,  # REST API requests (first 333 M a month)
    "xray_trace_per_million": 5.00,  # traces recorded
    "logs_ingest_per_gb": 0.50,  # CloudWatch Logs ingestion
    "kms_per_10k": 0.03,  # KMS requests
    "sqs_chunk_bytes": 64 * 1024,  # SQS bills each 64 KB of a request as one request
}
RATES = {"low": 1.0, "high": 10_000.0}  # executions per second
WORKER_GB, TICK_GB = 0.5, TICK_MEMORY_MB / 1024
WORKER_OWN_S = 0.030  # one record's own work: its 3-5 AWS calls at 5-10 ms each, sequential
TICK_CPU_PER_TIMER_S = TICK_CPU_MS_PER_TIMER / 1000  # the bound `bench cpu` holds (measured 0.21-0.24 ms)
TICK_FIXED_S = 0.3  # a tick run with nothing due: watermark reads and writes, one query
SEGMENTS = {"low": 4, "high": segments_for(600_000)}  # the sizing rule at 10,000 jobs/s
PRECISION_WAIT_S = 0.5  # SQS delays are whole seconds: a message is visible up to 1 s early, 0.5 s on average
LOG_BYTES_PER_RECORD = 450  # the worker's "attempt" line at INFO
LOG_BYTES_PER_INVOCATION = 1100  # START, END, REPORT and the EMF metric lines of one invocation
EMPTY_RECEIVES_PER_MINUTE = 3 * 5 * 3  # 3 lanes x 5 ESM pollers x 20 s long polls
KMS_REQUESTS_PER_HOUR = 3 * 8 * 12  # 3 functions x 8 encrypted resources x a data key per 5 minutes
XRAY_RESERVOIR_PER_S, XRAY_RATE = 1.0, 0.05  # the default sampling rule: 1 a second, then 5 %


def full_model(figures: dict, scenario: str, rate_name: str, target_s: float, payload_bytes: int) -> dict:
    """USD per million executions, line by line, for one scenario at one rate."""
    rate = RATES[rate_name]
    per_batch = 1.0 if rate_name == "low" else 10.0  # records per worker invocation
    million = 1_000_000
    lines: dict[str, float] = {}
    # Lambda: records of a batch run at once, so a batch lasts its slowest record; its waiting for
    # the due second is one wait per batch, not per record.
    batch_s = PRECISION_WAIT_S + target_s + WORKER_OWN_S
    worker_gb_s = WORKER_GB * batch_s / per_batch
    ticks_per_execution = SEGMENTS[rate_name] / (rate * 60)
    tick_gb_s = TICK_GB * (TICK_CPU_PER_TIMER_S + TICK_FIXED_S * ticks_per_execution)
    api_requests = 1.0 if scenario == "one-time" else 0.0  # its create; a recurring job's is amortized away
    invocations = 1 / per_batch + ticks_per_execution + api_requests
    lines["lambda requests"] = invocations * PRICES["lambda_per_million"]
    lines["lambda worker GB-s (wait + target + own)"] = worker_gb_s * million * PRICES["lambda_arm_gb_second"]
    lines["lambda tick + api GB-s"] = (tick_gb_s + api_requests * GB_SECONDS["api"]) * million * \
        PRICES["lambda_arm_gb_second"]
    lines["api gateway"] = api_requests * FULL_PRICES["apigw_rest_per_million"]
    # DynamoDB: the counted writes, with the job item (which carries the payload) written at creation
    # and read by the worker in units of its size.
    payload_write_units = max(1, -(-(payload_bytes + 600) // 1024))
    payload_read_units = max(1, -(-(payload_bytes + 600) // 4096))
    creations = 1.0 if scenario == "one-time" else 0.05
    write_units = figures["ddb_write_units"] + creations * (payload_write_units - 1)
    read_units = figures["ddb_items_read"] + (payload_read_units - 1)  # the worker's consistent job read
    lines["dynamodb writes"] = write_units * PRICES["ddb_on_demand_write_per_million"]
    lines["dynamodb reads"] = read_units * PRICES["ddb_on_demand_read_per_million"]
    # SQS: sends batch with the tick's pages; receives and deletes come one per batch; empty long polls.
    sqs_per_execution = (1 / per_batch if rate_name == "low" else 0.1) + 2 / per_batch \
        + EMPTY_RECEIVES_PER_MINUTE / (rate * 60)
    lines["sqs"] = sqs_per_execution * PRICES["sqs_per_million"]
    sampled = min(1.0, XRAY_RESERVOIR_PER_S / max(rate / per_batch, 1e-9)) + XRAY_RATE
    lines["x-ray (sampled)"] = min(1.0, sampled) * (1 / per_batch + api_requests) * FULL_PRICES["xray_trace_per_million"]
    log_bytes = LOG_BYTES_PER_RECORD + LOG_BYTES_PER_INVOCATION / per_batch + api_requests * 1500
    lines["cloudwatch logs"] = log_bytes * million / 1e9 * FULL_PRICES["logs_ingest_per_gb"]
    lines["kms"] = KMS_REQUESTS_PER_HOUR / (rate * 3600) * million / 10_000 * FULL_PRICES["kms_per_10k"]
    lines["total"] = sum(lines.values())
    return lines


def print_full_model(results: list[dict]) -> None:
    rows = []
    for r in results:
        for rate_name in RATES:
            for target_s, payload in ((0.1, 200), (1.0, 10_240)):
                lines = full_model(r["figures"], r["scenario"], rate_name, target_s, payload)
                rows.append((r["scenario"], f"{RATES[rate_name]:,.0f}/s", f"{target_s:g} s", f"{payload // 1024 or 0.2} KB",
                             *(f"{v:.2f}" for v in lines.values())))
    header = tuple(full_model(results[0]["figures"], results[0]["scenario"], "low", 0.1, 200))
    print_table("Full model, USD per million executions (DynamoDB on-demand)", rows,
                ("scenario", "rate", "target time", "payload", *header))
    print(f"\nAssumptions: worker {WORKER_GB} GB, a batch lasts wait {PRECISION_WAIT_S} s + target + own "
          f"{WORKER_OWN_S} s (records of a batch run at once); 1 record per batch at the low rate, 10 at the "
          f"high; tick {TICK_GB} GB x ({TICK_CPU_PER_TIMER_S * 1000:.1f} ms per timer + {TICK_FIXED_S} s per run), "
          f"{SEGMENTS} segments; X-Ray's default rule ({XRAY_RESERVOIR_PER_S:g}/s + {XRAY_RATE:.0%}); logs "
          f"{LOG_BYTES_PER_RECORD} B per record + {LOG_BYTES_PER_INVOCATION} B per invocation; "
          f"{EMPTY_RECEIVES_PER_MINUTE} empty receives a minute; {KMS_REQUESTS_PER_HOUR} KMS requests an hour; "
          f"prices {FULL_PRICES}.")


def main(argv: list[str] | None = None) -> None:
    use_local_aws()
    quick = "--quick" in (argv or sys.argv[1:])
    plans = [("recurring", 10, 3), ("one-time", 20, 3), ("sqs-target", 10, 3)] if quick else \
        [("recurring", 100, 20), ("one-time", 500, 4), ("sqs-target", 100, 20)]
    print(f"cost: AWS calls per executed job, counted in-process on moto, on {machine()}")
    results = [run(*plan) for plan in plans]
    rows = []
    for r in results:
        f = per_execution(r)
        r["figures"] = f
        rows.append((r["scenario"], r["jobs"], r["executions"], f"{f['ddb_write_requests']:.2f}",
                     f"{f['ddb_items_written']:.2f}", f"{f['ddb_write_units']:.2f}", f"{f['ddb_read_requests']:.2f}",
                     f"{f['ddb_items_read']:.2f}", f"{f['sqs_requests']:.2f}", f"{f['lambda_invocations']:.3f}"))
    print_table("Per executed job (creation included)", rows,
                ("scenario", "jobs", "executions", "ddb write req", "items written", "write units", "ddb read req",
                 "items read", "sqs req", "lambda inv"))
    print_table("Modelled cost per million executions (USD)", [
        (r["scenario"], *(f"{x:.3f}" for x in r["figures"]["cost_parts"]), f"{r['figures']['cost_on_demand']:.3f}",
         f"{r['figures']['cost_provisioned']:.3f}", f"{PRICES['eventbridge_scheduler_per_million']:.2f}")
        for r in results],
        ("scenario", "ddb on-demand", f"ddb provisioned@{PROVISIONED_UTILIZATION:.0%}", "sqs", "lambda",
         "total on-demand", "total provisioned", "EventBridge Scheduler"))
    print_full_model([r for r in results if r["scenario"] != "sqs-target"])
    sqs_target = next(r for r in results if r["scenario"] == "sqs-target")
    assumed = sqs_target["counter"].calls[("sts", "AssumeRole")]
    print(f"\nAWS targets in the tenant's session (sqs-target: one tenant, one worker container): "
          f"{assumed} sts:AssumeRole for {sqs_target['executions']} executions "
          f"({assumed / sqs_target['executions']:.4f} per execution; one per tenant per container per 45 minutes)")
    big = results[0]
    print_table(f"Calls in the {big['scenario']} scenario", sorted(
        (f"{s}:{op}", n, f"{n / big['executions']:.3f}") for (s, op), n in big["counter"].calls.items()),
        ("call", "count", "per execution"))
    print("\nPrices: us-east-1 list prices published by AWS in 2025; Lambda duration assumed "
          f"{GB_SECONDS} GB-s per invocation. SQS requests include the receives that returned messages "
          "and the deletes (what the Lambda event source mapping does per batch); its empty long polls "
          "are a fixed cost per lane (about 5 pollers x 3 receives a minute), not a cost per job.")
    if not quick or "--expect" in (argv or sys.argv[1:]):  # `--quick --expect`: with the quick plans
        expectation_overhead(quick)


def expectation_overhead(quick: bool) -> None:
    """Absence alerts: what `expect` adds per execution (the expectation met, as in a healthy job):
    the same recurring jobs with and without it, the difference in calls per million executions."""
    plans = [("recurring", 10, 3), ("recurring-expect", 10, 3)] if quick else \
        [("recurring", 100, 20), ("recurring-expect", 100, 20)]
    plain, expecting = (per_execution(run(*plan)) for plan in plans)
    million = 1_000_000
    print_table("Absence alerts (expect met): added per million executions", [
        (name, f"{plain[key] * million:,.0f}", f"{expecting[key] * million:,.0f}",
         f"{(expecting[key] - plain[key]) * million:+,.0f}")
        for name, key in (("ddb write requests", "ddb_write_requests"), ("ddb items written", "ddb_items_written"),
                          ("ddb write units", "ddb_write_units"), ("ddb read requests", "ddb_read_requests"),
                          ("ddb items read", "ddb_items_read"), ("sqs requests", "sqs_requests"),
                          ("lambda invocations", "lambda_invocations"))],
        ("per million executions", "recurring", "with expect", "added"))
    print(f"modelled cost per million executions (on-demand): {plain['cost_on_demand']:.3f} -> "
          f"{expecting['cost_on_demand']:.3f} USD")


if __name__ == "__main__":
    main()
