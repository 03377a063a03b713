"""Cron across DST, property-based against cronsim (Debian cron's semantics) as the oracle.

Around every DST transition of several zones (spring-forward and fall-back, 30-minute shifts,
southern hemisphere), the fire instants our schedules compute must be exactly those cronsim
yields for the same expression, zone and start: fixed-time jobs fire right after a skipped time
and once in a repeated one; wildcard minute or hour jobs follow real time."""
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim
from hypothesis import given, settings
from hypothesis import strategies as st

from jobsched.domain.schedule import cron_schedule, to_ms

# Two kinds of zone are left out because the oracle itself strays there from Debian cron: a
# 30-minute shift (Australia/Lord_Howe: cronsim steps hours from a :30 wall time and skips half an
# hour that real time reaches) and a transition at midnight (America/Santiago: cronsim starts a
# day at a midnight that does not exist and fires a wildcard job at 01:00 for it).
ZONES = ("Europe/Paris", "America/New_York", "Australia/Sydney", "Pacific/Auckland", "Europe/London")


def transitions(zone_name: str, years=range(2024, 2029)) -> list[datetime]:
    """The UTC instants (to the minute) at which the zone's offset changes."""
    zone = ZoneInfo(zone_name)
    found = []
    for year in years:
        t = datetime(year, 1, 1, tzinfo=timezone.utc)
        end = datetime(year + 1, 1, 1, tzinfo=timezone.utc)
        offset = t.astimezone(zone).utcoffset()
        while t < end:
            step = t + timedelta(hours=1)
            if step.astimezone(zone).utcoffset() != offset:
                minute = t
                while minute.astimezone(zone).utcoffset() == offset:
                    minute += timedelta(minutes=1)
                found.append(minute)
                offset = step.astimezone(zone).utcoffset()
            t = step
    return found


TRANSITIONS = [(zone, instant) for zone in ZONES for instant in transitions(zone)]

MINUTES = st.sampled_from(["*", "*/15", "*/7", "0", "30", "15,45", "59", "0-10/5"])
HOURS = st.sampled_from(["*", "*/2", "*/3", "0", "1", "2", "3", "1,2,3", "0-4", "23", "22-23"])
DAYS = st.sampled_from(["*", "*", "*", "1-15", "*/2"])
WEEKDAYS = st.sampled_from(["*", "*", "*", "0", "1-5", "6"])


def oracle(expression: str, zone: ZoneInfo, start: datetime, until: datetime) -> list[int]:
    out = []
    for fire in CronSim(expression, start.astimezone(zone)):
        ms = to_ms(fire)
        if fire > until:
            break
        out.append(ms)
    return out


def ours(expression: str, zone_name: str, start: datetime, until: datetime) -> list[int]:
    schedule = cron_schedule(expression, zone_name, to_ms(start) - 86_400_000)
    out, cursor = [], to_ms(start)
    while True:
        fire = schedule.next_fire_after(cursor)
        if fire is None or fire > to_ms(until):
            return out
        out.append(fire)
        cursor = fire


@settings(max_examples=400, deadline=None)
@given(case=st.sampled_from(TRANSITIONS), minute=MINUTES, hour=HOURS, day=DAYS, weekday=WEEKDAYS,
       lead_hours=st.integers(min_value=2, max_value=30))
def test_fire_instants_around_dst_match_debian_cron(case, minute, hour, day, weekday, lead_hours):
    zone_name, transition = case
    expression = f"{minute} {hour} {day} * {weekday}"
    # Start outside any repeated span (a start inside one is ambiguous to cronsim) and run past it.
    start = transition - timedelta(hours=lead_hours)
    until = transition + timedelta(hours=30)
    assert ours(expression, zone_name, start, until) == oracle(expression, ZoneInfo(zone_name), start, until), (
        expression, zone_name, transition.isoformat())


@pytest.mark.parametrize("zone_name,transition", [TRANSITIONS[0], TRANSITIONS[1]])
def test_the_oracle_sees_transitions(zone_name, transition):
    # A guard on the generator itself: each zone has transitions and they are real changes.
    zone = ZoneInfo(zone_name)
    before = (transition - timedelta(minutes=1)).astimezone(zone).utcoffset()
    assert transition.astimezone(zone).utcoffset() != before
    assert len([t for z, t in TRANSITIONS if z == zone_name]) >= 8


def test_fixed_time_in_a_skipped_hour_runs_right_after_the_jump():
    # New York, 8 March 2026: 02:00 EST → 03:00 EDT. 02:30 and 02:45 do not exist; one fire, at 03:00.
    fires = ours("30,45 2 * * *", "America/New_York", datetime(2026, 3, 7, 12, tzinfo=timezone.utc),
                 datetime(2026, 3, 9, 12, tzinfo=timezone.utc))
    assert fires == [to_ms(datetime(2026, 3, 8, 7, 0, tzinfo=timezone.utc)),
                     to_ms(datetime(2026, 3, 9, 6, 30, tzinfo=timezone.utc)),
                     to_ms(datetime(2026, 3, 9, 6, 45, tzinfo=timezone.utc))]


def test_a_wildcard_hour_skips_the_missing_hour_and_repeats_the_doubled_one():
    zone = "Europe/Paris"
    spring = ours("15 * * * *", zone, datetime(2026, 3, 29, 0, 0, tzinfo=timezone.utc),
                  datetime(2026, 3, 29, 2, 0, tzinfo=timezone.utc))
    # 01:15 CET (00:15Z), then 02:15 does not exist, then 03:15 CEST (01:15Z)
    assert spring == [to_ms(datetime(2026, 3, 29, 0, 15, tzinfo=timezone.utc)),
                      to_ms(datetime(2026, 3, 29, 1, 15, tzinfo=timezone.utc))]
    autumn = ours("15 * * * *", zone, datetime(2026, 10, 24, 23, 30, tzinfo=timezone.utc),
                  datetime(2026, 10, 25, 2, 0, tzinfo=timezone.utc))
    # 02:15 CEST (00:15Z) and 02:15 CET (01:15Z): the repeated hour fires twice
    assert autumn == [to_ms(datetime(2026, 10, 25, 0, 15, tzinfo=timezone.utc)),
                      to_ms(datetime(2026, 10, 25, 1, 15, tzinfo=timezone.utc))]
