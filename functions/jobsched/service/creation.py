"""Creating jobs, one or a batch: idempotency keys, the tenant's quotas, the job's item and its
first timer. A create of one is a batch of one: there is one path."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Callable

from jobsched.domain.clock import Clock
from jobsched.domain.errors import ConditionLost, Conflict, DomainError, QuotaExceeded, Unavailable
from jobsched.domain.jobs import Job, JobSpec, JobState, new_job_id
from jobsched.domain.timers import segment_of
from jobsched.store.jobs import active_counter

# How long an Idempotency-Key is remembered.
IDEMPOTENCY_TTL_SECONDS = 24 * 3600
# One counter item takes at most ~1,000 writes a second in DynamoDB; a shard is given half that.
QUOTA_SHARD_WRITES_PER_SECOND = 500
SECONDS_MEMO_LIMIT = 10_000  # entries of JobCreation._seconds; cleared when passed


def body_hash(body: object) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True)
class Quotas:
    """A tenant's quotas, and how their counters are sharded so that no single item is written on
    every create or every completion of a busy tenant. Both quotas are counted in the same items
    (store/jobs.py, take_create_places): a shard holds its places among the tenant's jobs that have
    not ended and its places among this second's creates, so a create (or a whole batch's creates)
    is one write, not two. A limit L over K shards gives each shard ceil(L / K); a take that finds
    its shard full tries the others, so a request is refused only when every shard is full: at
    most K - 1 more than L are ever admitted, never fewer. With the default 50 creates a second
    there is one item."""

    max_active_jobs: int = 100_000
    max_creates_per_second: int = 50

    @property
    def active_shards(self) -> int:
        """A shard is written on every create and every end of a job (a one-time job ends as fast
        as it is created)."""
        return _shards(2 * self.max_creates_per_second, self.max_active_jobs)


def _shards(writes_per_second: int, limit: int) -> int:
    return max(1, min(limit, -(-writes_per_second // QUOTA_SHARD_WRITES_PER_SECOND)))


@dataclass(frozen=True)
class NewJob:
    """One job to create: its spec, its request's body_hash (which a repeat of its idempotency key
    must match) and that key, if any."""
    spec: JobSpec
    request_hash: str
    idempotency_key: str | None = None


def batch_job_key(batch_key: str, index: int) -> str:
    """The key of a batch's job that has none of its own: a space never occurs in a client's key
    (printable ASCII without it), so it meets no key a client sends."""
    return f"{batch_key} {index}"


# Per job of a batch: (the job, whether this call created it) or the error that refused it.
Created = tuple[Job, bool] | DomainError


class JobCreation:
    def __init__(self, jobs_store, handoff, clock: Clock, quotas: Quotas,
                 place_first_timer: Callable[[Job, int | None], None], fences=None) -> None:
        self._jobs = jobs_store
        self._fences = fences  # job snapshots: a creation taken back fences what was handed off
        self._handoff = handoff
        self._clock = clock
        self._quotas = quotas
        self._place_first_timer = place_first_timer
        # The second each quota item last counted, as this container saw it: a create tries the
        # write that fits it first (a new second, or one more in the same second).
        self._seconds: dict[tuple[str, str], int] = {}

    def create(self, tenant_id: str, entry: NewJob) -> tuple[Job, bool]:
        """One job: returns it and whether this call created it (False: an idempotent repeat).
        An AWS error is raised as it came (the API maps throttles to 503)."""
        result = self.create_many(tenant_id, [entry], isolate=False)[0]
        if isinstance(result, DomainError):
            raise result
        return result

    def check_batch_key(self, tenant_id: str, key: str, request_hash: str) -> None:
        """A batch's Idempotency-Key: remembered with the batch's body_hash; a repeat with another
        body is a conflict. Each job of the batch then goes with a key of its own made from it
        (batch_job_key), so a repeat answers each job as the first call made it."""
        earlier = self._jobs.remember_request(tenant_id, "batch", key, "batch", request_hash,
                                              self._clock.now_ms() // 1000, IDEMPOTENCY_TTL_SECONDS)
        if earlier is not None and earlier[1] != request_hash:
            raise Conflict("Idempotency-Key was already used with a different request body")

    def create_many(self, tenant_id: str, entries: list[NewJob], isolate: bool = True) -> list[Created]:
        """Each entry created with everything it implies (its item, its index entries, its quota
        place, its first timer), or not at all: a result per entry, in order. The quota places of
        the batch's new jobs are taken in one counter write (more only where a shard is full).
        `isolate`: an AWS error (a throttle after botocore's retries) refuses only its own job
        (Unavailable), whose writes are taken back, instead of the whole call."""
        now = self._clock.now_ms()
        results: list[Created | None] = [None] * len(entries)
        fresh: list[tuple[int, str]] = []  # (index, job id) of the jobs this call creates
        for index, entry in enumerate(entries):
            job_id = self._handoff.home_for(new_job_id(now))  # regions: marked with its home
            try:
                earlier = self._earlier(tenant_id, entry, job_id, now)
            except DomainError as exc:
                results[index] = exc
                continue
            if isinstance(earlier, Job):
                results[index] = (earlier, False)
            else:
                fresh.append((index, earlier or job_id))
        if fresh:
            shards, refusal = self._take_create_quotas(tenant_id, fresh[0][1], now, len(fresh))
            for (index, job_id), shard in zip(fresh, shards + [None] * (len(fresh) - len(shards))):
                if shard is None:
                    results[index] = refusal
                    continue
                try:
                    results[index] = self._create_one(tenant_id, job_id, entries[index].spec, shard, now)
                except DomainError as exc:
                    results[index] = exc
                except Exception:
                    if not isolate:
                        raise
                    results[index] = Unavailable("not created: the service is over a rate for this tenant; "
                                                 "repeat this job (with its idempotencyKey)")
        return results  # type: ignore[return-value]

    def _earlier(self, tenant_id: str, entry: NewJob, job_id: str, now: int) -> Job | str | None:
        """An idempotent repeat's job (its first timer placed again), the id a first call that died
        before writing its job chose, or None for a new job."""
        if not entry.idempotency_key:
            return None
        earlier = self._jobs.remember_request(tenant_id, "create", entry.idempotency_key, job_id,
                                              entry.request_hash, now // 1000, IDEMPOTENCY_TTL_SECONDS)
        if earlier is None:
            return None
        earlier_id, earlier_hash = earlier
        if earlier_hash != entry.request_hash:
            raise Conflict("Idempotency-Key was already used with a different request body")
        existing = self._jobs.get(tenant_id, earlier_id, consistent=True)
        if existing is None:
            return earlier_id  # the first call died before writing the job: finish its work
        # The first call may have died before its timer was written: placing it again is harmless
        # (same timer key, deterministic execution ids).
        self._place_first_timer(existing, existing.spec.schedule.first_fire())
        return existing

    def _create_one(self, tenant_id: str, job_id: str, spec: JobSpec, shard: int, now: int) -> Created:
        job = Job(tenant_id, job_id, spec, JobState.ACTIVE, generation=1, version=1, created_ms=now, updated_ms=now,
                  quota_shard=shard)
        try:
            self._jobs.put_new(job)
        except ConditionLost:
            self._jobs.give_back_quota(tenant_id, active_counter(shard))
            job = self._jobs.get(tenant_id, job_id, consistent=True)
            created = False
        except Exception:
            self._jobs.give_back_quota(tenant_id, active_counter(shard))
            raise
        else:
            created = True
        # Crash between the job write and the timer write: the client saw an error and retries
        # (with its Idempotency-Key, the retry places the timer of the same job).
        try:
            self._place_first_timer(job, spec.schedule.first_fire())
        except Exception:
            # Not half-created: the job this call wrote is taken back with its quota place (a job
            # with calendars stays; the caller's repeat with its key places its timer).
            # Its timer may have been written and handed off before the error: fenced first (best
            # effort: a failed fence does not keep a job the caller is told was not created).
            claimed = None
            if created and self._fences is not None:
                try:
                    claimed = self._fences.before_change(job, job.created_ms)
                except Exception:  # noqa: BLE001 - the timer's own error is the one raised
                    claimed = None
            if created and self._jobs.remove_new(job):
                self._jobs.give_back_quota(tenant_id, active_counter(shard))
                if self._fences is not None:
                    try:
                        self._fences.after_change(job, job.created_ms, claimed)
                    except Exception:  # noqa: BLE001 - the timer's own error is the one raised
                        pass
            raise
        return job, created

    def _take_create_quotas(self, tenant_id: str, first_job_id: str, now_ms: int,
                            count: int) -> tuple[list[int], QuotaExceeded | None]:
        """Places in both quotas for `count` creates, in one write to one shard's item while it has
        room (the next shards after); returns the shard of each place taken, in order, and the
        refusal of those past them (None when all were taken)."""
        second = now_ms // 1000
        quotas = self._quotas
        shards = quotas.active_shards
        active_limit = -(-quotas.max_active_jobs // shards)
        rate_limit = -(-quotas.max_creates_per_second // shards)
        first = segment_of(first_job_id, shards)  # the same stable hash that places the job's timers
        taken: list[int] = []
        refusals = set()
        for step in range(shards):
            shard = (first + step) % shards
            counter = active_counter(shard)
            # The second this container last saw on the item: a later one than its own clock's (a
            # container ahead started it) is counted in; an earlier one, or none, is a new second.
            seen = self._seconds.get((tenant_id, counter))
            places, refused, counted = self._jobs.take_create_places(
                tenant_id, counter, active_limit, max(second, seen or 0), rate_limit, count - len(taken),
                new_second_first=seen is None or seen < second)
            if len(self._seconds) > SECONDS_MEMO_LIMIT:
                self._seconds.clear()
            self._seconds[(tenant_id, counter)] = counted
            taken += [shard] * places
            if len(taken) == count:
                return taken, None
            refusals.add(refused)
        if refusals == {"active"}:
            return taken, QuotaExceeded(f"the tenant has {quotas.max_active_jobs} jobs that have not ended (the "
                                        "quota); cancel some or ask for a higher quota")
        return taken, QuotaExceeded(f"more than {quotas.max_creates_per_second} jobs created in one second; "
                                    "slow down and retry")
