"""Cost per execution: every AWS call counted (botocore events) across create → tick → worker.

(a) recurring jobs over many fires, (b) one-time jobs. Prints DynamoDB write and read requests,
write units estimated from item sizes, SQS requests and Lambda invocations per executed job, and
a modelled cost per million executions next to EventBridge Scheduler's $1.00 per million."""
from __future__ import annotations

import sys

import boto3

from bench.common import NO_QUOTAS, READ_OPS, WRITE_OPS, CallCounter, emulator, machine, print_table, template, use_local_aws

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
# tick 1024 MB x 500 ms, API 512 MB x 50 ms.
GB_SECONDS = {"worker": 0.5 * 0.1, "tick": 1.0 * 0.5, "api": 0.5 * 0.05}


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
        stack = InProcessStack(template(), clock, invoker=NoopTarget(), session=session, keys={"bench": "bench-key"},
                               env_overrides=NO_QUOTAS)
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
            if scenario == "recurring":
                body.update(type="RATE", schedule="PT1M")
            else:
                body.update(type="DELAYED", delaySeconds=90 + (i % 60))
            status, answer = stack.request("POST", "/v1/jobs", body)
            assert status == 201, answer
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


def main(argv: list[str] | None = None) -> None:
    use_local_aws()
    quick = "--quick" in (argv or sys.argv[1:])
    plans = [("recurring", 10, 3), ("one-time", 20, 3)] if quick else [("recurring", 100, 20), ("one-time", 500, 4)]
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
    big = results[0]
    print_table(f"Calls in the {big['scenario']} scenario", sorted(
        (f"{s}:{op}", n, f"{n / big['executions']:.3f}") for (s, op), n in big["counter"].calls.items()),
        ("call", "count", "per execution"))
    print("\nPrices: us-east-1 list prices published by AWS in 2025; Lambda duration assumed "
          f"{GB_SECONDS} GB-s per invocation. SQS requests include the receives that returned messages "
          "and the deletes (what the Lambda event source mapping does per batch); its empty long polls "
          "are a fixed cost per lane (about 5 pollers x 3 receives a minute), not a cost per job.")


if __name__ == "__main__":
    main()
