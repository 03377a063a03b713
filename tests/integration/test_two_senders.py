"""Two senders of one occurrence (docs/architecture.md, "Packs"): a fire that both a writer (whose
watermark read came after a tick's claim) and the tick's query may send goes out on the
per-execution path from both, decided where the timer is read from its write instant and its
bucket's claim instant; a fire only the tick sends rides a pack, however young its job."""
import pytest

from jobsched.domain.executions import Dispatch, DispatchKind, execution_id_for, scheduled_ms_of
from jobsched.domain.schedule import format_instant
from jobsched.domain.timers import minute_of
from jobsched.service.tick import Ticker
from jobsched.service.handoff import HandOff
from jobsched.store import segments as segments_store
from jobsched.store import timers as timers_store
from jobsched.store.aws import build_stores
from jobsched.store.queues import Outgoing

from .harness import TENANT_A

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}
MINUTE = 60_000


def runs_of(harness, job_id: str) -> dict[str, int]:
    return harness.target.effects_per_execution(job_id)


def own_item(harness, job_id: str, execution_id: str):
    """The execution's own item (the per-execution path's claim), None when it ran in its pack."""
    return harness.stores.executions.get(job_id, execution_id)


def same_segment_one_time_job(harness, of_job: str, run_at_ms: int) -> dict:
    """A one-time job of `of_job`'s segment, due at `run_at_ms` (others created on the way deleted)."""
    segment_of = harness.stores.lanes.segment_of
    while True:
        job = harness.create_job({"name": "beside", "type": "ONE_TIME", "runAt": format_instant(run_at_ms),
                                  "target": HOOK})
        if segment_of(job["jobId"]) == segment_of(of_job):
            return job
        assert harness.request("DELETE", f"/v1/jobs/{job['jobId']}")[0] in (200, 204)


@pytest.mark.parametrize("stall_s", [1, 30])
def test_a_next_timer_written_into_a_bucket_another_tick_run_claimed_meanwhile_runs_once(harness, stall_s):
    # Given an every-minute job older than the young-job rule's 5 minutes, and a one-time job of its
    # segment due at the same second as one of its fires (so that the tick's pack of that second
    # holds more than the every-minute job's fire)
    job = harness.create_job({"name": "old", "type": "CRON", "schedule": "* * * * *", "target": HOOK,
                              "timeoutSec": 30})
    n = minute_of(harness.clock.now_ms() + 7 * MINUTE) + 1
    due = (n + 3) * MINUTE
    beside = same_segment_one_time_job(harness, job["jobId"], due)
    harness.advance(7 * 60)
    assert minute_of(harness.clock.now_ms()) + 1 == n
    segment = harness.stores.lanes.segment_of(job["jobId"])
    # and a tick run (R1) at the end of minute n, its minute's run having been skipped: it hands off
    # bucket n + 2, whose next timer lands in bucket n + 3, near enough for R1 to read the watermark again
    harness.ticks_enabled = False
    harness.advance(((n + 1) * MINUTE - 500 - harness.clock.now_ms()) / 1000)
    stores = build_stores(harness.settings, harness.session, harness.clock)
    r1 = Ticker(stores, HandOff(stores, harness.clock, harness.settings.segments), harness.clock)
    real_get = stores.watermarks.get
    reads = []

    def get(seg):
        reads.append(seg)
        if seg == segment and reads.count(segment) == 2:
            # When, between R1's write of that next timer and its watermark read, the next
            # minute's run (R2) claims bucket n + 3 and reads it
            harness.clock.advance_ms(stall_s * 1000)
            harness.tick_fn.invoke({"segment": segment})
        return real_get(seg)

    stores.watermarks.get = get
    report = r1.run(segment)
    assert reads.count(segment) >= 2 and report.buckets == [n + 2]
    harness.ticks_enabled = True
    harness.advance(6 * 60)
    # Then that fire runs once: R1, whose next timer of a fire it sent in a pack is sole, leaves it to
    # R2, whose query read it (R2 handed bucket n + 2 off too before its claim of n + 3): in R2's pack
    runs = runs_of(harness, job["jobId"])
    assert runs.get(execution_id_for(job["jobId"], due)) == 1, runs
    assert own_item(harness, job["jobId"], execution_id_for(job["jobId"], due)) is None
    assert set(runs.values()) == {1}
    assert list(runs_of(harness, beside["jobId"]).values()) == [1]
    # and a later fire, read by a run from a timer written a minute before its bucket's claim, rides
    # a pack again (no item of its own)
    assert own_item(harness, job["jobId"], execution_id_for(job["jobId"], due + 3 * MINUTE)) is None
    assert runs.get(execution_id_for(job["jobId"], due + 3 * MINUTE)) == 1


def test_a_tick_run_behind_packs_the_next_timers_it_wrote_itself_just_before_claiming_their_bucket(harness):
    # Given an every-minute job, its timers written a minute or more before their buckets' claims
    job = harness.create_job({"name": "behind", "type": "CRON", "schedule": "* * * * *", "target": HOOK})
    harness.advance(3 * 60)
    n = minute_of(harness.clock.now_ms()) + 1
    # and the ticks of minutes n and n + 1 missed (an outage of the rules, or runs out of time): the
    # run of minute n + 2 hands off buckets n + 2, n + 3 and n + 4 one after another, each hand-off
    # writing the job's next timer into the bucket it claims milliseconds later
    harness.ticks_enabled = False
    harness.advance(((n + 2) * MINUTE - 500 - harness.clock.now_ms()) / 1000)
    harness.ticks_enabled = True
    harness.advance(4 * 60)
    # Then each fire runs once, and those of n + 3 and n + 4 ride the run's packs: the run wrote their
    # timers itself, for fires it sent in packs, and never sends such a timer as their writer
    runs = runs_of(harness, job["jobId"])
    assert set(runs.values()) == {1}, runs
    for minute in (n + 2, n + 3, n + 4, n + 5):
        execution_id = execution_id_for(job["jobId"], minute * MINUTE)
        assert runs.get(execution_id) == 1, (minute - n, runs)
        assert own_item(harness, job["jobId"], execution_id) is None, minute - n


def writer_stalled_before_its_watermark_read(harness, stall_s: int) -> dict:
    """A one-time job created at second 45 of a minute t, due at (t + 3):30 (its bucket not claimed
    yet), by a writer (the API) whose watermark read comes `stall_s` after its write: the tick (of the
    minute the clock is then in) claims that bucket and reads it meanwhile."""
    t = minute_of(harness.clock.now_ms()) + 1
    harness.advance((t * MINUTE + 45_000 - harness.clock.now_ms()) / 1000)
    real_get = segments_store.WatermarksStore.get
    real_put = timers_store.TimersStore.put_many
    phase: list = ["creating"]

    def put_many(self, timers, *args, **kwargs):
        real_put(self, timers, *args, **kwargs)
        if phase[0] == "creating":
            phase[:] = ["written", timers[0].segment]

    def get(self, segment):
        if phase[0] == "written" and segment == phase[1]:
            phase[0] = "stalled"
            harness.clock.advance_ms(stall_s * 1000)
            harness.tick_fn.invoke({"segment": segment})
        return real_get(self, segment)

    mp = pytest.MonkeyPatch()
    mp.setattr(segments_store.WatermarksStore, "get", get)
    mp.setattr(timers_store.TimersStore, "put_many", put_many)
    try:
        job = harness.create_job({"name": "late-read", "type": "ONE_TIME",
                                  "runAt": format_instant((t + 3) * MINUTE + 30_000), "target": HOOK})
    finally:
        mp.undo()
    assert phase[0] == "stalled"
    harness.advance(4 * 60)
    return job


def test_a_writer_whose_watermark_read_comes_long_after_its_write_leaves_the_fire_to_the_ticks_pack(harness):
    # Given a writer whose watermark read comes 80 s after its write, the bucket claimed and read meanwhile
    job = writer_stalled_before_its_watermark_read(harness, 80)
    # Then the tick's query read it as written before its claim (a pack's), and the writer, whose
    # write was quick and over a minute (the clocks' assumed bound) + 10 s before the claim, sent
    # nothing: one run, in the tick's pack
    runs = runs_of(harness, job["jobId"])
    assert list(runs.values()) == [1], runs
    [execution_id] = runs
    assert own_item(harness, job["jobId"], execution_id) is None
    assert harness.execution(execution_id)["status"] == "SUCCEEDED"


def test_a_writer_whose_watermark_read_comes_20_s_after_its_write_sends_the_fire_itself(harness):
    # Given a writer whose watermark read comes 20 s after its write: too soon after the claim for the
    # writer to be sure, under the clocks' assumed bound, that the tick's query read it
    job = writer_stalled_before_its_watermark_read(harness, 20)
    # Then it sends it itself, alone (never lost); the tick's query read it as a pack's: the residual
    # second run (docs/architecture.md, "Two senders of one occurrence"), which a writer's clock more
    # than a minute behind the tick's would otherwise turn into a lost fire
    runs = runs_of(harness, job["jobId"])
    [execution_id] = runs
    assert runs[execution_id] >= 1
    assert own_item(harness, job["jobId"], execution_id) is not None


def test_a_writer_whose_put_took_long_sends_what_it_finds_claimed_itself(harness):
    # Given a writer (the API) whose put of a one-time job's timer takes 80 s, while a tick claims the
    # timer's bucket and reads it before the timer is there (its claim 80 s after the write instant)
    t = minute_of(harness.clock.now_ms()) + 1
    harness.advance((t * MINUTE + 45_000 - harness.clock.now_ms()) / 1000)
    real_put = timers_store.TimersStore.put_many
    slow: list = []

    def put_many(self, timers, *args, **kwargs):
        if not slow:
            slow.append(timers[0].segment)
            harness.clock.advance_ms(80_000)
            harness.tick_fn.invoke({"segment": timers[0].segment})
        real_put(self, timers, *args, **kwargs)

    mp = pytest.MonkeyPatch()
    mp.setattr(timers_store.TimersStore, "put_many", put_many)
    try:
        job = harness.create_job({"name": "slow-put", "type": "ONE_TIME",
                                  "runAt": format_instant((t + 3) * MINUTE + 30_000), "target": HOOK})
    finally:
        mp.undo()
    assert slow
    harness.advance(4 * 60)
    # Then the writer, unsure whether the tick read it, sends it itself, alone: it runs once
    runs = runs_of(harness, job["jobId"])
    assert list(runs.values()) == [1], runs
    [execution_id] = runs
    assert own_item(harness, job["jobId"], execution_id) is not None


@pytest.mark.parametrize("solo", [None, False])
def test_a_fire_whose_sender_did_not_decide_its_path_leaves_its_pack_when_its_job_is_young(harness, solo):
    # Given a fire of a job written 2 minutes before it, in a pack: sent before senders decided
    # (in flight across the upgrade: no flag), or by a sender that decided it rides a pack
    job = harness.create_job({"name": "young", "type": "CRON", "schedule": "0 0 1 1 *", "target": HOOK})
    stored = harness.stores.jobs.get(TENANT_A, job["jobId"])
    due = (minute_of(harness.clock.now_ms()) + 2) * MINUTE + 30_000
    fire = Dispatch(DispatchKind.FIRE, stored.tenant_id, stored.job_id, execution_id_for(stored.job_id, due), due,
                    stored.generation, run=1, solo=solo)
    harness.stores.lanes.send([Outgoing(stored.spec.priority, fire, due)])
    harness.advance(180)
    # Then without the flag it meets the per-execution claim (the former young-job rule), with it it
    # runs in its pack
    assert runs_of(harness, job["jobId"]) == {fire.execution_id: 1}
    assert (own_item(harness, job["jobId"], fire.execution_id) is None) == (solo is False)


@pytest.mark.parametrize("lead_s", [600, 240])
def test_a_one_time_job_created_ahead_rides_a_pack_however_young(harness, lead_s):
    # Given a one-time job created 10 (or 4: young by the former rule) minutes before its fire
    job = harness.create_job({"name": "ahead", "type": "DELAYED", "delaySeconds": lead_s, "target": HOOK})
    harness.advance(lead_s + 60)
    # Then it ran once, in a pack: no item of its own (no per-execution claim), the pack's record shows it
    runs = runs_of(harness, job["jobId"])
    assert list(runs.values()) == [1], runs
    [execution_id] = runs
    assert own_item(harness, job["jobId"], execution_id) is None
    assert harness.execution(execution_id)["status"] == "SUCCEEDED"
    assert scheduled_ms_of(execution_id) == harness.stores.jobs.get(TENANT_A, job["jobId"]).spec.schedule.first_fire()


def test_a_one_time_job_created_seconds_before_its_fire_is_sent_alone_and_runs_once(harness):
    # Given a one-time job created 20 s before its fire: its bucket is claimed, its writer sends it
    job = harness.create_job({"name": "soon", "type": "DELAYED", "delaySeconds": 20, "target": HOOK})
    harness.advance(90)
    # Then it ran once, claimed per execution (a message of one: no pack claim)
    runs = runs_of(harness, job["jobId"])
    assert list(runs.values()) == [1], runs
    [execution_id] = runs
    assert own_item(harness, job["jobId"], execution_id) is not None
