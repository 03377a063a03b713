"""bench cost's quiet deployment (one recurring execution a second for a month), as the template
deploys it by default, and the cuts to it: those built (their saving: the same counts priced with
what the cut removed) and those weighed and not built, each with what it gives up."""
from __future__ import annotations

import json

from bench.common import print_table
from bench.cost_measure import Measured
from bench.cost_prices import (KMS_REUSE_S, QUIET_GOAL, UNALIGNED_WAIT_S, WhatIf, has_kms_key, hourly_metrics,
                               idle_pollers, lane_key_reuse_s, quiet_month, traced_functions)
from jobsched.store.queues import ALIGN_EARLY_MS

# The alarms the template deploys only with container tasks (`-c ecsClusters`): the task-events
# function's errors and its on-failure queue (alarms.py). Nothing invokes that function without them.
TASK_EVENTS_ALARM_METRICS = 2


def _has_throttle_alarms(tpl: dict) -> bool:
    return any(r["Type"] == "AWS::CloudWatch::Alarm" and "ThrottleEvents" in json.dumps(r["Properties"])
               for r in tpl["Resources"].values())


def _has_task_events_alarms(tpl: dict) -> bool:
    return any(r["Type"] == "AWS::CloudWatch::Alarm" and rid.replace("_", "").lower().startswith("alarmstaskevents")
               for rid, r in tpl["Resources"].items())


def quiet_cuts(m: Measured) -> list[tuple[str, WhatIf, str, str]]:
    """(cut, what the deployment would be without it or with it, built or not, gives up): a built
    cut's WhatIf puts back what it removed (its saving: that total minus the deployed one); a
    weighed one's WhatIf applies it (its saving: the deployed total minus that)."""
    tpl = m.template
    cuts = []
    if has_kms_key(tpl):
        cuts.append(("AWS-owned keys for the tables, SQS-managed (SSE-SQS) for the queues (-c encryption=aws-owned, "
                     "for a new deployment only; the stack's own key as deployed)", WhatIf(kms=False), "weighed",
                     "the key's own policy, CloudTrail of each data-key use, crypto-shredding by deleting the key, "
                     "and signing secrets sealed by KMS; a stack deployed with the key must keep it (its tenants' "
                     "secrets are sealed with it)"))
    else:
        cuts.append(("AWS-owned keys for the tables, SQS-managed (SSE-SQS) for the queues (-c encryption=aws-owned)",
                     WhatIf(kms=True), "built",
                     "the key's own policy, CloudTrail of each data-key use, crypto-shredding by deleting the key, "
                     "and signing secrets sealed by KMS (kept as the table keeps everything: encrypted at rest)"))
    if has_kms_key(tpl) and lane_key_reuse_s(tpl) > KMS_REUSE_S:
        cuts.append((f"SQS reuses a lane's data key {lane_key_reuse_s(tpl) // 60} minutes (5 before: SQS's default)",
                     WhatIf(lane_key_reuse_s=KMS_REUSE_S), "built",
                     "a disabled key or revoked grant stops SQS's use of a data key it holds after up to that long "
                     "(5 minutes before); CloudTrail records a lane's data-key requests that much less often"))
    if not _has_task_events_alarms(tpl):
        cuts.append(("task-events alarms only with -c ecsClusters (2 alarm metrics)",
                     WhatIf(alarm_metrics_added=TASK_EVENTS_ALARM_METRICS), "built",
                     "nothing: without container clusters no rule invokes the task-events function"))
    cuts.append(("DeadRate reads Dead and Succeeded (the executions that ended), not Retried as well (1 alarm metric)",
                 WhatIf(alarm_metrics_added=1), "built",
                 "nothing: a retried attempt has not ended; counted, it only made the dead share smaller while "
                 "jobs retried"))
    if m.worker_wait_s is not None:
        cuts.append((f"aligned sends: the tick sends a small hand-off's messages {ALIGN_EARLY_MS} ms before whole "
                     f"seconds ahead of their instants (measured: the worker waits {m.worker_wait_s * 1000:.0f} ms a "
                     f"fire, not the model's {UNALIGNED_WAIT_S * 1000:.0f}; the tick {m.tick_wait_s * 1000:.0f} ms a "
                     "run at its memory)", WhatIf(unaligned_sends=True), "built",
                     "nothing of precision (a message surfaces 100 ms before its instant: late only if its send and "
                     "Lambda's poll take longer, where unaligned every message whose remainder was shorter was); "
                     "each tick run up to a second longer; a bucket of several pages (a herd, 10,000/s) sent as before"))
    if not any(name == "Dispatched" for name, _ in hourly_metrics(m)):
        cuts.append(("no Dispatched metric: the dashboard sums the ticks' log lines a minute at a time (Logs Insights)",
                     WhatIf(hourly_metrics_added=1), "built",
                     "the count as a metric (15 months in CloudWatch, for alarms of one's own); the log lines keep it "
                     "30 days, and Logs Insights bills $0.005 a GB scanned while the dashboard is open"))
    if not _has_throttle_alarms(tpl):
        cuts.append(("one alarm on the API's own 5xx answers (Api5xx, sent only when not zero) instead of the "
                     "DynamoDB throttle alarms (3 tables, 6 alarm metrics)", WhatIf(alarm_metrics_added=5), "built",
                     "warning of throttles the SDK's retries absorb (they cost time only; the dashboard still graphs "
                     "them); a throttle they do not absorb fires ApiServerErrors (the API's 503s had no alarm), "
                     "TickBehind or TickErrors, WorkerRecordErrors or LatenessP99"))
    cuts.append(("a run of sparse due seconds in one timer pack (seconds with one next timer of a bucket slice in a "
                 "hand-off; every second its own pack before)", WhatIf(timer_packs_of_one_second=True), "built",
                 "nothing measured: bench/pack_fill.py keeps 78 entries a lane message at 10,000/s minute after "
                 "minute and the fill of packs of one second at 1-3,000/s (within 5 %, settled)"))
    cuts += [
        ("the worker at 128 MB (-c workerMemoryMb=128; 256 as deployed)", WhatIf(worker_mb=128), "weighed",
         "CPU: 0.072 vCPU, cold-start imports twice as long; memory: about 52 MB of process and up to 59 MB of "
         "target clients (bench clients) in 128"),
        ("no wait for the due second: a fire's message made visible at or after its instant",
         WhatIf(late_instead_of_wait=True), "weighed (tick and worker code)",
         "precision: SQS delays and visibility are whole seconds, so fires would start up to 1 s late "
         "(0.5 s on average) instead of on time; the 1 s p99 goal would have no room left"),
        ("one segment (-c segments=1; 4 as deployed)", WhatIf(segments=1), "weighed",
         "a herd's hand-off: one tick run a minute reads every timer (the sizing rule, docs/operations.md)"),
        ("no MaximumConcurrency on the lanes (2 idle pollers each instead of 5)",
         WhatIf(pollers_per_lane=2), "weighed",
         "the lanes' caps: HIGH's larger share and the bound that keeps a surge off the API's and tick's pool"),
        ("Lambda's system logs at WARN (JSON log format): no START/END/REPORT lines", WhatIf(platform_lines=False),
         "weighed", "each invocation's REPORT line (duration, memory used, init); AWS notes JSON format changes "
         "how EMF lines are parsed: not verified here without an account"),
        ("one alarm on the API's 5xx responses instead of ApiErrors and AuthorizerErrors (1 alarm metric)",
         WhatIf(alarm_metrics_added=-1), "weighed",
         "the failing function named by its alarm; with -c regions, the API function's errors on requests another "
         "region forwards to it by Lambda invoke (no API Gateway of this region counts them)"),
    ]
    return cuts


def print_quiet_month(quiet: Measured) -> None:
    month = quiet_month(quiet)
    print_table("A quiet deployment: one recurring execution a second for a month (USD), as deployed by default",
                [(k, f"{v:.2f}") for k, v in month.items()], ("line", "USD a month"))
    print(f"goal: at most {QUIET_GOAL:.2f} USD a month ({'met' if month['total'] <= QUIET_GOAL else 'missed'}); "
          f"{quiet.scenario.jobs} jobs, one a second, measured over {quiet.scenario.fire_minutes} minute(s) once over "
          f"{quiet.scenario.settle_minutes} minutes old; {idle_pollers(quiet.template)} idle pollers on the lanes")
    if quiet.worker_wait_s is not None:
        print(f"measured (each segment's tick at its own instant of the minute): a lane message surfaces "
              f"{quiet.worker_wait_s * 1000:.0f} ms before its fire's instant on average (what the worker waits), "
              f"over {len(quiet.fire.early_ms)} messages; a tick run waits {quiet.tick_wait_s * 1000:.0f} ms on "
              f"average before its sends, over {quiet.fire.invocations['tick']} runs")
    print("metrics sent every hour: " + ", ".join(sorted(
        name + "".join(f"[{d}={v}]" for d, v in dims if d != "service") for name, dims in hourly_metrics(quiet))))
    traced = traced_functions(quiet.template)
    other = quiet_month(quiet, WhatIf(tracing=not traced))["total"]
    print(f"the same with -c tracing={'off' if traced else 'on'}: {other:.2f} USD a month (X-Ray: Lambda's "
          f"fixed sampling traces nearly every invocation at one a second)")
    rows = []
    for label, what_if, status, gives in quiet_cuts(quiet):
        other = quiet_month(quiet, what_if)["total"]
        saving = other - month["total"] if status == "built" else month["total"] - other
        rows.append((label, f"{saving:.2f}", status, gives))
    print_table("Cuts to the quiet deployment (USD a month saved; built: in the default template, priced by "
                "putting back what it removed; weighed: priced, not built)", rows,
                ("cut", "saves", "status", "gives up"))
