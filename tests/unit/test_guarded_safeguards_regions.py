"""Multi-region safeguards that a mutation pass found held by no test: the lease rules of the tick
(service/ownership.py) and of the ownership table (store/ownership.py, on moto), the worker's
verdicts, rewinds of the watermarks, a new job's home, retries as replicated timers, and a lane
send of a segment not held."""
from __future__ import annotations

from types import SimpleNamespace

import boto3
import pytest
from moto import mock_aws

from jobsched.domain.clock import FakeClock
from jobsched.domain.errors import WrongRegion
from jobsched.domain.executions import Dispatch, DispatchKind, execution_id_for
from jobsched.domain.jobs import Job, JobSpec, JobState, Target, TargetType, new_job_id
from jobsched.domain.ownership import Lease, home_index
from jobsched.domain.schedule import rate_schedule
from jobsched.domain.timers import TimerKind, segment_of
from jobsched.service.handoff import HandOff
from jobsched.service.outcomes import Outcome, Outcomes
from jobsched.service.ownership import Verdict
from jobsched.service.worker import RedeliverLater, Worker
from jobsched.store.queues import LaneQueues
from jobsched.store.segments import WatermarksStore

from .test_ownership import RULES, regions_on, tables  # noqa: F401 - the ownership table on moto

NOW = 1_795_000_020_000


# --- the tick's lease rules ------------------------------------------------------------------
def test_an_own_lease_lapsed_past_takeable_is_taken_anew_not_renewed(tables):
    # Given us-east-1 alone, holding its segment 0, then silent past its lease and the clock bound
    clock = FakeClock(NOW)
    view = regions_on(tables, clock)["us-east-1"]
    assert view.for_tick(0).epoch == 1
    clock.advance_ms(RULES.lease_ms + RULES.clock_bound_ms + 1_000)
    # When its tick runs again
    grant = view.for_tick(0)
    # Then it takes the segment under a new epoch, handing off again from before its last renewal
    assert grant is not None and grant.epoch == 2 and grant.rewind_minute is not None


def test_a_tick_of_a_segment_held_elsewhere_reads_no_heartbeats_before_it_is_takeable(tables, monkeypatch):
    clock = FakeClock(NOW)
    view = regions_on(tables, clock)
    assert view["us-east-1"].for_tick(0).epoch == 1
    clock.advance_ms(RULES.lease_ms - 10_000)
    scans = []
    real_all = tables.all
    monkeypatch.setattr(tables, "all", lambda: scans.append(1) or real_all())
    assert view["eu-west-1"].for_tick(0) is None
    assert scans == []


def test_a_lease_is_renewed_at_most_once_in_a_minute(tables):
    clock = FakeClock(NOW)
    view = regions_on(tables, clock)["us-east-1"]
    view.for_tick(0)
    renewed = tables.get(0).renewed_ms
    clock.advance_ms(10_000)  # a second run in the same minute (a catch-up)
    assert view.for_tick(0).epoch == 1
    assert tables.get(0).renewed_ms == renewed


# --- the ownership table's conditions -----------------------------------------------------------
def test_a_take_is_refused_for_a_lease_no_longer_current(tables):
    first = tables.take(0, None, "us-east-1", NOW, 90_000, 2_000)
    later = NOW + 200_000
    assert tables.take(0, first, "eu-west-1", later, 90_000, 2_000).epoch == 2
    # (ap-northeast-1 read the epoch-1 lease before that take; by now the epoch-2 one ended too)
    assert tables.take(0, first, "ap-northeast-1", later + 200_000, 90_000, 2_000) is None
    assert tables.get(0).region == "eu-west-1"


def test_a_take_is_refused_until_the_lease_ended_by_more_than_the_clock_bound(tables):
    held = tables.take(0, None, "us-east-1", NOW, 90_000, 2_000)
    assert tables.take(0, held, "eu-west-1", held.ends_ms + 1_000, 90_000, 2_000) is None
    assert tables.get(0).region == "us-east-1"
    assert tables.take(0, held, "eu-west-1", held.ends_ms + 2_000, 90_000, 2_000).epoch == 2


def test_a_first_take_is_refused_when_somebody_took_it_first(tables):
    assert tables.take(0, None, "us-east-1", NOW, 90_000, 2_000).epoch == 1
    assert tables.take(0, None, "eu-west-1", NOW + 1, 90_000, 2_000) is None
    assert tables.get(0).region == "us-east-1"


def lost_and_taken_back(tables) -> Lease:
    """us-east-1's epoch-1 lease, as it read it, after eu-west-1 took it and it took it back (epoch 3)."""
    first = tables.take(0, None, "us-east-1", NOW, 90_000, 2_000)
    second = tables.take(0, first, "eu-west-1", NOW + 100_000, 90_000, 2_000)
    assert tables.take(0, second, "us-east-1", NOW + 200_000, 90_000, 2_000).epoch == 3
    return first


def test_a_renewal_under_an_older_epoch_of_the_same_region_is_refused(tables):
    old = lost_and_taken_back(tables)
    ends = tables.get(0).ends_ms
    assert tables.renew(old, NOW + 210_000, 90_000) is None
    assert tables.get(0).ends_ms == ends


def test_a_release_under_an_older_epoch_of_the_same_region_is_refused(tables):
    old = lost_and_taken_back(tables)
    ends = tables.get(0).ends_ms
    assert tables.release(old, NOW + 205_000) is False
    assert tables.get(0).ends_ms == ends


def test_a_heartbeat_never_moves_back(tables):
    tables.beat(1, NOW)
    tables.beat(1, NOW - 5_000)  # a late write of an earlier beat
    assert tables.all()[1][1] == NOW


# --- the worker ---------------------------------------------------------------------------------
def hourly_job() -> Job:
    spec = JobSpec(name="j", schedule=rate_schedule("PT1H", NOW), target=Target(TargetType.SQS, {"queueUrl": "q"}))
    return Job("t", "job_1", spec, JobState.ACTIVE, 1, 1, NOW, NOW)


def worker_with(verdicts: list[Verdict], job: Job | None = None):
    claims = []
    executions = SimpleNamespace(claim=lambda *args, **kwargs: claims.append(args) or pytest.fail("claimed"))
    stores = SimpleNamespace(jobs=SimpleNamespace(get=lambda *args, **kwargs: job), executions=executions,
                             lanes=None, alerts=None)
    outcomes = SimpleNamespace(runs=None, flow=None)
    worker = Worker(stores, outcomes, invoker=None, clock=FakeClock(NOW))
    answers = iter(verdicts)
    worker.regions = SimpleNamespace(multi_region=True, segment_of=lambda job_id: 0,
                                     ownership=SimpleNamespace(verdict=lambda *args: next(answers)))
    return worker, claims


def fire(epoch=1) -> Dispatch:
    return Dispatch(DispatchKind.FIRE, "t", "job_1", execution_id_for("job_1", NOW), NOW, 1, epoch=epoch)


def test_the_worker_refuses_a_message_of_an_epoch_handed_off_again():
    worker, _ = worker_with([Verdict.STALE], hourly_job())
    assert worker.process(fire()).outcome is Outcome.NOT_HELD


def test_the_worker_puts_back_a_message_of_a_segment_it_does_not_hold_now():
    worker, _ = worker_with([Verdict.WAIT], hourly_job())
    with pytest.raises(RedeliverLater):
        worker.process(fire())


def test_the_worker_looks_at_the_lease_again_just_before_the_claim():
    worker, claims = worker_with([Verdict.ACT, Verdict.WAIT], hourly_job())
    with pytest.raises(RedeliverLater):
        worker.process(fire(), hourly_job(), NOW)
    assert claims == []


# --- rewinds of the watermarks ------------------------------------------------------------------
@pytest.fixture
def watermarks():
    with mock_aws():
        dynamodb = boto3.resource("dynamodb", region_name="us-east-2")
        dynamodb.create_table(TableName="segments", BillingMode="PAY_PER_REQUEST",
                              KeySchema=[{"AttributeName": "segment", "KeyType": "HASH"}],
                              AttributeDefinitions=[{"AttributeName": "segment", "AttributeType": "N"}])
        yield WatermarksStore(dynamodb, "segments")


def test_a_rewind_never_moves_a_watermark_forwards(watermarks):
    watermarks.claim(0, 100)
    watermarks.mark_done(0, 100)
    watermarks.rewind(0, 200, 2)  # a segment behind stays where it is
    assert watermarks.get(0).done_through == 100 and watermarks.get(0).claimed_through == 100


def test_a_rewind_is_made_once_per_epoch(watermarks):
    watermarks.claim(0, 100)
    watermarks.mark_done(0, 100)
    watermarks.rewind(0, 80, 2)
    watermarks.claim(0, 95)
    watermarks.mark_done(0, 95)
    watermarks.rewind(0, 80, 2)  # the take replayed: the hand-off since is not done again
    assert watermarks.get(0).done_through == 95


# --- a new job's home, retries, lane sends ----------------------------------------------------------
def regions_ownership(held_block: int, segments: int):
    return SimpleNamespace(multi_region=True, region_index=0, regions=("us-east-1", "eu-west-1", "ap-northeast-1"),
                           epoch_for=lambda segment: 4 if segment // segments == held_block else None)


def stand_in_stores(**changes):
    return SimpleNamespace(**{"jobs": None, "executions": None, "timers": None, "watermarks": None, "lanes": None,
                              "calendars": None, "flow": None, **changes})


def test_a_new_job_is_homed_where_this_region_holds_its_segment():
    # Given a region (us-east-1) that holds none of its own segments now, but eu-west-1's
    handoff = HandOff(stand_in_stores(), FakeClock(NOW), 4, ownership=regions_ownership(1, 4))
    job_id = handoff.home_for(new_job_id(NOW))
    assert home_index(job_id) == 1
    assert segment_of(job_id, 4) // 4 == 1


def test_a_short_retry_of_a_multi_region_deployment_is_a_replicated_timer():
    sent, placed = [], []
    lanes = SimpleNamespace(send=sent.extend)
    handoff = SimpleNamespace(multi_region=True, segment_of=lambda job_id: 0,
                              place=lambda timer, job: placed.append(timer))
    outcomes = Outcomes(stand_in_stores(lanes=lanes), handoff, FakeClock(NOW))
    outcomes.schedule_retry(hourly_job(), fire(), 2, NOW + 10_000)
    assert sent == [] and [t.kind for t in placed] == [TimerKind.RETRY]


def test_a_lane_send_refuses_a_segment_this_region_does_not_hold():
    lanes = LaneQueues.__new__(LaneQueues)
    lanes.epoch_of = lambda job_id: None
    with pytest.raises(WrongRegion):
        lanes._stamped(fire(epoch=0))
