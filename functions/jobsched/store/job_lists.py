"""The Jobs table's lists (JobsStore's, store/jobs.py): a tenant's jobs in creation order over
its keys, by state through a state index, and through the tag and name entries. Each page reads
its matches and then the jobs themselves, strongly consistent, checked again as they now are."""
from __future__ import annotations

from typing import Any, Callable

from boto3.dynamodb.conditions import Attr, Key

from jobsched.domain.errors import FieldProblem, InvalidRequest
from jobsched.domain.jobs import Job, JobState, tenant_of, tenant_partitions
from jobsched.store.dynamo import Page, decode_cursor, encode_cursor, plain
from jobsched.store.jobs_state_index import (JOBS_BY_STATE_SHARD_INDEX, STATE_SHARD_ATTRIBUTE, STATE_SHARDS,
                                              UPGRADE_KEY, merged_items, shard_query)

JOB_ID_PREFIX = "job_"

# Jobs by tenant and state (partition tenantId, sort state; keys only): the old state index, on a
# table only where a deployment keeps it (`-c stateIndex=JobsByState`). Only job items carry
# `state`. Its partition is the job item's (the tenant's own key, or one of its shards). Replaced
# by JobsByStateShard (store/jobs_state_index.py: one tenant's entries on 32 keys per state).
JOBS_BY_STATE_INDEX = "JobsByState"

# A list by state's part that reads the jobs JobsByStateShard does not hold yet (_unsharded_query).
UNSHARDED = "unsharded"


class JobLists:
    """The lists of JobsStore: it provides _table, _pool, _state_index, _shards_done and get_many."""

    def list_indexed(self, tenant_id: str, prefix: str, keep: Callable[[Job], bool], limit: int,
                     cursor: str | None) -> Page:
        """The tenant's jobs whose index entries start with `prefix` and that `keep` accepts (the
        job as it now is: an entry left by a crash, or a job changed since, is passed over)."""
        start = decode_cursor(cursor, {"tenantId": str, "jobId": str})
        if start and (start["tenantId"] != tenant_id or not start["jobId"].startswith(prefix)):
            raise InvalidRequest("cursor: belongs to another list", [FieldProblem("cursor", "belongs to another list")])
        query = {"KeyConditionExpression": Key("tenantId").eq(tenant_id) & Key("jobId").begins_with(prefix)}
        return self._read_matches(tenant_id, query, start, limit, lambda raw: raw["jobId"].rsplit("#", 1)[1], keep,
                                  lambda raw: {"tenantId": tenant_id, "jobId": raw["jobId"]})

    def _read_matches(self, tenant_id: str, query: dict, start: dict | None, limit: int,
                      job_id_of: Callable[[dict], str], keep: Callable[[Job], bool],
                      cursor_key_of: Callable[[dict], dict]) -> Page:
        """A page of the tenant's jobs named by an index's entries (an index entry of the table, or
        a GSI's): each page of entries, then the jobs they name in one strongly consistent batch
        read, each checked by `keep` as it now is (the index may lag or hold a crash's leftover)."""
        items: list[Job] = []
        positions: dict[str, dict] = {}

        def after(job: Job) -> str | None:
            return encode_cursor(positions[job.job_id])

        while True:
            kwargs: dict[str, Any] = {**query, "Limit": max(limit - len(items), 10)}
            if start:
                kwargs["ExclusiveStartKey"] = start
            answer = self._table.query(**kwargs)
            entries = answer.get("Items", [])
            found = self.get_many([(tenant_id, job_id_of(raw)) for raw in entries], whole=True)
            for raw in entries:
                job = found.get((tenant_id, job_id_of(raw)))
                if job is None or not keep(job):
                    continue
                positions[job.job_id] = cursor_key_of(raw)
                items.append(job)
                if len(items) == limit:
                    return Page(items, after(job), after)
            start = answer.get("LastEvaluatedKey")
            if not start:
                return Page(items, None, after)

    def list_in_state(self, tenant_id: str, state: JobState, limit: int, cursor: str | None) -> Page:
        """The tenant's jobs in `state`, through the JobsByState index: each page reads its
        matches' keys and then the jobs themselves (strongly consistent, checked again: the index
        is eventually consistent), so its cost grows with the matches, never with the tenant's
        history of ended jobs."""
        start = decode_cursor(cursor, {"tenantId": str, "jobId": str, "state": str})
        if start and (tenant_of(start["tenantId"]) != tenant_id or start["state"] != state.value):
            raise InvalidRequest("cursor: belongs to another list", [FieldProblem("cursor", "belongs to another list")])
        if self._state_index == JOBS_BY_STATE_SHARD_INDEX:
            return self._list_in_state_shards(tenant_id, state, limit, start["jobId"] if start else None)
        # The old index is keyed by the job item's partition: the tenant's own key, then each of
        # its shards in turn (tenant_partitions); a cursor names the key it stopped on.
        partitions = tenant_partitions(tenant_id)
        if start and start["tenantId"] not in partitions:
            raise InvalidRequest("cursor: belongs to another list", [FieldProblem("cursor", "belongs to another list")])
        items: list[Job] = []
        positions: dict[str, str] = {}

        def cursor_after(job: Job) -> str | None:
            return positions[job.job_id]

        for partition in partitions[partitions.index(start["tenantId"]) if start else 0:]:
            query = {"IndexName": JOBS_BY_STATE_INDEX,
                     "KeyConditionExpression": Key("tenantId").eq(partition) & Key("state").eq(state.value)}
            resume = start if start and start["tenantId"] == partition else None
            # A job gone, or moved on since the index was written, is passed over.
            page = self._read_matches(tenant_id, query, resume, limit - len(items), lambda raw: raw["jobId"],
                                      lambda job: job.state is state,
                                      lambda raw, p=partition: {"tenantId": p, "jobId": raw["jobId"],
                                                                "state": state.value})
            for job in page.items:
                positions[job.job_id] = page.cursor_after(job)
            items.extend(page.items)
            if len(items) == limit:
                return Page(items, cursor_after(items[-1]), cursor_after)
        return Page(items, None, cursor_after)

    def _list_in_state_shards(self, tenant_id: str, state: JobState, limit: int, after: str | None) -> Page:
        """The jobs in `state` after the job id `after`, in job id order (creation order, as the
        unfiltered list): the entries of the state's 32 shards merged (store/jobs_state_index.py),
        then their jobs read in strongly consistent batches and checked as they now are. The
        cursor is the last job returned, the one position all 32 queries resume after, in the
        same form as the old index's (tenantId, jobId, state): a cursor of either reads on."""
        items: list[Job] = []

        def cursor_after(job: Job) -> str | None:
            return encode_cursor({"tenantId": tenant_id, "jobId": job.job_id, "state": state.value})

        index_query = shard_query(self._table, tenant_id, state.value, after, max(limit, 10))
        parts: list = list(range(STATE_SHARDS))
        if not self._state_shards_done():
            parts.append(UNSHARDED)  # jobs of a release before the index: not in it until the upgrade

        def query(part, resume: dict | None) -> dict:
            if part == UNSHARDED:
                return self._unsharded_query(tenant_id, state, after, max(limit, 10), resume)
            return index_query(part, resume)

        entries = (job_id for job_id in (str(raw["jobId"]) for raw in merged_items(query, parts, self._pool.map))
                   if job_id != after)
        while True:
            chunk = [job_id for _, job_id in zip(range(max(limit - len(items), 10)), entries)]
            found = self.get_many([(tenant_id, job_id) for job_id in chunk], whole=True)
            for job_id in chunk:
                job = found.get((tenant_id, job_id))
                if job is None or job.state is not state:  # gone, or moved on since the index was written
                    continue
                items.append(job)
                if len(items) == limit:
                    return Page(items, cursor_after(job), cursor_after)
            if not chunk:
                return Page(items, None, cursor_after)

    def _state_shards_done(self) -> bool:
        """Whether `jobsched upgrade state-shards` has given every job its stateShard (its record,
        UPGRADE_KEY). Read on each list by state until it says so, then never again in this
        container: an eventually consistent read that lags only reads the fallback once more."""
        if not self._shards_done:
            record = self._table.get_item(Key=UPGRADE_KEY).get("Item") or {}
            self._shards_done = bool(record.get("done"))
        return self._shards_done

    def _unsharded_query(self, tenant_id: str, state: JobState, after: str | None, page: int,
                         resume: dict | None) -> dict:
        """The jobs in `state` that JobsByStateShard does not hold yet: written by a release before
        it (no stateShard), all on the tenant's own key (made before the tenant's shards too), in
        job id order after `after`. Until the upgrade is done, a list by state reads them here: it
        then reads every job of the tenant's own key (the filter applies after the read)."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": Key("tenantId").eq(tenant_id)
            & Key("jobId").between(after or JOB_ID_PREFIX, f"{JOB_ID_PREFIX}~"),
            "FilterExpression": Attr(STATE_SHARD_ATTRIBUTE).not_exists() & Attr("state").eq(state.value),
            "ProjectionExpression": "jobId", "Limit": page}
        if resume:
            kwargs["ExclusiveStartKey"] = resume
        return self._table.query(**kwargs)

    def list_for_tenant(self, tenant_id: str, state: JobState | None, limit: int, cursor: str | None) -> Page:
        """In creation order (job ids are time-ordered): the tenant's keys (its own and its 32
        shards: tenant_partitions) read in parallel and merged in job id order. A cursor is the
        last job returned (the one position every key's query resumes after), so jobs created
        meanwhile appear at the end and none is skipped or repeated; a cursor of the single-key
        list before the shards has the same form and reads on."""
        start = decode_cursor(cursor, {"tenantId": str, "jobId": str})
        if start and start["tenantId"] != tenant_id:
            raise InvalidRequest("cursor: belongs to another list", [FieldProblem("cursor", "belongs to another list")])
        after = start["jobId"] if start else None

        def cursor_after(job: Job) -> str | None:
            return encode_cursor({"tenantId": tenant_id, "jobId": job.job_id})

        def query(partition: str, resume: dict | None) -> dict:
            kwargs: dict[str, Any] = {
                # Job ids only: "job_" up to "job_~" ("~" sorts after every id character), after the cursor.
                "KeyConditionExpression": Key("tenantId").eq(partition)
                & Key("jobId").between(after or JOB_ID_PREFIX, f"{JOB_ID_PREFIX}~"),
                "Limit": max(limit, 10) if state is None else max(limit, 25),
            }
            if state is not None:
                kwargs["FilterExpression"] = Attr("state").eq(state.value)
            if resume:
                kwargs["ExclusiveStartKey"] = resume
            return self._table.query(**kwargs)

        items: list[Job] = []
        for raw in merged_items(query, tenant_partitions(tenant_id), self._pool.map):
            if raw["jobId"] == after:  # BETWEEN takes the cursor's own job too
                continue
            items.append(Job.from_item(plain(raw)))
            if len(items) == limit:
                return Page(items, cursor_after(items[-1]), cursor_after)
        return Page(items, None, cursor_after)
