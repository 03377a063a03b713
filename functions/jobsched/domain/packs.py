"""Packs: the FIRE executions of one lane, one segment and one due second, carried as one lane
message, claimed by one write and recorded in one item (docs/architecture.md, "Packs").

A pack of one is the degenerate case. Kinds other than FIRE (LEASE, CHECK, RETRY, steps, hooks,
sweeps, triggers, backfills) ride as a message of one dispatch without a pack id and run the
per-execution path."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Iterable

from jobsched.domain.executions import Dispatch, DispatchKind

# At most this many entries a pack, and about this many bytes of sealed body. SQS bills a request
# per 64 KB chunk, so a message's bill follows its bytes, not its count: a pack whose entries carry
# their jobs (about 1.3 KB each) fills two chunks with 76 of them rather than one with 46, for the
# same bytes a fire and half the messages, claims and invocations. Ten of them, a SendMessageBatch,
# stay under SQS's 1 MiB a batch (with their attributes) and a Lambda batch's 6 MB.
MAX_PACK_ENTRIES = 100
MAX_PACK_BYTES = 100_000
# The seal's envelope escapes the body's quotes: a dispatch of n bytes takes about this much more.
_ESCAPED = 1.15
_ENVELOPE_BYTES = 120
PACK_PREFIX = "pack#"


class PackStatus(str, Enum):
    """An entry's outcome in its pack item."""

    SUCCEEDED = "SUCCEEDED"  # the call succeeded: recorded here alone (no per-execution item)
    STALE = "STALE"  # its job was deleted, paused or changed since the dispatch: not run
    MOVED = "MOVED"  # it left the pack: its per-execution item holds it now
    BACK = "BACK"  # it left the pack: re-sent as a new message (its pack id in `to`)


@dataclass(frozen=True)
class Pack:
    """A lane message's content. `pack_id` None: a message of one dispatch, per-execution path."""

    pack_id: str | None
    entries: tuple[Dispatch, ...]

    @property
    def due_ms(self) -> int:
        return min(d.due_ms for d in self.entries)

    def to_json(self) -> str:
        if self.pack_id is None:
            (only,) = self.entries
            return only.to_json()
        return json.dumps({"v": 2, "pack": self.pack_id, "e": [d.to_dict() for d in self.entries]},
                          separators=(",", ":"))

    @classmethod
    def from_json(cls, body: str) -> "Pack":
        data = json.loads(body)
        if isinstance(data, dict) and data.get("v") == 2:
            pack_id = data.get("pack")
            entries = data.get("e")
            if not isinstance(pack_id, str) or not isinstance(entries, list) or not entries:
                raise ValueError("a pack without an id or entries")
            return cls(pack_id, tuple(Dispatch.from_dict(e) for e in entries))
        return cls(None, (Dispatch.from_json(body),))

    def with_receives(self, receives: int) -> "Pack":
        return Pack(self.pack_id, tuple(replace(d, receives=receives) for d in self.entries))


@dataclass(frozen=True)
class PackKey:
    """Where a pack's item lives in the Executions table: partition `pack#<segment>#<due-second>`,
    sort key `<lane>#<digest>`."""

    segment: int
    due_second: int
    lane: str
    digest: str

    @property
    def pack_id(self) -> str:
        return f"{self.segment}#{self.due_second}#{self.lane}#{self.digest}"

    @property
    def partition(self) -> str:
        return partition_of(self.segment, self.due_second)

    @property
    def sort_key(self) -> str:
        return f"{self.lane}#{self.digest}"

    @classmethod
    def parse(cls, pack_id: str) -> "PackKey":
        segment, second, lane, digest = pack_id.split("#", 3)
        return cls(int(segment), int(second), lane, digest)


def partition_of(segment: int, due_second: int) -> str:
    return f"{PACK_PREFIX}{segment}#{due_second}"


def fence_key(job_id: str) -> str:
    return FENCE_PREFIX + job_id


def digest_of(execution_ids: Iterable[str], salt: str = "") -> str:
    """Deterministic from the entries: a duplicate of a message, or the same page sent again, maps
    to the same pack item; packs of different entries never share one."""
    text = salt + "\n" + "\n".join(sorted(execution_ids))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def packs_of(dispatches: list[Dispatch], segment: int, lane: str) -> list[Pack]:
    """The FIRE dispatches of one lane, one segment and one due second (the caller groups), cut
    into packs of at most MAX_PACK_ENTRIES entries and MAX_PACK_BYTES of sealed body."""
    packs: list[Pack] = []
    current: list[Dispatch] = []
    size = _ENVELOPE_BYTES
    for dispatch in sorted(dispatches, key=lambda d: d.execution_id):
        # An entry with its job's snapshot is measured as sealed (its quotes escaped once more: a
        # payload full of them grows more than the estimate); a bare dispatch by the estimate.
        text = dispatch.to_json()
        entry = (len(json.dumps(text)) if dispatch.snapshot is not None else int(len(text) * _ESCAPED)) + 1
        if current and (len(current) >= MAX_PACK_ENTRIES or size + entry > MAX_PACK_BYTES):
            packs.append(_sealed_pack(current, segment, lane))
            current, size = [], _ENVELOPE_BYTES
        current.append(dispatch)
        size += entry
    if current:
        packs.append(_sealed_pack(current, segment, lane))
    return packs


def _sealed_pack(entries: list[Dispatch], segment: int, lane: str) -> Pack:
    key = PackKey(segment, entries[0].due_ms // 1000, lane, digest_of(d.execution_id for d in entries))
    return Pack(key.pack_id, tuple(entries))


def back_pack_id(pack_id: str, execution_id: str, round_: int) -> str:
    """An entry handed back out of its pack is re-sent as a pack of one whose id follows from the
    pack it left, the entry and the pack's attempt (stored in its BACK outcome): a duplicate of
    the re-sent message maps to the same item, a later hand-back of the same entry to another."""
    key = PackKey.parse(pack_id)
    return replace(key, digest=digest_of([execution_id], salt=f"{key.digest}#{round_}")).pack_id


def packable(dispatch: Dispatch) -> bool:
    """Only an occurrence's first attempt rides in a pack, and not one its sender sends alone (two
    senders may send it); everything else is a message of one."""
    return (dispatch.kind is DispatchKind.FIRE and dispatch.attempt == 1 and dispatch.throttled_from_ms is None
            and dispatch.solo is not True)


@dataclass
class PackOutcome:
    """One entry's outcome in the pack item: what the API shows of an execution that never left
    its pack (`to`: the pack id of a BACK's re-sent message)."""

    status: PackStatus
    tenant_id: str = ""
    started_ms: int | None = None
    finished_ms: int | None = None
    run: int | None = None
    generation: int | None = None
    to: str | None = None
    output: Any = None
    at: int = 1  # the pack's attempt that recorded it: the earlier ones were lost (crashed or taken over)

    def to_item(self) -> dict:
        item: dict[str, Any] = {"s": self.status.value}
        for name, value in (("t", self.tenant_id), ("b", self.started_ms), ("f", self.finished_ms),
                            ("r", self.run), ("g", self.generation), ("to", self.to),
                            ("a", self.at if self.at != 1 else None)):
            if value not in (None, ""):
                item[name] = value
        if self.output is not None:
            item["o"] = json.dumps(self.output, separators=(",", ":"))
        return item

    @classmethod
    def from_item(cls, item: dict) -> "PackOutcome":
        def opt(name: str) -> int | None:
            return int(item[name]) if item.get(name) is not None else None

        return cls(PackStatus(item["s"]), str(item.get("t") or ""), opt("b"), opt("f"), opt("r"), opt("g"),
                   item.get("to"), json.loads(item["o"]) if item.get("o") else None, opt("a") or 1)


# Only for an entry whose sender did not decide its path (`Dispatch.solo` None: sent before senders
# decided, in flight across the upgrade): a job written less than this before an occurrence may have
# had that occurrence sent by its writer as well as by the tick (a writer dispatches directly what is
# due within the 4 minutes its watermark read covers, and the clocks were taken to differ by under a
# minute). Such an entry leaves its pack, and every copy meets the one per-execution claim. Entries
# whose sender decided (the tick, from the timer's write instant and its bucket's claim instant;
# service/handoff.py) are not checked: a fire two senders may send is never in a pack.
YOUNG_JOB_MS = 5 * 60_000

# A plain success keeps its output in the pack when it is this small; a larger one moves out.
MAX_PACK_OUTPUT_BYTES = 1_024


# Job snapshots (docs/architecture.md, "The worker reads no job"). An entry carries its job's item
# when it is at most this many bytes of JSON (a larger payload is read by the worker, as before).
SNAPSHOT_MAX_BYTES = 4_000
# A change to a job (pause, update, delete) fences its occurrences from this long before the change
# up to the end of its segment's claimed buckets; the worker trusts a snapshot only when its pack's
# fences are read at most SNAPSHOT_TRUST_MS after the pack's due instant (the rest is margin for
# the change's own clock against the worker's). Later than that, the worker reads the jobs.
FENCE_BACK_MS = 60_000
SNAPSHOT_TRUST_MS = 50_000
# A job firing more often than this carries no snapshot (its change would write a fence for every
# second of the window, up to 240): at most 24 fences a change.
SNAPSHOT_MIN_PERIOD_MS = 10_000
# A fence item's sort key in its pack partition (pack items' sort keys start with a lane's name).
FENCE_PREFIX = "fence#"
# A fence item lives this long after its second (it is read only within SNAPSHOT_TRUST_MS of it).
FENCE_TTL_S = 3_600
# The snapshot leaves out what the worker never reads of the job (its pause spans, up to 4 KB) and
# what its dispatch says already. It is the item as read, its JSON-text attributes left as text: no
# decoding and encoding again at the tick (0.14 ms a fire), for a fifth more bytes in the message.
_NOT_SNAPSHOTTED = frozenset(("pausedSpans", "pausedReason", "lastDeadExecution", "scheduleSinceMs", "tenantId",
                              "jobId", "generation"))


def snapshot_of(job, item: dict | None) -> dict | None:
    """What an entry of this job carries to the worker: `item`, the job's item as the tick read it
    (plain), less what the worker never reads; None when the worker must read the job itself: a
    job whose entries leave the pack anyway, one that pauses itself after failures (its failure
    count moves without a change of generation), one firing more often than every 10 s, one
    whose item is too large, or an item that is not this job's as read."""
    if item is None or not may_carry(job):
        return None
    if item.get("version") != job.version or item.get("generation") != job.generation:
        return None
    snapshot = {}
    size = 0
    for k, v in item.items():  # one pass (the tick makes one a fire)
        if k not in _NOT_SNAPSHOTTED:
            snapshot[k] = v
            size += len(k) + len(v if type(v) is str else str(v))
    return snapshot if size <= SNAPSHOT_MAX_BYTES else None


def may_carry(job) -> bool:
    """Whether this job's entries may carry its snapshot (its size aside)."""
    if job.spec.target is None or job.version < 0 or not _plain(job.spec) or job.spec.pause_after_failures is not None:
        return False
    period = job.spec.schedule.period_ms
    # A job firing more often: a change would fence up to one partition a second of its window.
    return period is None or period >= SNAPSHOT_MIN_PERIOD_MS


def job_of_snapshot(dispatch: Dispatch):
    """The job an entry carries (as its snapshot was taken, with the dispatch's own ids)."""
    from jobsched.domain.jobs import Job

    return Job.from_item({**dispatch.snapshot, "tenantId": dispatch.tenant_id, "jobId": dispatch.job_id,
                          "generation": dispatch.generation})


def _plain(spec) -> bool:
    """A job whose entries need nothing but their record at their end (no steps, flow control,
    expectations, hooks, run counts, overlap checks or container tasks)."""
    from jobsched.domain.jobs import OverlapPolicy, TargetType

    return (spec.steps is None and spec.flow_control is None and spec.expect is None
            and spec.on_success is None and spec.on_failure is None and spec.max_runs is None
            and spec.overlap_policy is not OverlapPolicy.SKIP
            and spec.target is not None and spec.target.type is not TargetType.ECS_TASK)


def runs_in_pack(job, dispatch: Dispatch) -> bool:
    """Whether an entry can take the pack's plain path: a scheduled occurrence's first attempt of a
    job whose end needs nothing but its record. Everything that needs the per-execution machinery
    (steps, container tasks, overlap checks, flow control, hooks, expectations, run counts, catch-up
    releases, a held-back dispatch, and for an entry whose sender did not decide its path a job
    written within YOUNG_JOB_MS of the occurrence) leaves the pack (MOVED) before its call."""
    return (packable(dispatch) and not dispatch.catch_up
            and (dispatch.solo is False or job.updated_ms < dispatch.due_ms - YOUNG_JOB_MS)
            and _plain(job.spec))


TAG_CHARS = 8


def entry_tag(execution_id: str) -> str:
    """An entry's short tag: the pack item lists its entries as these (800 B for 100, not 4.5 KB of
    ids), so that a read finds an execution its pack is running."""
    return hashlib.sha256(execution_id.encode()).hexdigest()[:TAG_CHARS]


def carries(tags: str, execution_id: str) -> bool:
    tag = entry_tag(execution_id)
    return any(tags[i:i + TAG_CHARS] == tag for i in range(0, len(tags), TAG_CHARS))


def as_execution(job_id: str, execution_id: str, outcome: PackOutcome | None, tenant_id: str = "",
                 running: tuple[int, int] | None = None):
    """What the API shows of an execution its pack holds: recorded SUCCEEDED there (its earlier pack
    attempts LOST: a crash or a takeover), or still running under the pack's attempt and lease
    (`running`: (attempt, lease end))."""
    from jobsched.domain.executions import AttemptRecord, Execution, ExecutionStatus, scheduled_ms_of

    due = scheduled_ms_of(execution_id)
    if outcome is None:
        attempt, lease = running
        lost = [AttemptRecord(n, ExecutionStatus.LOST, due, None) for n in range(1, attempt)]
        return Execution(job_id=job_id, execution_id=execution_id, tenant_id=tenant_id, scheduled_ms=due,
                         status=ExecutionStatus.RUNNING, attempt=attempt, lease_until_ms=lease, attempts=lost)
    started = outcome.started_ms
    lost = [AttemptRecord(n, ExecutionStatus.LOST, started or due, started) for n in range(1, outcome.at)]
    return Execution(job_id=job_id, execution_id=execution_id, tenant_id=outcome.tenant_id,
                     scheduled_ms=due, status=ExecutionStatus.SUCCEEDED, attempt=outcome.at,
                     started_ms=started, finished_ms=outcome.finished_ms, attempt_started_ms=started,
                     attempts=lost + [AttemptRecord(outcome.at, ExecutionStatus.SUCCEEDED, started or 0,
                                                    outcome.finished_ms)],
                     output=outcome.output, run=outcome.run, generation=outcome.generation)
