"""`jobsched`: the command line client.

Configured by JOBSCHED_URL (default: the local stack, http://127.0.0.1:8080) and
JOBSCHED_API_KEY. Tables for people, `--json` for scripts. Exit codes:
0 ok · 1 invalid request (400, 413, 422) · 2 usage · 3 not found · 4 conflict ·
5 no or bad API key · 6 unreachable, throttled or a server error."""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable

from jobsched.cli import batch
from jobsched.cli.parser import build_parser
from jobsched.client import ApiError, Client, Pager, dump, request_of

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_CONFLICT, EXIT_AUTH, EXIT_UNAVAILABLE = range(7)


def exit_code_for(error: ApiError) -> int:
    if error.status in (400, 413, 422):
        return EXIT_INVALID
    return {404: EXIT_NOT_FOUND, 409: EXIT_CONFLICT, 401: EXIT_AUTH, 403: EXIT_AUTH}.get(error.status, EXIT_UNAVAILABLE)


# --- output --------------------------------------------------------------------------------
def table(rows: list[dict], columns: list[tuple[str, str]], out) -> None:
    if not rows:
        print("(none)", file=out)
        return
    cells = [[("" if row.get(key) is None else str(row.get(key))) for key, _ in columns] for row in rows]
    widths = [max(len(title), *(len(c[i]) for c in cells)) for i, (_, title) in enumerate(columns)]
    print("  ".join(title.ljust(w) for (_, title), w in zip(columns, widths)).rstrip(), file=out)
    for c in cells:
        print("  ".join(v.ljust(w) for v, w in zip(c, widths)).rstrip(), file=out)


def details(record: dict, keys: list[str], out) -> None:
    width = max(len(k) for k in keys)
    for key in keys:
        value = record.get(key)
        if isinstance(value, (dict, list)):
            value = json.dumps(value)
        print(f"{key.ljust(width)}  {'' if value is None else value}", file=out)


JOB_COLUMNS = [("jobId", "JOB ID"), ("name", "NAME"), ("type", "TYPE"), ("schedule", "SCHEDULE"),
               ("state", "STATE"), ("nextFireAt", "NEXT FIRE")]
JOB_KEYS = ["jobId", "name", "type", "schedule", "timezone", "runAt", "delaySeconds", "startAt", "endAt", "state",
            "nextFireAt", "target", "payload", "retryPolicy", "timeoutSec", "priority", "version", "createdAt",
            "updatedAt"]
# Catch-up that does not flood: `jobs get` shows the misfire policy (an object for a catch-up).
JOB_KEYS.insert(JOB_KEYS.index("priority") + 1, "misfirePolicy")
EXECUTION_COLUMNS = [("executionId", "EXECUTION ID"), ("status", "STATUS"), ("attempt", "ATTEMPT"),
                     ("scheduledAt", "SCHEDULED"), ("lateMs", "LATE MS"), ("error", "ERROR")]
OCCURRENCE_COLUMNS = [("scheduledAt", "SCHEDULED"), ("outcome", "OUTCOME"), ("reason", "REASON"),
                      ("lateMs", "LATE MS"), ("status", "STATUS"), ("expectation", "EXPECT"), ("detail", "DETAIL")]
EXECUTION_KEYS = ["executionId", "jobId", "status", "attempt", "scheduledAt", "startedAt", "finishedAt", "durationMs",
                  "lateMs", "nextAttemptAt", "error", "output"]


# --- job bodies ----------------------------------------------------------------------------
# A job's schedule: `jobs update --type` drops these (they belong to the old type). A PUT's other
# fields are the client's JOB_REQUEST_FIELDS (the API's JobRequest), all sent back.
SCHEDULE_FIELDS = ("schedule", "timezone", "runAt", "delaySeconds", "startAt", "endAt")
SCHEDULE_FIELDS += ("maxRuns",)  # a new --type drops it with the schedule (a ONE_TIME job has none)
# Schedule bounds and self-pausing: shown by `jobs get`.
JOB_KEYS += ["maxRuns", "runCount", "completedReason", "pauseAfterFailures", "pausedReason"]
# Exclusion calendars: shown by `jobs get`.
JOB_KEYS += ["excludeCalendars"]
CALENDAR_COLUMNS = [("name", "NAME"), ("dates", "DATES"), ("description", "DESCRIPTION"), ("updatedAt", "UPDATED")]


def read_body_file(path: str) -> dict:
    try:
        handle = sys.stdin if path == "-" else open(path, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--file: cannot read {path}: {exc.strerror or exc}") from None
    with handle:
        try:
            body = json.load(handle)
        except (ValueError, UnicodeDecodeError) as exc:
            raise UsageError(f"--file: not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise UsageError("--file: the body must be a JSON object")
    return body


def json_lines_file(args) -> list[tuple[int, dict]] | None:
    """`jobs create --file F`: F's job requests, a line each, when F is a JSON-lines file (a
    `.jsonl` name, or a JSON object a line); None for one JSON body."""
    if not args.file or args.file == "-":
        return None
    try:
        with open(args.file, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--file: cannot read {args.file}: {getattr(exc, 'strerror', None) or exc}") from None
    if not batch.is_json_lines(args.file, text):
        return None
    if args.idempotency_key:
        raise UsageError("--idempotency-key: a JSON-lines file takes a key per job (its idempotencyKey field)")
    try:
        return batch.read_json_lines(text)
    except batch.JsonLinesError as exc:
        raise UsageError(f"--file: {exc}") from None


def create_batches(args, client: Client, lines: list[tuple[int, dict]], out, show) -> int:
    """Each line's request with the flags applied (as to one --file body), sent in batches; prints
    a line per job: its line number and its id, or its error."""
    flags = argparse.Namespace(**{**vars(args), "file": None})
    jobs = []
    for number, job in lines:
        try:
            jobs.append((number, job_body(flags, job)))
        except UsageError as exc:
            raise UsageError(f"--file: line {number}: {exc}") from None
    results = batch.send(client, jobs)

    def render() -> None:
        for result in results:
            if result["status"] == 201:
                print(f"{result['line']}\t{result['job']['jobId']}", file=out)
            else:
                error = result["error"]
                print(f"{result['line']}\t{result['status']} {error['code']}: {error['message']}", file=out)

    show(results, render)
    failed = [r for r in results if r["status"] != 201]
    if not failed:
        return EXIT_OK
    first = failed[0]
    return exit_code_for(ApiError(first["status"], first["error"]["code"], first["error"]["message"], []))


def updated_body(args, current: dict) -> dict:
    """`jobs update`: the job as it is, with only the fields the user gave changed. A new --type
    drops the old schedule's fields (they belong to the old type). Every field the job has is
    sent back (the client's request_of): a PUT replaces them all."""
    base = request_of(current)
    if args.type and args.type != base.get("type"):
        for name in SCHEDULE_FIELDS:
            base.pop(name, None)
    return job_body(args, base)


def job_body(args, base: dict | None = None) -> dict:
    body = dict(base or {})
    if args.file:
        body.update(read_body_file(args.file))
    flags = {
        "name": args.name, "type": args.type, "schedule": args.schedule, "timezone": args.timezone,
        "runAt": args.run_at, "delaySeconds": args.delay, "startAt": args.start_at, "endAt": args.end_at,
        "timeoutSec": args.timeout, "priority": args.priority,
    }
    flags.update({"maxRuns": args.max_runs, "pauseAfterFailures": args.pause_after_failures})  # schedule bounds
    body.update({k: v for k, v in flags.items() if v is not None})
    if args.target_url:
        body["target"] = {"type": "HTTP", "url": args.target_url, "method": args.method}
    if args.target:
        body["target"] = _json_arg(args.target, "--target")
    if args.payload is not None:
        body["payload"] = _json_arg(args.payload, "--payload")
    if args.max_attempts is not None:
        body.setdefault("retryPolicy", {})["maxAttempts"] = args.max_attempts
    if args.steps:
        body["steps"] = _json_arg(args.steps, "--steps")
    if args.retry_on_4xx:
        body["retryOn4xx"] = True
    if args.flow_control:
        body["flowControl"] = _json_arg(args.flow_control, "--flow-control")
    if args.tags:
        body["tags"] = {**(body.get("tags") or {}), **dict(_tag_arg(text) for text in args.tags)}
    for flag, field in ((args.on_success_url, "onSuccess"), (args.on_failure_url, "onFailure")):
        if flag:
            body[field] = {"type": "HTTP", "url": flag}
    _misfire_flags(args, body)
    if args.exclude_calendar:  # exclusion calendars: the flags replace the job's list
        body["excludeCalendars"] = list(args.exclude_calendar)
    if args.expect_success_within is not None:  # absence alerts
        body["expect"] = {"successWithinSec": args.expect_success_within}
    for required in ("name", "type"):
        if required not in body:
            raise UsageError(f"a job needs --{required} (or --file with it)")
    if "target" not in body and "steps" not in body:
        raise UsageError("a job needs --target-url (an HTTP target), --target JSON, --steps JSON, or --file")
    return body


def _misfire_flags(args, body: dict) -> None:
    """Catch-up that does not flood: --misfire-policy alone sends the string form; with
    --max-catch-up or --catch-up-per-minute, the object form (policy RUN_ALL unless given)."""
    if args.max_catch_up is None and args.catch_up_per_minute is None:
        if args.misfire_policy:
            body["misfirePolicy"] = args.misfire_policy
        return
    current = body.get("misfirePolicy")
    policy = {"policy": current} if isinstance(current, str) else dict(current or {})
    policy["policy"] = args.misfire_policy or policy.get("policy") or "RUN_ALL"
    for value, name in ((args.max_catch_up, "maxCatchUp"), (args.catch_up_per_minute, "catchUpPerMinute")):
        if value is not None:
            policy[name] = value
    body["misfirePolicy"] = policy


def _tag_arg(text: str) -> tuple[str, str]:
    """--tags key:value (the value may hold ':' itself, as filters read it)."""
    key, separator, value = text.partition(":")
    if not separator or not key:
        raise UsageError(f"--tags: expected key:value, got {text!r}")
    return key, value


def _json_arg(text: str, flag: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{flag}: not JSON: {exc}") from None


class UsageError(Exception):
    pass


# --- commands ------------------------------------------------------------------------------
def run_command(args, client: Client, out) -> int:
    emit_json = args.json

    def show(value: Any, render: Callable[[], None]) -> int:
        if emit_json:
            print(json.dumps(value, indent=2), file=out)
        else:
            render()
        return EXIT_OK

    group, command = args.group, getattr(args, "command", None)
    if group == "jobs":
        if command == "create":
            lines = json_lines_file(args)
            if lines is not None:  # a JSON-lines file: batches of up to 100 (cli/batch.py)
                return create_batches(args, client, lines, out, show)
            job = dump(client.jobs.create(job_body(args), idempotency_key=args.idempotency_key))
            return show(job, lambda: details(job, JOB_KEYS, out))
        if command == "list":
            page = _collect(client.jobs.list(state=args.state, tag=args.tag or None, name_prefix=args.name_prefix,
                                             limit=args.limit), args.all)
            return show(page, lambda: table_page(page, JOB_COLUMNS, out))
        if command == "get":
            job = dump(client.jobs.get(args.job_id))
            return show(job, lambda: details(job, JOB_KEYS, out))
        if command == "update":
            # Read, change what was given, write back under If-Match: fields not given keep their
            # value, and a change made meanwhile by someone else answers 409 instead of being lost.
            current = dump(client.jobs.get(args.job_id))
            version = args.if_match if args.if_match is not None else current["version"]
            job = dump(client.jobs.replace(args.job_id, updated_body(args, current), if_match=version))
            return show(job, lambda: details(job, JOB_KEYS, out))
        if command in ("delete", "pause", "resume"):
            if command == "pause":
                job = dump(client.jobs.pause(args.job_id, args.reason or None))
            else:
                job = dump(getattr(client.jobs, command)(args.job_id))
            return show(job, lambda: print(f"{job['jobId']} {job['state']}", file=out))
        if command == "bulk":
            answer = dump(client.jobs.bulk({
                "action": args.action.upper(), "dryRun": args.dry_run, "reason": args.reason, "all": args.all_jobs,
                "filter": {"tag": args.tag or None, "state": args.state, "namePrefix": args.name_prefix}}))
            # A dry run's `applied` counts the jobs the action would change, not every match.
            return show(answer, lambda: print(
                f"{'would apply to' if args.dry_run else 'applied to'} {answer['applied']} of {answer['matched']} "
                "matching jobs", *answer["jobIds"], sep="\n", file=out))
        if command == "backfill":
            answer = dump(client.jobs.backfill(args.job_id, args.from_, args.to))
            return show(answer, lambda: print(f"{answer['count']} occurrences sent", *answer["executionIds"],
                                              sep="\n", file=out))
        if command == "stats":
            answer = dump(client.jobs.stats(args.job_id, args.window))
            late = answer["lateMs"]

            def render_stats() -> None:
                print(f"last {answer['window']} ({answer['from']} to {answer['to']})"
                      + ("" if answer["complete"] else ": the newest 20,000 executions only"), file=out)
                print(f"fires {answer['fires']}  succeeded {answer['succeeded']}  failed {answer['failed']}  "
                      f"dead {answer['dead']}  skipped {answer['skipped']}  running {answer['running']}", file=out)
                print("lateness ms: " + "  ".join(f"{k} {'-' if v is None else v}" for k, v in late.items()), file=out)
            return show(answer, render_stats)
        if command == "occurrences":
            page = _collect(client.jobs.occurrences(args.job_id, from_=args.from_, to=args.to, limit=args.limit),
                            args.all)
            return show(page, lambda: table_page(page, OCCURRENCE_COLUMNS, out))
        if command == "trigger":
            execution = dump(client.jobs.trigger(args.job_id, idempotency_key=args.idempotency_key))
            # The bare id on stdout, so that `$(jobsched jobs trigger ...)` feeds `executions get`;
            # its status on stderr, as the other words for people (all of it with --json).
            return show(execution, lambda: (print(execution["executionId"], file=out),
                                            print(f"jobsched: {execution['status']}", file=sys.stderr)))
    if group == "executions":
        if command == "list":
            page = _collect(client.executions.list(args.job_id, limit=args.limit), args.all)
            return show(page, lambda: table_page(page, EXECUTION_COLUMNS, out))
        if command == "get":
            execution = dump(client.executions.get(args.execution_id))

            steps = execution.get("steps")
            if steps:  # a run: its steps in the job's order, each with what it waits for
                job = dump(client.jobs.get(execution["jobId"]))
                after = {s["name"]: ", ".join(s.get("dependsOn", [])) or "-" for s in job.get("steps") or []}
                steps = [{**s, "after": after.get(s["name"], "?")} for s in steps]

            def render() -> None:
                details(execution, EXECUTION_KEYS, out)
                if execution.get("task"):  # a container job: its task, exit code and logs
                    print("task:", file=out)
                    details(execution["task"], ["taskArn", "exitCode", "stoppedReason", "logUrl"], out)
                if steps:
                    print("steps:", file=out)
                    table(steps, [("name", "STEP"), ("after", "AFTER"), ("status", "STATUS"), ("attempt", "ATTEMPT"),
                                  ("startedAt", "STARTED"), ("finishedAt", "FINISHED"), ("error", "ERROR")], out)
                print("attempts:", file=out)
                table(execution["attempts"], [("attempt", "ATTEMPT"), ("status", "STATUS"), ("startedAt", "STARTED"),
                                              ("finishedAt", "FINISHED"), ("error", "ERROR")], out)
            return show(execution, render)
        if command in ("cancel", "redrive"):
            execution = dump(getattr(client.executions, command)(args.execution_id))
            return show(execution, lambda: print(f"{execution['executionId']} {execution['status']}", file=out))
    if group == "signing":
        answer = dump(client.signing.rotate(args.grace_sec))
        return show(answer, lambda: print(
            f"secret {answer['secret']} (shown once: keep it now)\n"
            f"previous secret signs until {answer['previousValidUntil'] or '-'}", file=out))
    if group == "dead-letters":
        page = _collect(client.dead_letters.list(limit=args.limit), args.all)
        return show(page, lambda: table_page(page, [("jobId", "JOB ID"), *EXECUTION_COLUMNS], out))
    if group == "preview":
        answer = dump(client.preview(args.schedule, type=args.type, timezone=args.timezone, count=args.count,
                                     after=args.after, exclude_calendars=args.exclude_calendar))

        def render_preview() -> None:
            print("\n".join(answer["fireTimes"]) or "(no fire times)", file=out)
            for skipped in answer.get("skipped") or []:  # exclusion calendars
                print(f"skipped {skipped['at']} ({skipped['reason']})", file=out)
        return show(answer, render_preview)
    if group == "calendars":
        return _calendar_command(args, client, out, show)
    raise UsageError("unknown command")


def _calendar_command(args, client: Client, out, show) -> int:
    """Exclusion calendars: put (create or replace), list, get, delete."""
    command = args.command
    if command == "put":
        calendar = dump(client.calendars.put(args.name, args.date or [], args.description or ""))
    elif command == "list":
        page = _collect(client.calendars.list(limit=args.limit), args.all)
        rows = [{**c, "dates": len(c["dates"])} for c in page["items"]]
        return show(page, lambda: table(rows, CALENDAR_COLUMNS, out))
    else:
        calendar = dump(getattr(client.calendars, command)(args.name))
    if command == "delete":
        return show(calendar, lambda: print(f"{calendar['name']} deleted", file=out))

    def render() -> None:
        details(calendar, ["name", "description", "version", "createdAt", "updatedAt"], out)
        print(f"dates ({len(calendar['dates'])}):", *calendar["dates"], sep="\n  ", file=out)
    return show(calendar, render)


def table_page(page: dict, columns, out) -> None:
    """A page as a table; when more exist, says so on stderr (stdout keeps only the table)."""
    table(page["items"], columns, out)
    if page.get("nextCursor"):
        print(f"jobsched: {len(page['items'])} shown and more exist; --all reads every page "
              "(or --limit up to 100)", file=sys.stderr)


def _collect(pager: Pager, all_pages: bool) -> dict:
    """The first page, or with --all every page, as {"items", "nextCursor"}."""
    items: list = []
    for page in pager.pages():
        items.extend(dump(page.items))
        if not all_pages:
            return {"items": items, "nextCursor": page.nextCursor}
    return {"items": items, "nextCursor": None}


def run_stats(args, out) -> int:
    """Lateness and outcomes from the EMF metric lines the local stack keeps."""
    from pathlib import Path

    from jobsched.local.metrics import summarize

    # Where `make run` keeps them: its work directory, as JOBSCHED_WORKDIR told it.
    path = Path(args.file) if args.file else Path(os.environ.get("JOBSCHED_WORKDIR", ".build/local")) / "metrics.jsonl"
    if not path.exists():
        print(f"jobsched: no metrics at {path}; start the local stack with `make run`", file=sys.stderr)
        return EXIT_NOT_FOUND
    summary = summarize(path.read_text().splitlines())
    if args.json:
        print(json.dumps(summary, indent=2), file=out)
        return EXIT_OK
    late = summary["lateness"]
    table([{"metric": "fire lateness ms", "count": late["count"], "p50": late["p50"], "p99": late["p99"],
            "max": late["max"]}], [("metric", "METRIC"), ("count", "COUNT"), ("p50", "P50"), ("p99", "P99"),
                                   ("max", "MAX")], out)
    print(file=out)
    table([{"metric": k, "count": v} for k, v in summary["counts"].items()], [("metric", "METRIC"), ("count", "COUNT")],
          out)
    return EXIT_OK


def run_keys(args, out) -> int:
    """API keys live hashed in the ApiKeys table: managed with AWS credentials, not an API key."""
    from jobsched.cli.keys import KeyAdmin

    admin = KeyAdmin.connect(local=args.local, endpoint_url=args.endpoint_url, table=args.table, stack=args.stack)
    if args.command == "create":
        key_id, key = admin.create(args.tenant)
        granted = admin.grant_local_container_tasks(args.tenant)
        record = {"tenantId": args.tenant, "keyId": key_id, "apiKey": key}
        if granted:
            record["taskDefinition"] = granted[0].rsplit(" ", 1)[-1]
        if args.json:
            print(json.dumps(record, indent=2), file=out)
        else:
            print("\n".join([f"tenant {args.tenant}: {key}", *granted,
                             f"(key id {key_id}; the key is shown once and stored only hashed)"]), file=out)
        return EXIT_OK
    if args.command == "list":
        keys = admin.list(args.tenant)
        if args.json:
            print(json.dumps(keys, indent=2), file=out)
        else:
            table(keys, [("keyId", "KEY ID"), ("tenantId", "TENANT"), ("created", "CREATED"), ("revoked", "REVOKED")],
                  out)
        return EXIT_OK
    revoked = admin.revoke(args.key_id)
    if revoked is None:
        print(f"jobsched: no key {args.key_id}", file=sys.stderr)
        return EXIT_NOT_FOUND
    print(json.dumps(revoked, indent=2) if args.json else f"{args.key_id} revoked", file=out)
    return EXIT_OK


def run_upgrade(args, out) -> int:
    """`upgrade state-shards`: every job item gets its stateShard (store/jobs_state_index.py), with
    the operator's AWS credentials (dynamodb:Scan, GetItem, UpdateItem, PutItem on the Jobs table)."""
    from jobsched.cli.keys import stack_table
    from jobsched.local.stack import JOBS_LOGICAL_PREFIX
    from jobsched.store.jobs_state_index import backfill_state_shards

    session, endpoint_url, name = stack_table(args.local, args.endpoint_url, args.stack, JOBS_LOGICAL_PREFIX, args.table)
    counts = backfill_state_shards(session.resource("dynamodb", endpoint_url=endpoint_url).Table(name), args.pages,
                                   progress=lambda c: None if args.json else print(
                                       f"{c['pages']} pages: {c['read']} jobs read, {c['written']} given their shard",
                                       file=out))
    if args.json:
        print(json.dumps(counts), file=out)
    elif counts["done"]:
        print("done: every job has its stateShard; lists by state read JobsByStateShard alone", file=out)
    else:
        print("stopped before the end: run it again to go on from there", file=out)
    return EXIT_OK


def main(argv: list[str] | None = None, out=None) -> int:
    out = out or sys.stdout
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        if args.group == "keys":
            return run_keys(args, out)
        if args.group == "stats":
            return run_stats(args, out)
        if args.group == "upgrade":
            return run_upgrade(args, out)
        return run_command(args, Client(args.url, args.api_key), out)
    except UsageError as exc:
        print(f"jobsched: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ApiError as exc:
        print(f"jobsched: {exc}", file=sys.stderr)
        return exit_code_for(exc)
    except Exception as exc:  # noqa: BLE001 - e.g. AWS errors of `keys`; say what happened, exit non-zero
        print(f"jobsched: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE


def entry() -> None:
    sys.exit(main())
