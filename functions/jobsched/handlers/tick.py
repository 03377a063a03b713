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


def add_counts(metrics, counts: Mapping[str, int]) -> None:
    """Each count that is not zero. CloudWatch meters a custom metric only in the hours it receives
    data (prorated by the hour), so a count sent only when something happened costs nothing while
    all is well: a healthy deployment's ticks send none (docs/performance.md, "A quiet deployment").
    Alarms on them treat missing data as not breaching."""
    for name, value in counts.items():
        if value:
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


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
        duration = parts.clock.now_ms() - started
        # What a run dispatched is in its log line (the dashboard's "Dispatched a minute" sums it), not
        # a metric: sent every hour, it was $0.30 a month (docs/performance.md, "A quiet deployment").
        add_counts(metrics, {"StaleTimers": handoff.stale,
                             "MisfiresSkipped": handoff.misfires_skipped, "OccurrencesExcluded": handoff.exclusions,
                             "BucketsCaughtUp": report.caught_up_buckets, "MinutesBehind": report.behind_minutes,
                             "TickOutOfTime": int(report.out_of_time)})
        if report.behind_minutes or report.caught_up_buckets:
            # Which segment is behind (one more, small EMF line, only then): Segment dimension.
            per_segment = metrics_for(env, "jobsched-tick")
            per_segment.add_dimension(name="Segment", value=str(segment))
            add_counts(per_segment, {"SegmentMinutesBehind": report.behind_minutes,
                                     "SegmentBucketsCaughtUp": report.caught_up_buckets})
            per_segment.flush_metrics()
        # The run's duration is in its line (the dashboard's "Tick runs per segment" reads it), not a metric.
        logger.info("tick", extra={"segment": segment, "durationMs": duration,
                                   "buckets": report.buckets, "dispatched": handoff.dispatched,
                                   "nextTimers": handoff.next_timers, "stale": handoff.stale,
                                   "behindMinutes": report.behind_minutes, "outOfTime": report.out_of_time,
                                   # regions: held here, under which epoch, and a take's rewind
                                   "held": report.held, "epoch": report.epoch, "rewoundTo": report.rewound_to,
                                   # fires its hand-off's next timers found claimed and sent alone
                                   # although the other run's query may have read them too (the
                                   # two-senders rule's uncertain case: architecture.md)
                                   **({"uncertainSends": handoff.uncertain} if handoff.uncertain else {})})
        return {"segment": segment, "buckets": report.buckets, "dispatched": handoff.dispatched,
                "nextTimers": handoff.next_timers,
                "behindMinutes": report.behind_minutes, "outOfTime": report.out_of_time,
                "held": report.held, "epoch": report.epoch, "rewoundTo": report.rewound_to}

    return handler


handler = lazy(make_handler)
