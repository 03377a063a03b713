"""Regions (issue 25): home marks, global segments, and the lease rules and their store."""
from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from jobsched.domain.clock import FakeClock
from jobsched.domain.jobs import new_job_id
from jobsched.domain.ownership import (REWIND_MS, Lease, LeaseRules, TAKEOVER_STAGGER_MS, home_index, marked_job_id,
                                       take_wait_ms, takeover_order)
from jobsched.domain.timers import segment_of
from jobsched.service.ownership import Ownership, Verdict
from jobsched.store.ownership import OwnershipStore

REGIONS = ("us-east-1", "eu-west-1", "ap-northeast-1")
RULES = LeaseRules(lease_ms=90_000, clock_bound_ms=2_000)


def test_a_home_mark_is_read_back_and_an_unmarked_id_is_region_0():
    job_id = new_job_id(1_795_000_000_000)
    assert home_index(job_id) == 0
    for index in range(3):
        marked = marked_job_id(job_id, index)
        assert len(marked) == len(job_id) and home_index(marked) == index
    assert home_index(job_id[:-2] + "r") == 0  # not a mark: too short
    with pytest.raises(ValueError):
        marked_job_id(job_id, 10)


def test_a_marked_job_lies_in_its_home_block_at_the_same_place_in_every_block():
    job_id = new_job_id(1_795_000_000_000)
    places = {segment_of(marked_job_id(job_id, i), 18) - 18 * i for i in range(3)}
    assert len(places) == 1 and 0 <= places.pop() < 18
    assert 0 <= segment_of(job_id, 18) < 18  # an unmarked id: the single-region segment, unchanged


def test_holder_stops_before_the_end_and_taker_starts_after_it_by_the_clock_bound():
    lease = Lease(5, "us-east-1", 3, ends_ms=100_000, renewed_ms=10_000)
    assert RULES.holds(lease, "us-east-1", 97_999)
    assert not RULES.holds(lease, "us-east-1", 98_000)  # stops 2 s before the end by its own clock
    assert not RULES.holds(lease, "eu-west-1", 50_000)
    assert RULES.takeable_from_ms(lease) == 102_000  # starts 2 s after it by the taker's
    # with clocks within the bound, no real instant has both acting: 98,000 + 2,000 <= 102,000 - 2,000
    assert RULES.rewind_minute(lease, 200_000) == (10_000 - REWIND_MS) // 60_000
    # a chain of takes: a holder that took it itself less than REWIND_MS before its last renewal
    # passes on what its own take handed off again from (those messages may be in its queues only)
    brief = Lease(5, "eu-west-1", 4, ends_ms=400_000, renewed_ms=310_000, taken_ms=250_000, rewind_from_ms=10_000)
    assert RULES.rewind_minute(brief, 500_000) == (10_000 - REWIND_MS) // 60_000
    settled = Lease(5, "eu-west-1", 4, ends_ms=2_000_000, renewed_ms=1_910_000, taken_ms=250_000, rewind_from_ms=10_000)
    assert RULES.rewind_minute(settled, 2_100_000) == (1_910_000 - REWIND_MS) // 60_000


def test_takeover_order_starts_at_the_home_and_skips_regions_that_are_down():
    assert takeover_order(18 + 4, 18, REGIONS) == ["eu-west-1", "ap-northeast-1", "us-east-1"]
    everyone = set(REGIONS)
    assert take_wait_ms(22, 18, REGIONS, "eu-west-1", everyone) == 0
    assert take_wait_ms(22, 18, REGIONS, "us-east-1", everyone) is None  # a live home takes its own back alone
    assert take_wait_ms(22, 18, REGIONS, "us-east-1", {"us-east-1", "ap-northeast-1"}) == TAKEOVER_STAGGER_MS
    # the home (eu-west-1) is down: ap-northeast-1 is first
    assert take_wait_ms(22, 18, REGIONS, "ap-northeast-1", {"ap-northeast-1", "us-east-1"}) == 0
    assert take_wait_ms(22, 18, REGIONS, "us-east-1", {"ap-northeast-1", "us-east-1"}) == TAKEOVER_STAGGER_MS
    assert take_wait_ms(22, 18, REGIONS, "us-east-1", {"ap-northeast-1"}) is None  # not live itself


@pytest.fixture
def tables():
    with mock_aws():
        dynamodb = boto3.resource("dynamodb", region_name="us-east-2")
        dynamodb.create_table(TableName="ownership", BillingMode="PAY_PER_REQUEST",
                              KeySchema=[{"AttributeName": "segment", "KeyType": "HASH"}],
                              AttributeDefinitions=[{"AttributeName": "segment", "AttributeType": "N"}])
        yield OwnershipStore(dynamodb, "ownership")


def regions_on(store, clock, segments=2):
    return {r: Ownership(store, RULES, REGIONS, r, segments, clock) for r in REGIONS}


def test_each_home_takes_its_block_and_nobody_else_takes_a_segment_never_held(tables):
    clock = FakeClock(1_795_000_000_000)
    view = regions_on(tables, clock)
    for segment in range(6):
        for region in reversed(REGIONS):  # strangers first: they must not take it
            grant = view[region].for_tick(segment)
            home = REGIONS[segment // 2]
            assert (grant is not None) == (region == home), (segment, region)
            if grant is not None:
                assert grant.epoch == 1 and grant.rewind_minute is None  # a first lease rewinds nothing
    assert view["eu-west-1"].held() == [2, 3]
    assert view["us-east-1"].epoch_for(0) == 1 and view["us-east-1"].epoch_for(2) is None


def test_a_region_that_stops_renewing_loses_its_segments_to_the_next_live_one_with_a_new_epoch(tables):
    clock = FakeClock(1_795_000_000_000)
    view = regions_on(tables, clock)
    for _ in range(2):  # two minutes of everyone ticking every segment
        for segment in range(6):
            for region in REGIONS:
                view[region].for_tick(segment)
        clock.advance_ms(60_000)
    died_at = clock.now_ms()
    last_renewal = tables.get(2).renewed_ms
    # eu-west-1 dies: the others tick on each minute; its leases end 90 s after its last renewal
    taken_at = None
    while taken_at is None and clock.now_ms() < died_at + 400_000:
        clock.advance_ms(1_000)
        if clock.now_ms() % 60_000 != 1_000:
            continue
        for segment in range(6):
            for region in ("us-east-1", "ap-northeast-1"):
                grant = view[region].for_tick(segment)
                if segment == 2 and grant is not None and grant.rewind_minute is not None:
                    taken_at, taker, grant_taken = clock.now_ms(), region, grant
    assert taker == "ap-northeast-1"  # next after the home in the takeover order
    assert grant_taken.epoch == 2
    assert taken_at >= last_renewal + RULES.lease_ms + RULES.clock_bound_ms
    assert taken_at - (last_renewal + RULES.lease_ms) <= 60_000 + RULES.clock_bound_ms  # within a tick
    assert grant_taken.rewind_minute * 60_000 <= last_renewal - 3 * 60_000
    # a message sent by eu-west-1 under epoch 1 is refused there once it can read the store again
    clock.advance_ms(1_000)
    assert view["eu-west-1"].verdict(2, 1) is Verdict.STALE
    assert view["ap-northeast-1"].verdict(2, 2) is Verdict.ACT


def test_a_region_back_gets_its_segments_back_after_the_clock_bound(tables):
    clock = FakeClock(1_795_000_000_000)
    view = regions_on(tables, clock)
    for segment in (0, 1):
        view["us-east-1"].for_tick(segment)
    # us-east-1 silent for 3 minutes: eu-west-1 (next in order) takes its segments
    for _ in range(4):
        clock.advance_ms(60_000)
        for segment in (0, 1):
            view["eu-west-1"].for_tick(segment)
            view["ap-northeast-1"].for_tick(segment)
    assert tables.get(0).region == "eu-west-1" and tables.get(0).epoch == 2
    # us-east-1 ticks again: its heartbeat is seen, the holder gives back, then it takes with epoch 3
    for _ in range(3):
        clock.advance_ms(60_000)
        for segment in (0, 1):
            for region in REGIONS:
                view[region].for_tick(segment)
    lease = tables.get(0)
    assert (lease.region, lease.epoch) == ("us-east-1", 3)
    assert view["eu-west-1"].epoch_for(0) is None and view["us-east-1"].epoch_for(0) == 3


def test_an_unreachable_store_acts_on_nothing_once_the_leases_it_knew_have_ended(tables):
    clock = FakeClock(1_795_000_000_000)
    view = regions_on(tables, clock)
    assert view["us-east-1"].for_tick(0).epoch == 1
    assert view["us-east-1"].verdict(0, 1) is Verdict.ACT

    class Partitioned:
        def __getattr__(self, name):
            def fail(*args, **kwargs):
                raise ConnectionError("partitioned from the ownership table")
            return fail

    view["us-east-1"]._store = Partitioned()
    assert view["us-east-1"].for_tick(0) is None  # the tick hands off nothing it cannot renew
    clock.advance_ms(RULES.lease_ms - RULES.clock_bound_ms - 1_000)
    assert view["us-east-1"].verdict(0, 1) is Verdict.ACT  # still within its lease by its own clock
    clock.advance_ms(1_000)
    assert view["us-east-1"].verdict(0, 1) is Verdict.WAIT  # stopped before the lease's end


@pytest.mark.parametrize("into_minute_ms", [5_000, 50_000])  # early in a minute; less than CACHE_MS before its end
def test_a_given_back_lease_ends_just_before_a_minute_and_after_every_cached_view_was_read_again(tables, into_minute_ms):
    from jobsched.service.ownership import CACHE_MS

    start = 1_795_000_020_000  # a minute's start
    clock = FakeClock(start + into_minute_ms)
    view = regions_on(tables, clock)
    held = tables.take(0, None, "eu-west-1", clock.now_ms(), RULES.lease_ms, RULES.clock_bound_ms)
    assert held is not None
    tables.beat(0, clock.now_ms())  # us-east-1, the home of segment 0, is live again
    cached_until = clock.now_ms() + CACHE_MS  # a worker of eu-west-1 read its view just now
    grant = view["eu-west-1"].for_tick(0)  # given back: it still hands off until the new end
    assert grant is not None and grant.epoch == held.epoch
    lease = tables.get(0)
    assert lease.region == "eu-west-1" and lease.ends_ms <= held.ends_ms
    assert lease.ends_ms % 60_000 == 60_000 - RULES.clock_bound_ms  # just before a minute's ticks
    assert lease.ends_ms - RULES.clock_bound_ms >= cached_until  # every stale view is read again first
    clock.set_ms(lease.ends_ms + RULES.clock_bound_ms)  # the next minute's tick of the home
    assert view["us-east-1"].for_tick(0).epoch == held.epoch + 1


def test_the_holder_acts_on_any_epoch_and_a_region_whose_lease_was_taken_refuses_its_old_messages(tables):
    clock = FakeClock(1_795_000_020_000)
    view = regions_on(tables, clock)
    assert view["us-east-1"].for_tick(0).epoch == 1
    # the holder: a message sent before leases (epoch 0) or under its own older epoch is its work
    assert view["us-east-1"].verdict(0, 0) is Verdict.ACT and view["us-east-1"].verdict(0, 1) is Verdict.ACT
    # ... but not within the claim margin of the lease's end
    clock.advance_ms(RULES.lease_ms - RULES.clock_bound_ms - 5_000)
    assert view["us-east-1"].verdict(0, 1, margin_ms=10_000) is Verdict.WAIT
    # once taken by another region, the old epoch's messages are refused where they wait
    clock.advance_ms(60_000)
    grant = view["ap-northeast-1"].for_tick(0)  # the first live region after the silent home
    assert grant is not None and grant.epoch == 2
    assert view["us-east-1"].verdict(0, 1) is Verdict.STALE and view["us-east-1"].verdict(0, 0) is Verdict.STALE
    assert view["ap-northeast-1"].verdict(0, 1) is Verdict.ACT


def test_a_lease_run_out_by_a_late_tick_is_renewed_under_its_epoch_when_nobody_took_it(tables):
    clock = FakeClock(1_795_000_020_000)
    view = regions_on(tables, clock)
    assert view["us-east-1"].for_tick(0).epoch == 1
    clock.advance_ms(RULES.lease_ms)  # the next tick came 30 s late: the lease ended by its clock
    assert view["us-east-1"].verdict(0, 1) is Verdict.WAIT
    grant = view["us-east-1"].for_tick(0)
    assert grant is not None and grant.epoch == 1 and grant.rewind_minute is None
    assert view["us-east-1"].verdict(0, 1) is Verdict.ACT


def test_a_replicated_write_conflict_is_tried_again():
    from botocore.exceptions import ClientError

    from jobsched.store.ownership import _Retrying

    calls = []

    class Table:
        def update_item(self, **kwargs):
            calls.append(kwargs)
            if len(calls) < 3:
                raise ClientError({"Error": {"Code": "ReplicatedWriteConflictException", "Message": "busy"}},
                                  "UpdateItem")
            return {"ok": True}

    assert _Retrying(Table(), sleep=lambda s: None).update_item(Key={"segment": 1}) == {"ok": True}
    assert len(calls) == 3
    calls.clear()

    class Refused(Table):
        def update_item(self, **kwargs):
            calls.append(kwargs)
            raise ClientError({"Error": {"Code": "ConditionalCheckFailedException", "Message": "no"}}, "UpdateItem")

    with pytest.raises(ClientError):
        _Retrying(Refused(), sleep=lambda s: None).update_item(Key={"segment": 1})
    assert len(calls) == 1  # a refused condition is an answer, not a fault


def test_a_replica_that_fails_for_its_region_is_passed_over_for_the_next_then_tried_again():
    from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

    from jobsched.store.ownership import FAILBACK_S, OwnershipStore

    now = [0.0]
    calls = []

    def error(code, status):
        return ClientError({"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}},
                           "GetItem")

    class Replica:
        def __init__(self, region):
            self.region, self.fault = region, None

        def Table(self, name):  # noqa: N802 - boto3's resource API
            replica = self

            class Table:
                def get_item(self, **kwargs):
                    calls.append(replica.region)
                    if replica.fault is not None:
                        raise replica.fault
                    return {"Item": {"segment": 1, "region": replica.region, "epoch": 1, "endsMs": 9, "renewedMs": 1}}
            return Table()

    near, far = Replica("us-east-1"), Replica("us-west-2")
    store = OwnershipStore(near, "ownership", sleep=lambda s: None, fallbacks=[far], monotonic=lambda: now[0])
    assert store.get(1).region == "us-east-1" and calls == ["us-east-1"]
    # The region's endpoint is unreachable, times out or answers a server error: the other replica answers.
    for fault in (EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com"),
                  ReadTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com"),
                  error("InternalServerError", 500), error("ServiceUnavailable", 503),
                  # ... or keeps throttling or conflicting past the retries in the region (what an
                  # isolated MRSC replica answers is not documented): the other replica is tried
                  error("ThrottlingException", 400), error("ReplicatedWriteConflictException", 400)):
        near.fault, calls[:] = fault, []
        now[0] += FAILBACK_S  # the near one is tried first again
        assert store.get(1).region == "us-west-2" and calls[-1] == "us-west-2", fault
        assert set(calls[:-1]) == {"us-east-1"}, fault  # (a throttle is tried 3 times there first)
        tried = len(calls)
        assert store.get(1).region == "us-west-2" and calls[tried:] == ["us-west-2"]  # passed over meanwhile
    near.fault, calls[:] = None, []
    now[0] += FAILBACK_S
    assert store.get(1).region == "us-east-1" and calls == ["us-east-1"]
    # An answer about the request, not the region, is the same in every replica: no failover.
    for fault in (error("ConditionalCheckFailedException", 400), error("AccessDeniedException", 400),
                  error("ValidationException", 400)):
        near.fault, calls[:] = fault, []
        with pytest.raises(ClientError):
            store.get(1)
        assert calls == ["us-east-1"], fault
    # Every replica down: the last error is the caller's (the tick then acts on nothing).
    near.fault = far.fault = EndpointConnectionError(endpoint_url="x")
    with pytest.raises(EndpointConnectionError):
        store.get(1)
