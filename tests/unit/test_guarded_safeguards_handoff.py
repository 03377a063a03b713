"""Catch-up and hand-off safeguards that a mutation pass found held by no test, checked on the
hand-off over stand-in stores: a release beyond SQS's delay reach becomes a CATCHUP timer; an
occurrence dispatched without a FIRE timer of its own gets its CHECK timer; the SKIPPED records of
one hand-off are capped; a one-off job's chain ends with its fire; the tick's next timer is sole only
for an on-time fire it sent in a pack; a fire sent alone never rides a pack."""
from types import SimpleNamespace

from jobsched.domain.catchup import CATCH_UP_SQS_REACH_MS
from jobsched.domain.executions import execution_id_for
from jobsched.domain.jobs import CatchUp, Expectation, Job, JobSpec, JobState, MisfirePolicy, Target, TargetType
from jobsched.domain.schedule import one_time_schedule, rate_schedule
from jobsched.domain.timers import Timer, TimerKind, minute_of
from jobsched.service.handoff import MAX_SKIPPED_RECORDS, HandOff, HandOffReport

MINUTE = 60_000
T0 = 1_893_456_000_000  # 2030-01-01T00:00:00Z


def job(schedule=None, **spec) -> Job:
    spec = JobSpec(name="j", schedule=schedule or rate_schedule("PT1M", T0),
                   target=Target(TargetType.SQS, {"queueUrl": "q"}), **spec)
    return Job("t", "job_1", spec, JobState.ACTIVE, 1, 1, T0, T0)


class Stores:
    """What the hand-off writes, recorded; every bucket as claimed as `claimed_through` says."""

    def __init__(self, claimed_through: int = -1):
        self.timers_written, self.sent, self.skipped = [], [], []
        self.timers = SimpleNamespace(put_many=lambda timers, pack=False, written_ms=None:
                                      self.timers_written.extend(timers))
        self.watermarks = SimpleNamespace(get=lambda segment: SimpleNamespace(claimed_through=claimed_through,
                                                                              claimed_at=lambda minute: None))
        self.lanes = SimpleNamespace(send=lambda outgoing: self.sent.extend(outgoing) or 1)
        self.executions = SimpleNamespace(put_skipped=lambda *args, **kwargs: self.skipped.append(args),
                                          put_missed_window=lambda *args: None)
        self.calendars = None


def handoff(stores, now_ms):
    return HandOff(stores, SimpleNamespace(now_ms=lambda: now_ms), 1)


def fire_timer(of: Job, due_ms: int) -> Timer:
    return Timer(due_ms, TimerKind.FIRE, of.tenant_id, of.job_id, of.generation, 0)


def test_a_catch_up_release_beyond_the_sqs_delay_reach_waits_as_a_catchup_timer():
    # Given a once-a-minute job missing 30 occurrences, caught up at 2 a minute
    late = job(misfire_policy=MisfirePolicy.RUN_ALL, catch_up=CatchUp(30, 2))
    now = T0 + 31 * MINUTE + 30_000
    outgoing, report = [], HandOffReport()
    # When its catch-up is planned
    HandOff._catch_up(late, 0, T0 + MINUTE, now, outgoing, report)
    # Then what goes out within SQS's delay reach is sent, and each later release is a CATCHUP timer
    assert outgoing and all(o.visible_at_ms - now <= CATCH_UP_SQS_REACH_MS for o in outgoing)
    assert report.catch_up_timers and all(t.kind is TimerKind.CATCHUP and t.due_ms - now > CATCH_UP_SQS_REACH_MS
                                          for t in report.catch_up_timers)
    assert len(outgoing) + len(report.catch_up_timers) == 30


def test_occurrences_dispatched_without_a_fire_timer_get_their_check_timers():
    # Given a job with `expect` whose FIRE timer is handed off with the next two buckets claimed
    expecting = job(expect=Expectation(300))
    stores = Stores()
    now = T0 + MINUTE
    report = handoff(stores, now).hand_off([fire_timer(expecting, T0 + MINUTE)],
                                           {("t", "job_1"): expecting}, minute_of(now) + 2)
    # Then its three occurrences are sent, and the two without a FIRE timer of their own have a CHECK
    fired = [o.dispatch.execution_id for o in stores.sent]
    assert fired == [execution_id_for("job_1", T0 + m * MINUTE) for m in (1, 2, 3)]
    checks = [t.execution_id for t in stores.timers_written if t.kind is TimerKind.CHECK]
    assert set(checks) >= {execution_id_for("job_1", T0 + m * MINUTE) for m in (2, 3)}, checks
    assert report.next_timers == 1


def test_the_skipped_records_of_one_hand_off_are_capped():
    # Given a once-a-minute SKIP job whose chain is handed off five hours late
    skipping = job(misfire_policy=MisfirePolicy.SKIP)
    stores = Stores()
    now = T0 + 300 * MINUTE
    report = handoff(stores, now).hand_off([fire_timer(skipping, T0 + MINUTE)], {("t", "job_1"): skipping},
                                           minute_of(now) + 2)
    # Then every missed one is counted, and at most MAX_SKIPPED_RECORDS are written
    assert report.misfires_skipped > MAX_SKIPPED_RECORDS
    assert len(stores.skipped) == MAX_SKIPPED_RECORDS


def test_a_one_off_jobs_chain_ends_with_its_fire():
    once = job(schedule=one_time_schedule(T0 + MINUTE))
    stores = Stores()
    report = handoff(stores, T0 + MINUTE).hand_off([fire_timer(once, T0 + MINUTE)], {("t", "job_1"): once},
                                                   minute_of(T0) + 3)
    assert [o.dispatch.execution_id for o in stores.sent] == [execution_id_for("job_1", T0 + MINUTE)]
    assert report.next_timers == 0 and stores.timers_written == []


def test_the_ticks_next_timer_is_sole_only_for_an_on_time_fire_it_sent_in_a_pack():
    # Two senders (docs/architecture.md, "Packs"): a next timer only the tick's query will send
    # (Timer.sole) is written only for a fire the tick itself sends in a pack, on time
    every_minute = job()
    claim = T0 + 5 * MINUTE
    due = (minute_of(claim) + 2) * MINUTE

    def next_timer(written_ms: int, now_ms: int, sole: bool = False, regions: bool = False) -> Timer:
        stores = Stores()
        timer = Timer(due, TimerKind.FIRE, "t", "job_1", 1, 0, written_ms=written_ms, sole=sole)
        tick = (HandOff(stores, SimpleNamespace(now_ms=lambda: now_ms), 1, ownership=SimpleNamespace(multi_region=True))
                if regions else handoff(stores, now_ms))
        tick.hand_off([timer], {("t", "job_1"): every_minute}, minute_of(due), claimed_at=claim)
        [written] = stores.timers_written
        return written

    # written a minute before its bucket's claim: sent in a pack, its next timer sole
    assert next_timer(claim - MINUTE, claim).sole
    # written seconds before the claim (its writer may send it too): sent alone, and its next timer
    # (which that writer's chain may write too) is not sole
    assert not next_timer(claim - 1_000, claim).sole
    # a sole timer rides a pack however close to the claim it was written, and so on down its chain
    assert next_timer(claim - 1_000, claim, sole=True).sole
    # a misfire (its next timer depends on the hand-off's clock, another run's copy may differ): not sole
    assert not next_timer(claim - MINUTE, due + 2 * MINUTE).sole
    # with regions (a take rewinds the watermarks: what the former holder's query read may never run): not sole
    assert not next_timer(claim - MINUTE, claim, regions=True).sole


def test_a_fire_sent_alone_never_rides_a_pack():
    # Two senders: a fire its sender sends alone (its other sender may send it too) is a message of
    # one, claimed per execution, whatever its job's age; one decided for a pack, or undecided, may ride one
    from jobsched.domain.executions import Dispatch, DispatchKind
    from jobsched.domain.packs import packable

    def fire(solo):
        return Dispatch(DispatchKind.FIRE, "t", "job_1", execution_id_for("job_1", T0), T0, 1, run=1, solo=solo)

    assert not packable(fire(True))
    assert packable(fire(False)) and packable(fire(None))
