"""Worker function: SQS lane batches → one attempt per message, with partial batch failures."""
from __future__ import annotations

import asyncio
from typing import Mapping

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import AsyncBatchProcessor, EventType, async_process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

import boto3

from jobsched.adapters.http_target import HttpTargetInvoker
from jobsched.adapters.targets import TargetRouter
from jobsched.domain.dispatch_seal import ForgedDispatch
from jobsched.handlers.wiring import build, lazy, metrics_for
from jobsched.service.outcomes import Outcome, Outcomes
from jobsched.service.worker import Worker
from jobsched.store.targets import AwsTargetInvoker

logger = Logger(service="jobsched-worker")

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
}


def make_handler(env: Mapping[str, str], clock=None, session=None, invoker=None):
    parts = build(env, "worker", clock, session)
    metrics = metrics_for(env, "jobsched-worker")
    if invoker is None:
        invoker = TargetRouter(HttpTargetInvoker(allow_private=parts.settings.allow_private_targets),
                               AwsTargetInvoker(session or boto3.session.Session()))
    worker = Worker(parts.stores, Outcomes(parts.stores, parts.handoff, parts.clock), invoker, parts.clock)

    async def record_handler(record: SQSRecord) -> str:
        # A body that is not a dispatch raises: after maxReceiveCount it rests in the lane's
        # DLQ for inspection instead of being dropped. A well-formed one without the scheduler's
        # seal was put on the lane by someone else (for example a job's SQS target aimed at a
        # lane): it is dropped and counted, never run.
        try:
            dispatch = parts.stores.lanes.open(record.body)
        except ForgedDispatch as forged:
            metrics.add_metric(name="ForgedDispatches", unit=MetricUnit.Count, value=1)
            logger.warning("dropped a lane message without a valid seal", extra={"reason": str(forged),
                                                                                 "messageId": record.message_id})
            return "FORGED"
        # Targets run concurrently within a batch, so one slow target does not delay the rest.
        result = await asyncio.to_thread(worker.process, dispatch)
        metrics.add_metric(name=OUTCOME_METRIC[result.outcome], unit=MetricUnit.Count, value=1)
        if result.late_ms is not None:
            metrics.add_metric(name="FireLatenessMs", unit=MetricUnit.Milliseconds, value=result.late_ms)
        logger.info("attempt", extra={"tenantId": dispatch.tenant_id, "jobId": dispatch.job_id,
                                      "executionId": dispatch.execution_id, "attempt": result.attempt,
                                      "outcome": result.outcome.value, "lateMs": result.late_ms})
        return result.outcome.value

    @metrics.log_metrics
    @logger.inject_lambda_context(clear_state=True)
    def handler(event, context):
        processor = AsyncBatchProcessor(event_type=EventType.SQS)
        return async_process_partial_response(event=event, record_handler=record_handler,
                                              processor=processor, context=context)

    return handler


handler = lazy(make_handler)
