"""Job snapshots (domain/packs.py): what a pack entry carries of its job, and the job it gives back."""
import json

import pytest

from jobsched.domain.executions import Dispatch, DispatchKind, execution_id_for
from jobsched.domain.jobs import Job
from jobsched.domain.packs import SNAPSHOT_MAX_BYTES, Pack, job_of_snapshot, snapshot_of


def item_of(payload, **extra) -> dict:
    return {"tenantId": "tenant-a", "jobId": "job_01b8dac5c7887ac8afc2f63445198faa", "name": "n",
            "schedule": json.dumps({"type": "RATE", "periodMs": 60000, "anchorMs": 0}),
            "target": json.dumps({"type": "HTTP", "url": "https://partner.example/hook", "method": "POST"}),
            "payload": json.dumps(payload), "timeoutSec": 30,
            "retryPolicy": json.dumps({"maxAttempts": 3, "backoff": "EXPONENTIAL", "initialDelayMs": 1000,
                                       "maxDelayMs": 60000}),
            "priority": "NORMAL", "state": "ACTIVE", "generation": 4, "version": 7, "createdMs": 1, "updatedMs": 2,
            "pausedSpans": [[1, 2]], **extra}


def job(payload, **extra) -> Job:
    return Job.from_item(item_of(payload, **extra))


def entry(j: Job, item: dict) -> Dispatch:
    due = 1_900_000_000_000
    return Dispatch(DispatchKind.FIRE, j.tenant_id, j.job_id, execution_id_for(j.job_id, due), due, j.generation,
                    run=1, solo=False, snapshot=snapshot_of(j, item))


@pytest.mark.parametrize("payload", [{"a": 1.5, "b": [1, "x"]}, "a text", None, 0, [], {"u": "\u00e9\U0001F600"}])
def test_an_entry_gives_back_its_job_through_the_lane_message(payload):
    j = job(payload)
    message = Pack("0#1900000000#NORMAL#abc", (entry(j, item_of(payload)),)).to_json()
    (carried,) = Pack.from_json(message).entries
    back = job_of_snapshot(carried)
    assert back.spec == j.spec and (back.state, back.generation, back.version) == (j.state, j.generation, j.version)
    assert back.spec.payload == payload and type(back.spec.payload) is type(payload)
    # what the worker never reads, and what the dispatch says, is not carried
    assert not {"pausedSpans", "tenantId", "jobId", "generation"} & set(carried.snapshot)


def test_a_job_too_large_or_that_pauses_itself_or_fires_often_carries_none():
    def of(payload, **extra):
        return snapshot_of(job(payload, **extra), item_of(payload, **extra))

    assert of({"x": "y" * SNAPSHOT_MAX_BYTES}) is None
    assert of({}, pauseAfterFailures=3) is None
    assert of({}, schedule=json.dumps({"type": "RATE", "periodMs": 5000, "anchorMs": 0})) is None
    assert of({}) is not None
    # and an item that is not the job's as read (another version) gives none
    assert snapshot_of(job({}), item_of({}, version=8)) is None
