"""Tick function: one EventBridge rule per segment invokes it each minute with {"segment": n}."""
from __future__ import annotations

from typing import Mapping

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit

from jobsched.handlers.wiring import build, lazy, metrics_for
from jobsched.service.tick import Ticker

logger = Logger(service="jobsched-tick")


class BadTickEvent(ValueError):
    pass


def parse_segment(event: dict, segments: int) -> int:
    segment = event.get("segment") if isinstance(event, dict) else None
    if not isinstance(segment, int) or not 0 <= segment < segments:
        raise BadTickEvent(f"tick event needs an integer 'segment' in 0..{segments - 1}, got {segment!r}")
    return segment


def make_handler(env: Mapping[str, str], clock=None, session=None):
    parts = build(env, "tick", clock, session)
    metrics = metrics_for(env, "jobsched-tick")
    ticker = Ticker(parts.stores, parts.handoff, parts.clock)

    @metrics.log_metrics
    @logger.inject_lambda_context(clear_state=True)
    def handler(event, context):
        segment = parse_segment(event, parts.settings.total_segments)
        started = parts.clock.now_ms()
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        report = ticker.run(segment, remaining)
        handoff = report.handoff
        metrics.add_metric(name="Dispatched", unit=MetricUnit.Count, value=handoff.dispatched)
        metrics.add_metric(name="StaleTimers", unit=MetricUnit.Count, value=handoff.stale)
        metrics.add_metric(name="MisfiresSkipped", unit=MetricUnit.Count, value=handoff.misfires_skipped)
        metrics.add_metric(name="OccurrencesExcluded", unit=MetricUnit.Count, value=handoff.exclusions)
        metrics.add_metric(name="BucketsCaughtUp", unit=MetricUnit.Count, value=report.caught_up_buckets)
        metrics.add_metric(name="MinutesBehind", unit=MetricUnit.Count, value=report.behind_minutes)
        metrics.add_metric(name="TickOutOfTime", unit=MetricUnit.Count, value=int(report.out_of_time))
        duration = parts.clock.now_ms() - started
        metrics.add_metric(name="TickDurationMs", unit=MetricUnit.Milliseconds, value=duration)
        # The same per segment (one more, small EMF line): which segment is slow or behind.
        per_segment = metrics_for(env, "jobsched-tick")
        per_segment.add_dimension(name="Segment", value=str(segment))
        per_segment.add_metric(name="SegmentTickDurationMs", unit=MetricUnit.Milliseconds, value=duration)
        per_segment.add_metric(name="SegmentMinutesBehind", unit=MetricUnit.Count, value=report.behind_minutes)
        per_segment.add_metric(name="SegmentBucketsCaughtUp", unit=MetricUnit.Count, value=report.caught_up_buckets)
        per_segment.flush_metrics()
        logger.info("tick", extra={"segment": segment, "buckets": report.buckets, "dispatched": handoff.dispatched,
                                   "nextTimers": handoff.next_timers, "stale": handoff.stale,
                                   "behindMinutes": report.behind_minutes, "outOfTime": report.out_of_time,
                                   # regions: held here, under which epoch, and a take's rewind
                                   "held": report.held, "epoch": report.epoch, "rewoundTo": report.rewound_to})
        return {"segment": segment, "buckets": report.buckets, "dispatched": handoff.dispatched,
                "nextTimers": handoff.next_timers,
                "behindMinutes": report.behind_minutes, "outOfTime": report.out_of_time,
                "held": report.held, "epoch": report.epoch, "rewoundTo": report.rewound_to}

    return handler


handler = lazy(make_handler)
