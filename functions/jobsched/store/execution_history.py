"""The Executions table's reads of a job's history: its list, its stats' summaries, its occurrence
ledger and its latest fire number (a mixin of ExecutionsStore, store/executions.py)."""
from __future__ import annotations

from typing import Any

from boto3.dynamodb.conditions import Attr, Key

from jobsched.domain.errors import FieldProblem, InvalidRequest
from jobsched.domain.executions import Execution, ExecutionStatus
from jobsched.store.dynamo import Page, decode_cursor, encode_cursor, plain


class ExecutionHistory:
    """Queries of one job's executions, newest or oldest first (a mixin of ExecutionsStore: its
    table)."""

    def summaries_between(self, job_id: str, from_ms: int, to_ms: int, max_records: int) -> tuple[list, bool]:
        """The job's executions scheduled in [from_ms, to_ms), newest first, as ExecutionSummary
        (not its runs' steps nor its hooks' calls), and whether all were read (False: stopped at
        `max_records`). Eventually consistent pages of 1 MB: a read costs the records' summed size
        / 8 KB in RCU on the job's key (10,080 records of about 600 B: about 750 RCU)."""
        from jobsched.domain.stats import ExecutionSummary

        kwargs: dict[str, Any] = {
            # Execution ids are `<jobId>.<scheduled ms, 13 digits>[.suffix]`: the window is a range.
            "KeyConditionExpression": Key("jobId").eq(job_id) & Key("executionId").between(
                f"{job_id}.{max(0, from_ms):013d}", f"{job_id}.{max(0, to_ms - 1):013d}~"),
            "ScanIndexForward": False,
            "FilterExpression": Attr("runId").not_exists() & Attr("hookOf").not_exists(),
            "ProjectionExpression": "executionId, #st, scheduledMs, startedMs, skippedCount, expectation, backfill",
            "ExpressionAttributeNames": {"#st": "status"},
        }
        found: list = []
        while True:
            answer = self._table.query(**kwargs)
            for item in answer.get("Items", []):
                item = plain(item)
                scheduled = int(item.get("scheduledMs") or 0)
                late = int(item["startedMs"]) - scheduled if item.get("startedMs") is not None else None
                mark = item.get("expectation")
                found.append(ExecutionSummary(ExecutionStatus(item["status"]), scheduled, late,
                                              str(item["executionId"]).endswith(".manual"),
                                              int(item["skippedCount"]) if item.get("skippedCount") else None,
                                              missing=mark in ("MISSING", "NOT_FIRED"),
                                              not_fired=mark == "NOT_FIRED" and late is None,
                                              backfill=bool(item.get("backfill"))))
                if len(found) >= max_records:
                    return found, False
            if "LastEvaluatedKey" not in answer:
                return found, True
            kwargs["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    # The occurrence ledger reads these of each record (a Query is billed on the whole items read).
    _LEDGER_PROJECTION = ("executionId, jobId, tenantId, scheduledMs, #st, attempt, startedMs, finishedMs, "
                          "skipReason, skippedThroughMs, catchUp, expectation, reportedOkMs, #run, #err")

    def scheduled_between(self, job_id: str, from_ms: int, to_ms: int, max_records: int,
                          newest_first: bool = False) -> list[Execution]:
        """The job's executions of its schedule whose id instant lies in [from_ms, to_ms] (no
        triggers, steps or hooks), oldest first (or newest first), at most `max_records`.
        Eventually consistent, projected to what the occurrence ledger reads."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": Key("jobId").eq(job_id) & Key("executionId").between(
                f"{job_id}.{max(0, from_ms):013d}", f"{job_id}.{max(0, to_ms):013d}~"),
            "ScanIndexForward": not newest_first,
            "FilterExpression": Attr("runId").not_exists() & Attr("hookOf").not_exists(),
            "ProjectionExpression": self._LEDGER_PROJECTION,
            "ExpressionAttributeNames": {"#st": "status", "#run": "run", "#err": "error"},
            "Limit": min(max_records + 10, 1000),
        }
        found: list[Execution] = []
        while True:
            answer = self._table.query(**kwargs)
            for item in answer.get("Items", []):
                if str(item["executionId"]).endswith(".manual"):
                    continue  # a trigger is no occurrence of the schedule
                found.append(Execution.from_item(plain(item)))
                if len(found) >= max_records:
                    return found
            if "LastEvaluatedKey" not in answer:
                return found
            kwargs["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    def latest_run(self, job_id: str, pages: int = 4) -> int | None:
        """The highest fire number recorded on the job's newest executions (schedule bounds: the
        claim records it), None when none in reach has one. Newest first; a few small pages at
        most (a run's steps, triggers and hooks carry none), only the number projected."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": Key("jobId").eq(job_id),
            "ScanIndexForward": False,
            "Limit": 10,
            "ProjectionExpression": "#run",
            "ExpressionAttributeNames": {"#run": "run"},
        }
        for _ in range(pages):
            answer = self._table.query(**kwargs)
            runs = [int(i["run"]) for i in answer.get("Items", []) if i.get("run") is not None]
            if runs:
                return max(runs)
            if not answer.get("LastEvaluatedKey"):
                return None
            kwargs["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
        return None

    def list_for_job(self, job_id: str, limit: int, cursor: str | None) -> Page:
        """The job's history, newest first: its executions and runs, not the steps of its runs (a
        run lists its own) nor its completion hooks' calls (a page may then hold fewer than
        `limit`, with a cursor for more)."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": Key("jobId").eq(job_id),
            "ScanIndexForward": False,
            "Limit": limit,
            "FilterExpression": Attr("runId").not_exists() & Attr("hookOf").not_exists(),
        }
        start = decode_cursor(cursor, {"jobId": str, "executionId": str})
        if start:
            if start["jobId"] != job_id:
                raise InvalidRequest("cursor: belongs to another list", [FieldProblem("cursor", "belongs to another list")])
            kwargs["ExclusiveStartKey"] = start
        answer = self._table.query(**kwargs)
        items = [Execution.from_item(plain(i)) for i in answer.get("Items", [])]
        return Page(items, encode_cursor(answer.get("LastEvaluatedKey")),
                    lambda e: encode_cursor({"jobId": e.job_id, "executionId": e.execution_id}))
