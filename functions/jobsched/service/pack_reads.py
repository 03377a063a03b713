"""What the API shows of executions recorded in their packs (docs/architecture.md, "Packs: reads").

An execution that succeeded in its pack has no item of its own: its job's schedule gives its
occurrences, the job's segment and each occurrence's second give its pack partition, and the pack's
outcome gives its record. An execution that left its pack (MOVED) has its own item, read as ever;
where both exist the execution's own item wins."""
from __future__ import annotations

from jobsched.domain.executions import Execution, execution_id_for, scheduled_ms_of
from jobsched.domain.jobs import Job
from jobsched.domain.occurrences import occurrence_times
from jobsched.domain.packs import PackStatus, as_execution, carries
from jobsched.domain.stats import ExecutionSummary
from jobsched.store.dynamo import Page, decode_cursor, encode_cursor

# A page's occurrences are looked for in a window this long before the page's end, doubled until
# the page is full or the window reaches the job's creation (or the records' retention).
FIRST_SPAN_MS = 10 * 60_000
MAX_DOUBLINGS = 24


class PackReads:
    def __init__(self, stores, segment_of, clock, retention_days: int = 30) -> None:
        self._packs = stores.packs
        self._executions = stores.executions
        self._segment_of = segment_of
        self._clock = clock
        self._retention_ms = retention_days * 86_400_000

    def execution(self, job: Job, execution_id: str) -> Execution | None:
        """GET /v1/executions/{id} of an execution without its own item: one strongly consistent
        Query of its pack partition (the segment's packs of its due second)."""
        if self._packs is None or not _scheduled_id(job.job_id, execution_id):
            return None
        due = scheduled_ms_of(execution_id)
        outcomes, packs = self._packs.partition(self._segment_of(job.job_id), due // 1000, consistent=True)
        return _shown(job, execution_id, outcomes, packs)

    def recorded(self, job: Job, times: list[int]) -> dict[str, Execution]:
        """The executions of these occurrences recorded in their packs: one Query per distinct
        second, at most READ_PARALLELISM at once."""
        if self._packs is None or not times:
            return {}
        outcomes, packs = self._packs.partitions(self._segment_of(job.job_id), (t // 1000 for t in times))
        shown = {i: _shown(job, i, outcomes, packs) for i in {execution_id_for(job.job_id, t) for t in times}}
        return {i: e for i, e in shown.items() if e is not None}

    def page(self, job: Job, limit: int, cursor: str | None) -> Page:
        """GET /v1/jobs/{id}/executions, newest first: the page of the job's own items merged with
        the pack records of its occurrences in the same span (up to `limit` pack queries)."""
        own = self._executions.list_for_job(job.job_id, limit, cursor)
        position = decode_cursor(cursor, {"jobId": str, "executionId": str}) if cursor else None
        now = self._clock.now_ms()
        upper = scheduled_ms_of(position["executionId"]) if position else now + 1
        full = len(own.items) >= limit and own.next_cursor is not None
        lower = own.items[-1].scheduled_ms if full else self._since(job, now)
        times = self._newest_times(job, max(lower, self._since(job, now)), min(upper, now + 1), limit)
        merged = {e.execution_id: e for e in self.recorded(job, times).values()}
        merged.update({e.execution_id: e for e in own.items})
        items = sorted(merged.values(), key=lambda e: e.execution_id, reverse=True)
        if position:
            items = [e for e in items if e.execution_id < position["executionId"]]
        more = len(items) > limit or own.next_cursor is not None or len(times) >= limit
        items = items[:limit]

        def cursor_after(e: Execution) -> str | None:
            return encode_cursor({"jobId": e.job_id, "executionId": e.execution_id})
        return Page(items, cursor_after(items[-1]) if more and items else None, cursor_after)

    def summaries(self, job: Job, from_ms: int, to_ms: int, max_records: int) -> list[ExecutionSummary]:
        """The job's stats: its successes recorded in packs in [from_ms, to_ms), as summaries."""
        now = self._clock.now_ms()
        # The newest, one past the bound: the caller says the read is incomplete when it is passed.
        times = self._newest_times(job, max(from_ms, self._since(job, now)), min(to_ms, now + 1), max_records + 1)
        return [ExecutionSummary(e.status, e.scheduled_ms, e.late_ms, False)
                for e in self.recorded(job, times).values()]

    def _since(self, job: Job, now: int) -> int:
        return max(job.created_ms, now - self._retention_ms)

    @staticmethod
    def _newest_times(job: Job, lower: int, upper: int, limit: int) -> list[int]:
        """The newest `limit` occurrences in [lower, upper), walking the schedule forward from a
        window that doubles until it holds them (a schedule is walked forward only)."""
        span = FIRST_SPAN_MS
        for _ in range(MAX_DOUBLINGS):
            start = max(lower, upper - span)
            times = occurrence_times(job, start, upper, 1_000_000)
            if len(times) >= limit or start <= lower:
                return times[-limit:]
            span *= 2
        return occurrence_times(job, max(lower, upper - span), upper, 1_000_000)[-limit:]


def _shown(job: Job, execution_id: str, outcomes: dict, packs: list) -> Execution | None:
    """An execution as its pack holds it: SUCCEEDED there, or running (its pack claimed, no outcome
    yet); None when it left the pack (its own item shows it), was stale, or no pack carries it."""
    outcome = outcomes.get(execution_id)
    if outcome is not None:
        return as_execution(job.job_id, execution_id, outcome) if outcome.status is PackStatus.SUCCEEDED else None
    holding = [(attempt, lease) for tags, attempt, lease in packs if attempt and carries(tags, execution_id)]
    return as_execution(job.job_id, execution_id, None, job.tenant_id, max(holding)) if holding else None


def _scheduled_id(job_id: str, execution_id: str) -> bool:
    """An occurrence's id (`<jobId>.<13 digits>`): the only ones a pack holds."""
    prefix, _, rest = execution_id.partition(".")
    return prefix == job_id and len(rest) == 13 and rest.isdigit()
