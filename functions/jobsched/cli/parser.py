"""The command line's arguments: every group, command and flag of `jobsched` (cli/main.py runs them)."""
from __future__ import annotations

import argparse
import os

from jobsched.client import DEFAULT_URL

LOCAL_EMULATOR = "http://127.0.0.1:8090"


# --- parser --------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jobsched", description="Command line client of the jobsched API.")
    parser.add_argument("--url", default=os.environ.get("JOBSCHED_URL", DEFAULT_URL),
                        help="API base URL (JOBSCHED_URL; default the local stack)")
    parser.add_argument("--api-key", default=os.environ.get("JOBSCHED_API_KEY"), help="API key (JOBSCHED_API_KEY)")
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    groups = parser.add_subparsers(dest="group", required=True)

    jobs = groups.add_parser("jobs", help="create, list, change and run jobs").add_subparsers(dest="command",
                                                                                               required=True)
    for name in ("create", "update"):
        cmd = jobs.add_parser(name, help=f"{name} a job (flags, or --file with a JSON body)")
        if name == "update":
            cmd.add_argument("job_id")
            cmd.add_argument("--if-match", type=int, help="the version the change is based on")
        else:
            cmd.add_argument("--idempotency-key")
        cmd.add_argument("--file", help="JSON body of the job ('-' for stdin); flags override its fields. create: "
                                        "a .jsonl file (a job request a line) is sent in batches of up to 100")
        cmd.add_argument("--name")
        cmd.add_argument("--type", choices=["ONE_TIME", "DELAYED", "CRON", "RATE"])
        cmd.add_argument("--schedule", help="cron '0 3 * * *', duration PT5M, or at()/rate()/cron()")
        cmd.add_argument("--timezone")
        cmd.add_argument("--run-at", help="ONE_TIME: RFC 3339 instant")
        cmd.add_argument("--delay", type=int, help="DELAYED: seconds")
        cmd.add_argument("--start-at")
        cmd.add_argument("--end-at")
        cmd.add_argument("--target-url", help="HTTP target URL")
        cmd.add_argument("--method", default="POST", help="HTTP target method (default POST)")
        cmd.add_argument("--target", help="target as JSON")
        cmd.add_argument("--payload", help="payload as JSON")
        cmd.add_argument("--max-attempts", type=int)
        cmd.add_argument("--timeout", type=int, help="seconds per attempt")
        cmd.add_argument("--priority", choices=["HIGH", "NORMAL", "LOW"])
        cmd.add_argument("--steps", help="steps as JSON (a DAG run at each fire, instead of one target)")
        cmd.add_argument("--retry-on-4xx", action="store_true", help="retry an HTTP 4xx other than 408 and 429")
        cmd.add_argument("--on-success-url", help="HTTP hook called once per execution that succeeds")
        cmd.add_argument("--on-failure-url", help="HTTP hook called once per execution that ends DEAD")
        cmd.add_argument("--tags", action="append", metavar="KEY:VALUE",
                         help="a tag (repeatable); update: added to the job's tags")
        cmd.add_argument("--flow-control", help='flow control as JSON: {"key": "partner-api", "maxConcurrency": 5, '
                                                '"ratePerSecond": 10}')
        # Schedule bounds and self-pausing (CRON and RATE jobs).
        cmd.add_argument("--max-runs", type=int, help="fire at most this many times, then COMPLETED")
        cmd.add_argument("--pause-after-failures", type=int,
                         help="pause the job after this many consecutive executions ended DEAD")
        # Catch-up that does not flood.
        cmd.add_argument("--misfire-policy", choices=["RUN_ONCE", "RUN_ALL", "SKIP"],
                         help="what a recurring job does with occurrences missed in an outage or a pause")
        cmd.add_argument("--max-catch-up", type=int, metavar="N",
                         help="RUN_ALL: run at most the newest N missed occurrences (1..10000); older ones "
                              "are SKIPPED (MISSED_WINDOW)")
        cmd.add_argument("--catch-up-per-minute", type=int, metavar="N",
                         help="RUN_ALL: release missed occurrences at most N a minute (1..600)")
        cmd.add_argument("--exclude-calendar", action="append", metavar="NAME",
                         help="no fire on this calendar's dates (repeatable; replaces the job's list)")
        cmd.add_argument("--expect-success-within", type=int, metavar="SEC",
                         help="absence alert: each fire must report success within SEC seconds (60..604800)")
    listing = jobs.add_parser("list", help="the tenant's jobs")
    _filters(listing)
    _paging(listing)
    for name, text in (("get", "one job"), ("delete", "cancel: no future fires"), ("pause", "pause a recurring job"),
                       ("resume", "resume from now")):
        one = jobs.add_parser(name, help=text)
        one.add_argument("job_id")
        if name == "pause":
            one.add_argument("--reason", help="why (shown on the job as pausedReason)")
    bulk = jobs.add_parser("bulk", help="pause, resume or cancel every matching job")
    bulk.add_argument("action", choices=["pause", "resume", "cancel"])
    _filters(bulk)
    bulk.add_argument("--dry-run", action="store_true", help="count and list the matches, change nothing")
    bulk.add_argument("--reason", help="pause: the reason each job shows")
    bulk.add_argument("--all", dest="all_jobs", action="store_true",
                      help="act on every job of the tenant (needed when no filter is given)")
    backfill = jobs.add_parser("backfill", help="run the occurrences of a past window now (no duplicates)")
    backfill.add_argument("job_id")
    backfill.add_argument("--from", dest="from_", required=True, help="RFC 3339 instant (inclusive)")
    backfill.add_argument("--to", required=True, help="RFC 3339 instant (exclusive, not in the future)")
    job_stats = jobs.add_parser("stats", help="a job's outcomes and lateness over the last hour, day or week")
    job_stats.add_argument("job_id")
    job_stats.add_argument("--window", choices=["1h", "24h", "7d"], default="24h")
    occurrences = jobs.add_parser("occurrences", help="why did it (not) run: every occurrence of a window and "
                                                      "what became of it")
    occurrences.add_argument("job_id")
    occurrences.add_argument("--from", dest="from_", help="RFC 3339 instant (default: a day before --to)")
    occurrences.add_argument("--to", help="RFC 3339 instant, exclusive (default: an hour from now)")
    _paging(occurrences)
    trigger = jobs.add_parser("trigger", help="run now, outside the schedule")
    trigger.add_argument("job_id")
    trigger.add_argument("--idempotency-key")

    executions = groups.add_parser("executions", help="execution history").add_subparsers(dest="command",
                                                                                          required=True)
    ex_list = executions.add_parser("list", help="a job's executions, newest first")
    ex_list.add_argument("job_id")
    _paging(ex_list)
    for name, text in (("get", "one execution with its attempts"), ("cancel", "cancel a pending or running one"),
                       ("redrive", "run a dead execution again")):
        executions.add_parser(name, help=text).add_argument("execution_id")

    _paging(groups.add_parser("dead-letters", help="executions that exhausted their retries"))
    signing = groups.add_parser("signing", help="the secret that signs your HTTP target calls").add_subparsers(
        dest="command", required=True)
    rotate = signing.add_parser("rotate", help="a new secret (shown once); the previous one keeps signing for "
                                               "--grace-sec")
    rotate.add_argument("--grace-sec", type=int, default=86_400)
    preview = groups.add_parser("preview", help="the next fire times of a schedule")
    preview.add_argument("schedule")
    preview.add_argument("--type", default="CRON", choices=["CRON", "RATE", "ONE_TIME"])
    preview.add_argument("--timezone", default="UTC")
    preview.add_argument("--count", type=int, default=10)
    preview.add_argument("--after", help="RFC 3339 instant (default now)")
    preview.add_argument("--exclude-calendar", action="append", metavar="NAME",
                         help="skip this calendar's dates, as a job would (repeatable)")

    calendars = groups.add_parser("calendars", help="exclusion calendars: dates on which jobs do not fire"
                                  ).add_subparsers(dest="command", required=True)
    put = calendars.add_parser("put", help="create or replace a calendar (at most 1,000 dates)")
    put.add_argument("name")
    put.add_argument("--date", action="append", metavar="YYYY-MM-DD", help="a date (repeatable)")
    put.add_argument("--description")
    _paging(calendars.add_parser("list", help="the tenant's calendars"))
    for name, text in (("get", "one calendar and its dates"), ("delete", "delete a calendar no job uses")):
        calendars.add_parser(name, help=text).add_argument("name")

    stats = groups.add_parser("stats", help="lateness and outcomes of the local stack (from its EMF metrics)")
    stats.add_argument("--file", help="EMF lines kept by `make run` (default: metrics.jsonl in JOBSCHED_WORKDIR, "
                                      ".build/local)")

    keys = groups.add_parser("keys", help="tenant API keys (needs AWS credentials, or --local)")
    keys.add_argument("--local", action="store_true", help=f"the local stack's emulator ({LOCAL_EMULATOR})")
    keys.add_argument("--endpoint-url", help="an AWS endpoint to use instead")
    keys.add_argument("--stack", default="Jobsched", help="CloudFormation stack to find the ApiKeys table in")
    keys.add_argument("--table", help="the ApiKeys table name (instead of looking it up)")
    key_commands = keys.add_subparsers(dest="command", required=True)
    key_commands.add_parser("create", help="issue a key for a tenant").add_argument("tenant")
    key_commands.add_parser("list", help="keys, of one tenant or all").add_argument("tenant", nargs="?")
    key_commands.add_parser("revoke", help="revoke a key by its id").add_argument("key_id")

    upgrade = groups.add_parser("upgrade", help="what an operator runs once after a stack update (AWS credentials, "
                                                "or --local)")
    upgrade.add_argument("--local", action="store_true", help=f"the local stack's emulator ({LOCAL_EMULATOR})")
    upgrade.add_argument("--endpoint-url", help="an AWS endpoint to use instead")
    upgrade.add_argument("--stack", default="Jobsched", help="CloudFormation stack to find the Jobs table in")
    upgrade.add_argument("--table", help="the Jobs table name (instead of looking it up)")
    upgrade_commands = upgrade.add_subparsers(dest="command", required=True)
    shards = upgrade_commands.add_parser("state-shards", help="give every job its stateShard (the JobsByStateShard "
                                                              "index); resumes where a run stopped; safe to repeat")
    shards.add_argument("--pages", type=int, help="stop after this many pages of 500 items (default: to the end)")
    return parser


def _paging(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=20, help="page size, 1..100")
    parser.add_argument("--all", action="store_true", help="follow every page")


def _filters(parser) -> None:
    parser.add_argument("--tag", action="append", help="key:value (repeatable: all must match)")
    parser.add_argument("--state", choices=["ACTIVE", "PAUSED", "COMPLETED", "CANCELLED"])
    parser.add_argument("--name-prefix")
