"""Worker function: SQS lane batches → one attempt per message, with partial batch failures."""
from __future__ import annotations

import math
import zlib
from dataclasses import replace
from concurrent.futures import ALL_COMPLETED, ThreadPoolExecutor, wait
from typing import Mapping

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

import boto3

from jobsched.adapters.http_target import HttpTargetInvoker
from jobsched.domain.endpoints import OwnEndpoints
from jobsched.adapters.targets import TargetRouter
from jobsched.domain.dispatch_seal import ForgedDispatch
from jobsched.handlers.wiring import build, lazy, metrics_for
from jobsched.service.container_tasks import ContainerTasks, task_log_url
from jobsched.service.lane_shares import LaneGate
from jobsched.service.outcomes import Outcome, Outcomes
from jobsched.service.packs import PackRunner
from jobsched.domain.packs import Pack
from jobsched.service.signing import SigningSecrets
from jobsched.domain.trace import trace_id_of
from jobsched.service.worker import LEASE_MARGIN_MS, UNREAD, ArrivedEarly, RedeliverLater, Worker, batch_read_keys
from jobsched.settings import MAX_RECEIVE_COUNT, WORKER_BATCH_SIZE
from jobsched.store.targets import AwsTargetInvoker, TenantSessions

logger = Logger(service="jobsched-worker")

# The lanes' event source mappings deliver at most this many records per invocation
# (infra/jobsched_infra/stack.py takes it from here), and each record gets a thread of its own:
# asyncio's default pool has cpu + 4 threads (6 on a 2-vCPU Lambda), which would queue records
# 7-10 behind the first six and break the rule that an attempt's timeout fits the invocation.
BATCH_SIZE = WORKER_BATCH_SIZE
# A record that failed for a transient reason comes back after this many seconds, doubling with
# each receive up to 15 minutes (not after the lane's visibility timeout of 90 minutes).
TRANSIENT_RETRY_SECONDS = 30
MAX_TRANSIENT_RETRY_SECONDS = 900
# SQS's largest visibility timeout (ChangeMessageVisibility): 12 hours.
MAX_VISIBILITY_SECONDS = 43_200
# Hand-backs: a record that cannot make progress now comes back when it can. One due back within
# this many seconds is made visible again in place (ChangeMessageVisibility: it stays in flight that
# long); a later one is sent again as a new message delayed until then (SendMessageBatch, at most
# 15 minutes at a time) and the received one deleted, so hand-backs never pile up among the lane's
# in-flight messages, which SQS caps (about 120,000 a queue; docs/architecture.md, "Hand-backs").
IN_PLACE_HAND_BACK_SECONDS = 1
# An invocation that fails as a whole (Lambda's time limit, out of memory, a crash) reports
# nothing: its records come back after their visibility. The lane keeps AWS's six times the
# function timeout (90 minutes) for a batch that waits for a throttled invocation; once the
# handler runs, its records' visibility is cut to what this batch can take: the largest attempt
# of the batch and its lease margin (the redelivery's claim then takes the lease over), never more
# than the invocation's remaining time, plus a few seconds.
VISIBILITY_MARGIN_SECONDS = 5
# The handler stops waiting this long before Lambda's limit: the records still running are handed
# back (visible again in a second: their claim's live lease sends them back until it ends), the
# rest are reported as usual, instead of the whole batch waiting out the visibility timeout.
FINISH_MARGIN_MS = 10_000
# How often the handler looks at its remaining time while its records run: at most this long, and
# never past the margin. It was 50 ms with a wake-up for each record's end: a batch that waits for
# its due second woke 10-20 times for nothing, and those wake-ups were the local stack's largest
# CPU cost after the AWS calls (bench lateness). The margin is 10 s: a second is precise enough.
WAIT_POLL_SECONDS = 1.0

OUTCOME_METRIC = {
    Outcome.SUCCEEDED: "Succeeded",
    Outcome.RETRY_SCHEDULED: "Retried",
    Outcome.DEAD: "Dead",
    Outcome.STALE_MESSAGE: "StaleMessages",
    Outcome.DUPLICATE: "DuplicatesDropped",
    Outcome.RETRY_RECOVERED: "RetriesRecovered",
    Outcome.STALE_RESULT: "StaleResultsRejected",
    Outcome.CANCELLED: "Cancelled",
    Outcome.ACCEPTED: "AcceptedLongRunning",
    Outcome.SKIPPED: "Skipped",
    Outcome.LEASE_EXTENDED: "LeaseChecks",
    Outcome.LOST: "Lost",
    Outcome.RUN_STARTED: "RunsStarted",
    Outcome.THROTTLED: "Throttled",
    Outcome.LANE_SHARE_HELD: "LaneShareHeld",
    Outcome.NOT_HELD: "NotHeldRefused",
    Outcome.EXPECTATION_CHECKED: "ExpectationChecks",
    # Absence alerts: one per alert that went out (the deployment's alarm on it: infra alarms).
    Outcome.ABSENCE_ALERTED: "AbsenceAlerts",
}

# An attempt this late is always logged, whatever the sampling (the lateness goal is one second).
LOG_LATE_MS = 1_000


def logs_attempt(outcome: Outcome, execution_id: str, late_ms: int | None, percent: int) -> bool:
    """Whether the worker writes the attempt's log line. At 10,000 executions a second one line each
    was a third of the recurring bill's non-write cost (docs/performance.md); the execution record
    keeps every attempt anyway. So a succeeded attempt on time is logged for `percent` of execution
    ids (chosen by the id: an execution's attempts are all logged or none); every other outcome,
    and every attempt over a second late, always."""
    if outcome is not Outcome.SUCCEEDED or (late_ms is not None and late_ms > LOG_LATE_MS) or percent >= 100:
        return True
    return zlib.crc32(execution_id.encode()) % 100 < percent


def make_handler(env: Mapping[str, str], clock=None, session=None, invoker=None):
    parts = build(env, "worker", clock, session)
    metrics = metrics_for(env, "jobsched-worker")
    if invoker is None:
        session = session or boto3.session.Session()
        # AWS targets are called in the job's tenant's session of the targets role (tagged
        # resources only), its credentials kept for the container's life until shortly before expiry.
        tenants = TenantSessions(session, parts.settings.targets_role_arn, parts.clock.now_ms) \
            if parts.settings.targets_role_arn else None
        signing = SigningSecrets(parts.stores.signing, parts.clock)
        invoker = TargetRouter(HttpTargetInvoker(allow_private=parts.settings.allow_private_targets,
                                                 own_endpoints=OwnEndpoints.parse(parts.settings.own_endpoints),
                                                 signing_secrets=signing.in_use,
                                                 now_s=lambda: parts.clock.now_ms() / 1000),
                               AwsTargetInvoker(session, tenants))
    outcomes = Outcomes(parts.stores, parts.handoff, parts.clock)
    settings = parts.settings
    lanes = LaneGate(parts.stores.flow, parts.clock, dict(settings.lane_caps), settings.lane_tenant_percent,
                     settings.lane_host_percent) if settings.lane_caps else None
    containers = ContainerTasks(parts.stores, outcomes, parts.clock, calls=getattr(invoker, "task_calls", None),
                                log_url=task_log_url(env), networks=parts.settings.ecs_networks)
    worker = Worker(parts.stores, outcomes, invoker, parts.clock, lanes, containers)
    worker.regions = parts.handoff  # segment leases (service/ownership.py): single-region acts on all
    packs = PackRunner(worker, parts.stores, outcomes, parts.clock)
    packs.metric_of = OUTCOME_METRIC.__getitem__
    pools = [ThreadPoolExecutor(max_workers=BATCH_SIZE, thread_name_prefix="attempt")]
    hand_back_errors: list[str] = []  # message ids whose hand-back failed (list.append: thread-safe)

    def hand_back(record: SQSRecord, seconds: int, reason: str) -> None:
        """Make a received record visible again in `seconds` (in place: it stays in flight). Every
        caller reports the record failed; an error other than a stale receipt (a throttle, a
        denial) is logged and counted (HandBackErrors): the record then comes back after the
        lane's visibility timeout."""
        try:
            parts.stores.lanes.redeliver_after(record.event_source_arn, record.receipt_handle, seconds)
        except Exception as error:  # noqa: BLE001 - counted; the record is reported failed by the caller
            logger.error("record could not be handed back; it comes back after the visibility timeout",
                         extra={"messageId": record.message_id, "reason": reason, "error": repr(error)})
            hand_back_errors.append(record.message_id)
            return
        logger.info("record handed back", extra={"messageId": record.message_id, "inSeconds": seconds,
                                                 "reason": reason})

    def come_back(record: SQSRecord, message: Pack | object, seconds: int, reason: str, backs: list, failure: bool,
                  at_ms: int | None = None, whole: bool = True) -> bool:
        """A record that cannot make progress now comes back in `seconds`; returns whether it is
        reported failed. Within IN_PLACE_HAND_BACK_SECONDS: in place. Later: queued in `backs`,
        sent again as a new message when the batch ends (send_backs), and the received one deleted
        (reported done). The new message carries the receives so far (Dispatch.receives): those
        of the earlier messages, and this message's own, less this one when it was no failure.
        `at_ms`: the instant it is due back, when known exactly (its delay is taken when it is sent).
        `message`: the whole record's pack, or (`whole` False) one entry of a pack, which always
        comes back as a message of its own (the rest of its pack is done)."""
        if whole and seconds <= IN_PLACE_HAND_BACK_SECONDS:
            hand_back(record, seconds, reason)
            return True
        receives = receives_of(message) + int(record.attributes.approximate_receive_count or 1) - (0 if failure else 1)
        at = at_ms if at_ms is not None else parts.clock.now_ms() + seconds * 1000
        backs.append((record, message.with_receives(receives) if isinstance(message, Pack)
                      else replace(message, receives=receives), at, reason))
        return False

    def send_backs(backs: list) -> set[str]:
        """The batch's hand-backs, one SendMessageBatch per ten of a lane (a record that failed
        MAX_RECEIVE_COUNT receives: into the lane's dead-letter queue instead). Returns the message
        ids to report failed: those whose send failed, handed back in place instead (as before
        this path). A crash after the sends and before the deletes leaves both messages: the
        claim makes the second delivery a duplicate (docs/reliability.md)."""
        failed: set[str] = set()
        groups: dict[tuple[str, bool], list] = {}
        for back in backs:
            record, dispatch = back[0], back[1]
            groups.setdefault((record.event_source_arn, receives_of(dispatch) >= MAX_RECEIVE_COUNT), []).append(back)
        for (arn, dead), group in groups.items():
            try:
                if dead:
                    parts.stores.lanes.to_dead_letters(arn, [dispatch for _, dispatch, _, _ in group])
                else:
                    parts.stores.lanes.send_back(arn, [(dispatch, at) for _, dispatch, at, _ in group])
            except Exception:  # noqa: BLE001 - in place instead, as a hand-back always was
                logger.warning("hand-backs could not be sent again; handed back in place", exc_info=True,
                               extra={"queue": arn, "records": len(group)})
                for record, _, at, reason in group:
                    hand_back(record, math.ceil(max(0, at - parts.clock.now_ms()) / 1000), reason)
                    failed.add(record.message_id)
                continue
            for record, dispatch, at, reason in group:
                logger.info("record handed back", extra={"messageId": record.message_id, "reason": reason,
                                                         "inSeconds": max(0, at - parts.clock.now_ms()) // 1000,
                                                         "receives": receives_of(dispatch), "deadLettered": dead})
        return failed

    def read_jobs(records: list[SQSRecord]) -> tuple[dict, dict, int]:
        """The batch's dispatches (those that open), their jobs, read in one strongly consistent
        BatchGetItem instead of a GetItem each, and when that read started (a FIRE due after it
        reads its job again: Worker.process). If that read fails, each attempt reads its own job,
        as it would alone."""
        opened = {}
        for record in records:
            try:
                opened[record.message_id] = parts.stores.lanes.seal.open_pack(record.body)
            except Exception:  # noqa: BLE001 - run_record() opens it again and reports why
                continue
        now = parts.clock.now_ms()
        keys = batch_read_keys([d for pack in opened.values() for d in pack.entries], now)
        if len(keys) < 2:
            return opened, {}, now
        try:
            jobs = parts.stores.jobs.get_many(keys, whole=True)
        except Exception:  # noqa: BLE001 - each attempt reads its job itself
            logger.warning("the batch's job read failed; each attempt reads its own", exc_info=True)
            return opened, {}, now
        # A job the consistent read did not find does not exist: None, not a reason to read again.
        return opened, {key: jobs.get(key) for key in keys}, now

    def run_record(record: SQSRecord, opened: dict, jobs: dict, read_at_ms: int, backs: list) -> list:
        """One record, in a thread of its own: a message of one dispatch runs it on the
        per-execution path; a pack runs on the pack path (service/packs.py). Returns each entry's
        (failed, the metric to count, lateness)."""
        # A body that is not a dispatch raises: after maxReceiveCount it rests in the lane's
        # DLQ for inspection instead of being dropped. A well-formed one without the scheduler's
        # seal was put on the lane by someone else (for example a job's SQS target aimed at a
        # lane): it is dropped and counted, never run.
        try:
            pack = opened.get(record.message_id) or parts.stores.lanes.seal.open_pack(record.body)
        except ForgedDispatch as forged:
            logger.warning("dropped a lane message without a valid seal", extra={"reason": str(forged),
                                                                                 "messageId": record.message_id})
            return [(False, "ForgedDispatches", None)]
        except Exception:
            logger.exception("a lane message that is not a dispatch", extra={"messageId": record.message_id})
            return [(True, "WorkerRecordErrors", None)]
        if pack.pack_id is None:
            (dispatch,) = pack.entries
            return [attempt(record, dispatch, jobs.get((dispatch.tenant_id, dispatch.job_id), UNREAD),
                            read_at_ms, backs, whole=True)]
        result = guarded(record, pack, pack.due_ms, backs, True, lambda: packs.run(
            pack, jobs, read_at_ms, lambda d, job: attempt(record, d, job, pack.due_ms, backs, whole=False),
            multi_region=parts.handoff.multi_region))
        if isinstance(result, list):  # it comes back whole
            return result
        for dispatch, outcome, number, late_ms in result.recorded:
            log_attempt(dispatch, outcome, number, late_ms)
        if result.stale_checkpoints:
            logger.warning("a pack checkpoint lost its condition: a later delivery holds the pack",
                           extra={"pack": pack.pack_id})
        return result.entries or [(False, "PacksEmpty", None)]

    def log_attempt(dispatch, outcome: Outcome, number: int, late_ms: int | None) -> None:
        if logs_attempt(outcome, dispatch.execution_id, late_ms, settings.attempt_log_percent):
            logger.info("attempt", extra={"tenantId": dispatch.tenant_id, "jobId": dispatch.job_id,
                                          "executionId": dispatch.execution_id, "attempt": number,
                                          "traceId": trace_id_of(dispatch.execution_id),
                                          "outcome": outcome.value, "lateMs": late_ms})

    def attempt(record: SQSRecord, dispatch, job, read_at_ms: int | None, backs: list,
                whole: bool) -> tuple[bool, str, int | None]:
        """One dispatch on the per-execution path: (failed, the metric to count, lateness).
        `whole`: the record carries it alone (else it left a pack, and comes back on its own)."""
        result = guarded(record, dispatch, dispatch.due_ms, backs, whole,
                         lambda: worker.process(dispatch, job, read_at_ms))
        if isinstance(result, list):
            return result[0]
        log_attempt(dispatch, result.outcome, result.attempt, result.late_ms)
        return False, OUTCOME_METRIC[result.outcome], result.late_ms

    def guarded(record: SQSRecord, message, due_ms: int, backs: list, whole: bool, run):
        """`run()`'s result, or, when it cannot make progress now, [(failed, metric, None)] after
        `message` (the record's pack, or one dispatch) was handed back: early, to its due second; a
        live lease, to its end; any other error, after the transient backoff."""
        try:
            return run()
        except ArrivedEarly as early:
            # Visible again when at most a second is left, which the next delivery waits out.
            return [(come_back(record, message, min(MAX_VISIBILITY_SECONDS, early.early_ms // 1000), "early",
                               backs, False, at_ms=due_ms, whole=whole), "RedeliveredEarly", None)]
        except RedeliverLater as later:
            # Another delivery holds it under a live lease: come back when it ends.
            remaining_ms = (later.lease_until_ms or parts.clock.now_ms()) - parts.clock.now_ms()
            return [(come_back(record, message, math.ceil(max(0, remaining_ms) / 1000) + 1, "live lease",
                               backs, False, whole=whole), "RedeliveredLater", None)]
        except Exception as exc:
            logger.exception("attempt failed", extra={"messageId": record.message_id,
                                                      "pack": getattr(message, "pack_id", None),
                                                      "executionId": getattr(message, "execution_id", None)})
            receives = receives_of(message) + int(record.attributes.approximate_receive_count or 1)
            return [(come_back(record, message, min(MAX_TRANSIENT_RETRY_SECONDS,
                                                    TRANSIENT_RETRY_SECONDS * 2 ** (receives - 1)),
                               type(exc).__name__, backs, True, whole=whole), "WorkerRecordErrors", None)]

    def shorten_visibility(records: list[SQSRecord], opened: dict, jobs: dict, remaining_ms: int) -> None:
        """What crashes with this invocation comes back when its attempts' leases end, not after
        the lane's 90 minutes (see VISIBILITY_MARGIN_SECONDS). One call per ten records."""
        needs = []
        for record in records:
            pack = opened.get(record.message_id)
            for dispatch in pack.entries if pack is not None else (None,):
                job = jobs.get((dispatch.tenant_id, dispatch.job_id)) if dispatch is not None else None
                if job is None:  # not read in the batch: what the invocation may still take
                    needs.append(remaining_ms)
                else:
                    needs.append(job.spec.timeout_sec * 1000 + LEASE_MARGIN_MS)
        if not needs:
            return
        seconds = math.ceil(min(remaining_ms, max(needs)) / 1000) + VISIBILITY_MARGIN_SECONDS
        by_queue: dict[str, list[tuple[str, str]]] = {}
        for record in records:
            by_queue.setdefault(record.event_source_arn, []).append((record.message_id, record.receipt_handle))
        for arn, receipts in by_queue.items():
            parts.stores.lanes.redeliver_many_after(arn, receipts, seconds)

    def run_all(records: list[SQSRecord], opened: dict, jobs: dict, read_at_ms: int, context,
                backs: list) -> list[list[tuple[bool, str, int | None]]]:
        """Every record at once, a thread each, until they end or the invocation nears its limit:
        then the records still running are handed back and reported failed, and the container
        keeps a fresh pool (the old one's threads are still inside those attempts; whatever they
        write later is fenced by their attempt number)."""
        pool = pools[0]
        futures = {pool.submit(run_record, record, opened, jobs, read_at_ms, backs): record for record in records}
        pending = set(futures)
        while pending:
            until_margin_s = (context.get_remaining_time_in_millis() - FINISH_MARGIN_MS) / 1000
            _, pending = wait(pending, timeout=min(WAIT_POLL_SECONDS, max(0.0, until_margin_s)),
                              return_when=ALL_COMPLETED)
            if pending and context.get_remaining_time_in_millis() <= FINISH_MARGIN_MS:
                break
        results = {}
        for future in pending:
            record = futures[future]
            started = not future.cancel()
            hand_back(record, 1 if started else 0, "out of time" if started else "not started")
            results[future] = [(True, "WorkerRecordsOutOfTime", None)]
        if pending:
            pools[0] = ThreadPoolExecutor(max_workers=BATCH_SIZE, thread_name_prefix="attempt")
            pool.shutdown(wait=False, cancel_futures=True)
            packs.renew_pool()
        # An exception that is not an Exception (the process dying) propagates, as it would.
        return [results[f] if f in results else f.result() for f in futures]

    @metrics.log_metrics
    @logger.inject_lambda_context(clear_state=True)
    def handler(event, context):
        # Every record of the batch at once, a thread each (so one slow target does not delay the
        # rest); failures are reported per record (ReportBatchItemFailures), the rest deleted.
        records = [SQSRecord(raw) for raw in event.get("Records", [])]
        failures = []
        opened, jobs, read_at_ms = read_jobs(records)
        shorten_visibility(records, opened, jobs, context.get_remaining_time_in_millis())
        backs: list = []  # (record, dispatch, visible-at, reason): sent again below (come_back)
        with outcomes.batched_give_backs() as give_backs_failed:
            results = run_all(records, opened, jobs, read_at_ms, context, backs)
        # A thread still running past the margin (run_all) may add one after this: it is not sent,
        # and its record, reported failed, comes back in a second as any such record does.
        not_sent = send_backs(list(backs))
        if not_sent:
            metrics.add_metric(name="HandBackSendFailures", unit=MetricUnit.Count, value=len(not_sent))
        if hand_back_errors:
            metrics.add_metric(name="HandBackErrors", unit=MetricUnit.Count, value=len(hand_back_errors))
            hand_back_errors.clear()
        for error in give_backs_failed:
            logger.error("a quota place could not be given back; the tenant's count stays one high",
                         extra={"error": repr(error)})
            metrics.add_metric(name="QuotaGiveBackErrors", unit=MetricUnit.Count, value=1)
        for record, entries in zip(records, results):
            for failed, metric, late_ms in entries:
                metrics.add_metric(name=metric, unit=MetricUnit.Count, value=1)
                if late_ms is not None:
                    metrics.add_metric(name="FireLatenessMs", unit=MetricUnit.Milliseconds, value=late_ms)
            if any(failed for failed, _, _ in entries) or record.message_id in not_sent:
                failures.append({"itemIdentifier": record.message_id})
        return {"batchItemFailures": failures}

    return handler


def receives_of(message) -> int:
    """The receives a message's earlier messages carried (a pack's entries carry the same)."""
    return message.entries[0].receives if isinstance(message, Pack) else message.receives


handler = lazy(make_handler)
