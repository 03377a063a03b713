"""Timer packs (domain/timer_packs.py, store/timers.py): the next FIRE timers of a hand-off grouped
per bucket into items of up to 100, read back in due order, their keys a function of their
contents, and a slice's pages ending at an item's end so that a saved position skips nothing."""
import random
from collections import Counter

from jobsched.domain.timer_packs import (PACK_MAX_TIMERS, SPARSE_SECOND_TIMERS, TimerExpander, is_pack, pack_item,
                                         pack_timers, second_runs, unpack)
from jobsched.domain.timers import TIMER_TTL_SECONDS, Timer, TimerKind, minute_of
from jobsched.store.timers import TimersStore

MINUTE = 29_000_000
T0 = MINUTE * 60_000


def fires(count, minute=MINUTE, tenant="acme", segment=3, spread_ms=60_000):
    return [Timer(minute * 60_000 + (i * 7_919) % spread_ms, TimerKind.FIRE, tenant, f"job_{i:032x}", 1 + i % 3,
                  segment, runs=i % 5) for i in range(count)]


def wire_bytes(item: dict) -> int:
    """DynamoDB's size of a wire item, as the strict layer bills it."""
    from jobsched.local.strict_aws import item_size
    return item_size(item)


def test_next_timers_are_packed_per_bucket_and_second_and_read_back_in_due_order():
    timers = fires(2_000, spread_ms=1_000)  # one due second
    packs, singles = pack_timers(timers)
    assert singles == []  # every bucket (slice) holds about 250 of them: all packed
    expanded = [t for item in packs for t in unpack(item)]
    assert sorted(expanded, key=lambda t: t.sort_key) == sorted(timers, key=lambda t: t.sort_key)
    for item in packs:
        members = unpack(item)
        assert {t.bucket for t in members} == {item["bucket"]["S"]}
        assert members == sorted(members, key=lambda t: t.sort_key)
        assert 2 <= len(members) <= PACK_MAX_TIMERS
        # The pack sorts by its earliest timer, and lives as long as its latest.
        assert item["sk"]["S"].startswith(f"{members[0].due_ms:013d}#PACK#")
        assert int(item["expiresAt"]["N"]) == members[-1].due_ms // 1000 + TIMER_TTL_SECONDS
    # About 250 a bucket: three packs each, balanced (84, 84, 82), not 100 + 100 + 50.
    by_bucket = {}
    for item in packs:
        by_bucket.setdefault(item["bucket"]["S"], []).append(int(item["count"]["N"]))
    assert all(max(counts) - min(counts) < len(counts) for counts in by_bucket.values())


def test_a_pack_spans_two_due_seconds_only_over_sparse_seconds():
    # Given the next timers of a page of 500 spread over a whole minute (about 1 a bucket slice and
    # second: some seconds hold none, some one, some more)
    timers = fires(500)
    packs, singles = pack_timers(timers)
    # Then a pack holds one due second of its bucket, or a run of seconds with one timer each and no
    # denser second of its bucket between them (so that the next minute's pages, ordered by each
    # item's earliest timer, stay in due order where seconds are dense)
    per_second = Counter((t.bucket, t.due_ms // 1000) for t in timers)
    spanning = 0
    for item in packs:
        members = unpack(item)
        seconds = sorted({t.due_ms // 1000 for t in members})
        if len(seconds) > 1:
            spanning += 1
            bucket = item["bucket"]["S"]
            assert len(members) == len(seconds)
            assert all(per_second[(bucket, s)] < SPARSE_SECOND_TIMERS
                       for s in range(seconds[0], seconds[-1] + 1) if (bucket, s) in per_second)
    assert spanning and len(packs) > spanning  # both kinds here
    assert sorted([t for item in packs for t in unpack(item)] + singles, key=lambda t: t.sort_key) == \
        sorted(timers, key=lambda t: t.sort_key)


def test_a_quiet_pages_next_timers_make_one_item_a_bucket_slice():
    # Given a quiet deployment's page: one segment's fires of a minute, one a second
    timers = fires(15, spread_ms=60_000)
    timers = [Timer(MINUTE * 60_000 + i * 4_000 + 137, t.kind, t.tenant_id, t.job_id, t.generation, t.segment,
                    runs=t.runs) for i, t in enumerate(timers)]
    packs, singles = pack_timers(timers)
    # Then its next timers are one item a bucket slice (not one a timer: one WU each), every second
    # of it sparse
    buckets = {t.bucket for t in timers}
    assert len(packs) + len(singles) == len(buckets) < len(timers)
    assert sorted([t for item in packs for t in unpack(item)] + singles, key=lambda t: t.sort_key) == \
        sorted(timers, key=lambda t: t.sort_key)


def test_second_runs_keep_dense_seconds_alone_and_join_runs_of_sparse_ones():
    dues = [1_000, 1_500, 2_100, 3_200, 5_900, 6_000, 6_001, 7_000, 9_999]
    # seconds: 1 (2 timers), 2 (1), 3 (1), 5 (1), 6 (2), 7 (1), 9 (1)
    assert second_runs(dues) == [(0, 2), (2, 5), (5, 7), (7, 9)]
    assert second_runs([]) == []
    assert second_runs([4_000]) == [(0, 1)]


def test_a_bucket_with_one_next_timer_and_every_other_kind_stay_single_items():
    lone = Timer(T0 + 5, TimerKind.FIRE, "t", "job_lone", 1, 0)
    retry = Timer(T0 + 6, TimerKind.RETRY, "t", "job_a", 1, 0, "job_a.1", 2)
    check = Timer(T0 + 7, TimerKind.CHECK, "t", "job_a", 1, 0, "job_a.1")
    catch_up = Timer(T0 + 8, TimerKind.CATCHUP, "t", "job_a", 1, 0, "job_a.2")
    packs, singles = pack_timers([lone, retry, check, catch_up])
    assert packs == [] and sorted(singles, key=lambda t: t.due_ms) == [lone, retry, check, catch_up]


def test_the_same_timers_make_the_same_items_in_any_order_and_a_repeat_is_packed_once():
    timers = fires(700)
    shuffled = timers[:] + timers[:50]
    random.Random(7).shuffle(shuffled)
    def items(timers):
        packs, singles = pack_timers(timers)
        return sorted(packs + [t.to_wire() for t in singles], key=lambda i: (i["bucket"]["S"], i["sk"]["S"]))
    assert items(shuffled) == items(timers)  # a page handed off twice writes the same items
    other = fires(700)[:-1]
    keys = {i["sk"]["S"] for i in pack_timers(timers)[0]}
    assert keys != {i["sk"]["S"] for i in pack_timers(other)[0]}  # other members, another key


def test_the_largest_pack_is_far_under_400_kb():
    # 100 timers of long random ids (a 64-character tenant, a job id with a region mark), each of
    # another due instant, generation and run count: what compresses least.
    rng = random.Random(1)
    tenant = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789-") for _ in range(64))
    timers = sorted((Timer(T0 + rng.randrange(60_000), TimerKind.FIRE, tenant, f"job_{rng.getrandbits(128):032x}.1",
                           rng.randrange(2**31), 0, runs=rng.randrange(10**9)) for _ in range(PACK_MAX_TIMERS)),
                    key=lambda t: t.sort_key)
    item = pack_item(timers[0].bucket, timers)
    assert unpack(item) == timers
    assert 3_000 < wire_bytes(item) < 8_000 < 400 * 1024  # (uncompressed: about 15 KB)
    # The same size from the item as boto3's resource layer reads it (its binary a boto3 Binary).
    from boto3.dynamodb.types import TypeDeserializer
    from jobsched.domain.item_size import item_bytes
    plain = {k: TypeDeserializer().deserialize(v) for k, v in item.items()}
    assert abs(item_bytes(plain) - wire_bytes(item)) <= 2  # (their number formulas round apart by a byte)


def test_a_timer_in_two_packs_is_read_once_in_its_slice():
    timers = fires(6, spread_ms=1_000)
    a = pack_item("b", timers[:4])
    b = pack_item("b", timers[2:])  # the same page's timers packed again with other boundaries
    expander = TimerExpander()
    read = expander.expand([a]) + expander.expand([b, timers[5].to_wire()])
    assert sorted(read, key=lambda t: t.sort_key) == sorted(timers, key=lambda t: t.sort_key)
    assert expander.repeats == 3


class OneSlice:
    """A DynamoDB client answering Query over one slice's wire items, sorted by key, `limit`
    items an answer, from ExclusiveStartKey on."""

    def __init__(self, items):
        self.items = sorted(items, key=lambda i: i["sk"]["S"])

    def query(self, ExclusiveStartKey=None, Limit=None, **_):
        after = ExclusiveStartKey["sk"]["S"] if ExclusiveStartKey else None
        rest = [i for i in self.items if after is None or i["sk"]["S"] > after]
        answer = {"Items": rest[:Limit]}
        if len(rest) > Limit:
            answer["LastEvaluatedKey"] = {"bucket": rest[Limit - 1]["bucket"], "sk": rest[Limit - 1]["sk"]}
        return answer


class NoDynamo:
    def Table(self, name):  # noqa: N802
        return None


def test_a_slice_resumed_after_any_pages_position_reads_every_timer_once():
    # One slice holding packs whose timers span the minute, and single timers due between them.
    timers = [t for t in fires(400, spread_ms=60_000, segment=0)]
    bucket = timers[0].bucket
    in_slice = [t for t in timers if t.bucket == bucket]
    packed, single = in_slice[::2], in_slice[1::2]
    items = [pack_item(bucket, sorted(packed[i:i + 7], key=lambda t: t.sort_key)) for i in range(0, len(packed), 7)]
    items += [t.to_wire() for t in single]
    for page_size, limit in ((1, 3), (5, 4), (10, 500), (500, 500)):
        store = TimersStore(NoDynamo(), "timers", page_size=page_size, client=OneSlice(items))
        store._client.query = (lambda q: lambda **kw: q(**{**kw, "Limit": limit}))(store._client.query)
        pages = list(store.pages(bucket))
        assert sum(len(p) for p in pages) == len(in_slice)
        # Stopped after any page and resumed after its position: what is read is what was not.
        for stop in range(len(pages)):
            before = [t for p in pages[:stop + 1] for t in p]
            after = [t for p in store.pages(bucket, pages[stop].last_sk) for t in p]
            assert sorted(t.sort_key for t in before + after) == sorted(t.sort_key for t in in_slice), (page_size, stop)
        # A page ends at an item: its position is a key of the slice, never a packed timer's.
        keys = {i["sk"]["S"] for i in items}
        assert all(p.last_sk in keys for p in pages)
        assert pages[-1].last and not any(p.last for p in pages[:-1])
    assert minute_of(in_slice[0].due_ms) == MINUTE
    assert any(is_pack(i) for i in items)


def test_a_pack_carries_its_write_instant_once_and_its_timers_read_back_with_it():
    # Two senders (docs/architecture.md, "Packs"): the tick decides a fire's path from its timer's
    # write instant, packed timers included; one attribute for the pack (its timers share one put).
    from dataclasses import replace
    written = T0 - 300_000
    timers = [replace(t, written_ms=written) for t in fires(3, spread_ms=1_000)]
    item = pack_item(timers[0].bucket, sorted(timers, key=lambda t: t.sort_key))
    assert item["writtenMs"] == {"N": str(written)}
    assert {t.written_ms for t in unpack(item)} == {written}
    # written before timers carried it: none, and the worker decides as before
    assert {t.written_ms for t in unpack(pack_item(timers[0].bucket, sorted(fires(3, spread_ms=1_000),
                                                                            key=lambda t: t.sort_key)))} == {None}
    single = replace(fires(1)[0], written_ms=written)
    assert Timer.from_wire(single.to_wire()).written_ms == written
    assert Timer.from_item(single.to_item()).written_ms == written


def test_a_pack_of_sole_timers_says_so_and_sole_timers_never_share_a_pack_with_others():
    # Two senders: a sole timer (only its bucket's query sends it) reads back sole, single or packed
    from dataclasses import replace
    timers = [replace(t, sole=i % 2 == 0) for i, t in enumerate(fires(400, spread_ms=1_000))]
    packs, singles = pack_timers(timers)
    read = [t for p in packs for t in unpack(p)] + singles
    assert packs and all(len({t.sole for t in unpack(p)}) == 1 for p in packs)
    assert {t.sort_key for t in read if t.sole} == {t.sort_key for t in timers if t.sole}
    assert len(read) == len(timers)
    sole, others = [t for t in timers if t.sole], [t for t in timers if not t.sole]
    assert Timer.from_wire(sole[0].to_wire()).sole and Timer.from_item(sole[0].to_item()).sole
    assert not Timer.from_wire(others[0].to_wire()).sole
