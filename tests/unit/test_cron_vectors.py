"""Peers' own test vectors, ported as data with the source named on each case.

- cronsim: github.com/cuu508/cronsim tests/test_cronsim.py (Debian semantics, DST in Europe/Riga:
  28 March 2021 03:00 EET → 04:00 EEST, 31 October 2021 04:00 EEST → 03:00 EET).
- croniter: github.com/kiorky/croniter src/croniter/tests/test_croniter.py, where the vector
  describes standard cron (its seconds field, hashing and day_or=False are not standard cron).
- Quartz: github.com/quartz-scheduler/quartz CronExpressionTest.java, the `L`, `W` and `#` cases
  written as AWS cron() (Quartz's leading seconds field dropped, its year kept).
Where a peer's answer is not ours, the case says so and docs/architecture.md ("Time") lists why."""
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from jobsched.domain.errors import UnprocessableRequest
from jobsched.domain.schedule import cron_schedule, to_datetime, to_ms


def local_fires(expression: str, zone: str, start: datetime, count: int) -> list[str]:
    """The next `count` fires strictly after `start` (an aware datetime), as ISO text in `zone`."""
    schedule = cron_schedule(expression, zone, to_ms(start) - 86_400_000)
    out, cursor = [], to_ms(start)
    for _ in range(count):
        cursor = schedule.next_fire_after(cursor)
        assert cursor is not None
        out.append(to_datetime(cursor).astimezone(ZoneInfo(zone)).isoformat())
    return out


RIGA = "Europe/Riga"
UTC = "UTC"


def riga(*parts, fold=0):
    return datetime(*parts, tzinfo=ZoneInfo(RIGA), fold=fold)


def utc(*parts):
    return datetime(*parts, tzinfo=ZoneInfo(UTC))


# (source, expression, zone, start, expected fires as local ISO text)
VECTORS = [
    # cronsim TestIterator (naive start 2020-01-01, read here in UTC)
    ("cronsim test_it_handles_l", "1 1 L * *", UTC, utc(2020, 1, 1), ["2020-01-31T01:01:00+00:00"]),
    ("cronsim test_it_handles_lw", "1 1 LW 5 *", UTC, utc(2020, 1, 1), ["2020-05-29T01:01:00+00:00"]),
    ("cronsim test_it_handles_last_friday", "1 1 * * 5L", UTC, utc(2020, 1, 1), [
        f"2020-{d}T01:01:00+00:00" for d in ("01-31", "02-28", "03-27", "04-24", "05-29", "06-26", "07-31",
                                              "08-28", "09-25", "10-30", "11-27", "12-25")]),
    ("cronsim test_it_handles_last_sunday_two_notations", "1 1 * * 0L", UTC, utc(2020, 1, 1),
     ["2020-01-26T01:01:00+00:00"]),
    ("cronsim test_it_handles_last_sunday_two_notations", "1 1 * * 7L", UTC, utc(2020, 1, 1),
     ["2020-01-26T01:01:00+00:00"]),
    ("cronsim test_it_handles_nth_weekday", "1 1 * * 1#2", UTC, utc(2020, 1, 1), ["2020-01-13T01:01:00+00:00"]),
    ("cronsim test_it_handles_dow_star", "1 1 1-7 * */7", UTC, utc(2020, 1, 1), [
        "2020-01-05T01:01:00+00:00", "2020-02-02T01:01:00+00:00", "2020-03-01T01:01:00+00:00",
        "2020-04-05T01:01:00+00:00"]),
    ("cronsim test_it_handles_dom_star", "1 1 */100,1-7 * MON", UTC, utc(2020, 1, 1), [
        "2020-01-06T01:01:00+00:00", "2020-02-03T01:01:00+00:00", "2020-03-02T01:01:00+00:00",
        "2020-04-06T01:01:00+00:00"]),
    ("cronsim test_it_handles_every_x_weekdays", "1 1 * * */3", UTC, utc(2020, 1, 1), [
        "2020-01-01T01:01:00+00:00", "2020-01-04T01:01:00+00:00", "2020-01-05T01:01:00+00:00",
        "2020-01-08T01:01:00+00:00"]),
    # cronsim TestDstTransitions, Europe/Riga 2021
    ("cronsim test_001_every_hour_mar", "0 * * * *", RIGA, riga(2021, 3, 28, 1, 30),
     ["2021-03-28T02:00:00+02:00", "2021-03-28T04:00:00+03:00"]),
    ("cronsim test_001_every_hour_oct", "0 * * * *", RIGA, riga(2021, 10, 31, 1, 30), [
        "2021-10-31T02:00:00+03:00", "2021-10-31T03:00:00+03:00", "2021-10-31T03:00:00+02:00",
        "2021-10-31T04:00:00+02:00"]),
    ("cronsim test_002_every_30_minutes_mar", "*/30 * * * *", RIGA, riga(2021, 3, 28, 2, 10),
     ["2021-03-28T02:30:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T04:30:00+03:00"]),
    ("cronsim test_002_every_30_minutes_oct", "*/30 * * * *", RIGA, riga(2021, 10, 31, 2, 10), [
        "2021-10-31T02:30:00+03:00", "2021-10-31T03:00:00+03:00", "2021-10-31T03:30:00+03:00",
        "2021-10-31T03:00:00+02:00", "2021-10-31T03:30:00+02:00", "2021-10-31T04:00:00+02:00"]),
    ("cronsim test_003_every_15_minutes_mar", "*/15 * * * *", RIGA, riga(2021, 3, 28, 2, 40),
     ["2021-03-28T02:45:00+02:00", "2021-03-28T04:00:00+03:00"]),
    ("cronsim test_003_every_15_minutes_oct", "*/15 * * * *", RIGA, riga(2021, 10, 31, 2, 40), [
        "2021-10-31T02:45:00+03:00", "2021-10-31T03:00:00+03:00", "2021-10-31T03:15:00+03:00",
        "2021-10-31T03:30:00+03:00", "2021-10-31T03:45:00+03:00", "2021-10-31T03:00:00+02:00",
        "2021-10-31T03:15:00+02:00", "2021-10-31T03:30:00+02:00", "2021-10-31T03:45:00+02:00",
        "2021-10-31T04:00:00+02:00"]),
    ("cronsim test_004_every_2_hours_mar", "0 */2 * * *", RIGA, riga(2021, 3, 28, 1, 30),
     ["2021-03-28T02:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T06:00:00+03:00"]),
    ("cronsim test_004_every_2_hours_oct", "0 */2 * * *", RIGA, riga(2021, 10, 31, 1, 30),
     ["2021-10-31T02:00:00+03:00", "2021-10-31T04:00:00+02:00", "2021-10-31T06:00:00+02:00"]),
    ("cronsim test_005_30_minutes_past_every_2_hours_mar", "30 */2 * * *", RIGA, riga(2021, 3, 28, 1, 30),
     ["2021-03-28T02:30:00+02:00", "2021-03-28T04:30:00+03:00"]),
    ("cronsim test_005_30_minutes_past_every_2_hours_oct", "30 */2 * * *", RIGA, riga(2021, 10, 31, 1, 30),
     ["2021-10-31T02:30:00+03:00", "2021-10-31T04:30:00+02:00"]),
    ("cronsim test_006_every_3_hours_oct", "0 */3 * * *", RIGA, riga(2021, 10, 31, 1, 30),
     ["2021-10-31T03:00:00+03:00", "2021-10-31T03:00:00+02:00", "2021-10-31T06:00:00+02:00"]),
    ("cronsim test_008_at_1_2_3_4_5_mar", "0 1,2,3,4,5 * * *", RIGA, riga(2021, 3, 28, 1, 30),
     ["2021-03-28T02:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T05:00:00+03:00"]),
    ("cronsim test_008_at_1_2_3_4_5_oct", "0 1,2,3,4,5 * * *", RIGA, riga(2021, 10, 31, 1, 30),
     ["2021-10-31T02:00:00+03:00", "2021-10-31T03:00:00+03:00", "2021-10-31T04:00:00+02:00"]),
    ("cronsim test_009_30_past_1_2_3_4_5_mar", "30 1,2,3,4,5 * * *", RIGA, riga(2021, 3, 28, 1, 30),
     ["2021-03-28T02:30:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T04:30:00+03:00"]),
    ("cronsim test_009_30_past_1_2_3_4_5_oct", "30 1,2,3,4,5 * * *", RIGA, riga(2021, 10, 31, 1, 30),
     ["2021-10-31T02:30:00+03:00", "2021-10-31T03:30:00+03:00", "2021-10-31T04:30:00+02:00"]),
    ("cronsim test_010_at_2_mar", "0 2 * * *", RIGA, riga(2021, 3, 28, 1, 30),
     ["2021-03-28T02:00:00+02:00", "2021-03-29T02:00:00+03:00"]),
    ("cronsim test_010_at_2_oct", "0 2 * * *", RIGA, riga(2021, 10, 31, 1, 30),
     ["2021-10-31T02:00:00+03:00", "2021-11-01T02:00:00+02:00"]),
    ("cronsim test_011_at_3_mar", "0 3 * * *", RIGA, riga(2021, 3, 27, 1, 30),
     ["2021-03-27T03:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-29T03:00:00+03:00"]),
    ("cronsim test_011_at_3_oct", "0 3 * * *", RIGA, riga(2021, 10, 31, 1, 30),
     ["2021-10-31T03:00:00+03:00", "2021-11-01T03:00:00+02:00"]),
    ("cronsim test_012_at_4_mar", "0 4 * * *", RIGA, riga(2021, 3, 27, 1, 30),
     ["2021-03-27T04:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-29T04:00:00+03:00"]),
    ("cronsim test_012_at_4_oct", "0 4 * * *", RIGA, riga(2021, 10, 30, 1, 30),
     ["2021-10-30T04:00:00+03:00", "2021-10-31T04:00:00+02:00", "2021-11-01T04:00:00+02:00"]),
    ("cronsim test_014_every_hour_enumerated_mar", "0 " + ",".join(map(str, range(24))) + " * * *", RIGA,
     riga(2021, 3, 28, 1, 30), ["2021-03-28T02:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T05:00:00+03:00"]),
    ("cronsim test_014_every_hour_enumerated_oct", "0 " + ",".join(map(str, range(24))) + " * * *", RIGA,
     riga(2021, 10, 31, 1, 30), ["2021-10-31T02:00:00+03:00", "2021-10-31T03:00:00+03:00", "2021-10-31T04:00:00+02:00"]),
    ("cronsim test_015_every_other_hour_enumerated_mar", "0 1,3,5,7,9,11,13,15,17,19,21,23 * * *", RIGA,
     riga(2021, 3, 28, 0, 30), ["2021-03-28T01:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T05:00:00+03:00"]),
    ("cronsim test_015_every_other_hour_enumerated_oct", "0 1,3,5,7,9,11,13,15,17,19,21,23 * * *", RIGA,
     riga(2021, 10, 31, 0, 30), ["2021-10-31T01:00:00+03:00", "2021-10-31T03:00:00+03:00", "2021-10-31T05:00:00+02:00"]),
    ("cronsim test_016_at_1_to_5_mar", "0 1-5 * * *", RIGA, riga(2021, 3, 28, 1, 30),
     ["2021-03-28T02:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T05:00:00+03:00"]),
    ("cronsim test_016_at_1_to_5_oct", "0 1-5 * * *", RIGA, riga(2021, 10, 31, 1, 30),
     ["2021-10-31T02:00:00+03:00", "2021-10-31T03:00:00+03:00", "2021-10-31T04:00:00+02:00"]),
    ("cronsim test_at_3_15_mar", "15 3 * * *", RIGA, riga(2021, 3, 27, 0, 0),
     ["2021-03-27T03:15:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-29T03:15:00+03:00"]),
    ("cronsim test_at_3_15_oct", "15 3 * * *", RIGA, riga(2021, 10, 30, 0, 0),
     ["2021-10-30T03:15:00+03:00", "2021-10-31T03:15:00+03:00", "2021-11-01T03:15:00+02:00"]),
    ("cronsim test_every_minute_mar", "* * * * *", RIGA, riga(2021, 3, 28, 2, 58),
     ["2021-03-28T02:59:00+02:00", "2021-03-28T04:00:00+03:00"]),
    ("cronsim test_every_minute_oct", "* * * * *", RIGA, riga(2021, 10, 31, 3, 58),
     ["2021-10-31T03:59:00+03:00", "2021-10-31T03:00:00+02:00", "2021-10-31T03:01:00+02:00"]),
    ("cronsim test_every_minute_from_1_to_6_mar", "* 1-6 * * *", RIGA, riga(2021, 3, 28, 2, 58),
     ["2021-03-28T02:59:00+02:00", "2021-03-28T04:00:00+03:00"]),
    ("cronsim test_every_minute_from_1_to_6_oct", "* 1-6 * * *", RIGA, riga(2021, 10, 31, 3, 58),
     ["2021-10-31T03:59:00+03:00", "2021-10-31T03:00:00+02:00", "2021-10-31T03:01:00+02:00"]),
    # croniter test_croniter.py (naive starts, read here in UTC)
    ("croniter testHour", "0 */3 * * *", UTC, utc(2010, 1, 24, 12, 2), [
        "2010-01-24T15:00:00+00:00", "2010-01-24T18:00:00+00:00", "2010-01-24T21:00:00+00:00",
        "2010-01-25T00:00:00+00:00"]),
    ("croniter testDay", "0 0 */3 * *", UTC, utc(2010, 2, 24, 12, 9),
     ["2010-02-25T00:00:00+00:00", "2010-02-28T00:00:00+00:00", "2010-03-01T00:00:00+00:00"]),
    ("croniter testDay (leap year)", "0 0 * * *", UTC, utc(1996, 2, 27),
     ["1996-02-28T00:00:00+00:00", "1996-02-29T00:00:00+00:00"]),
    ("croniter testDay (2000 is a leap year)", "0 0 * * *", UTC, utc(2000, 2, 27),
     ["2000-02-28T00:00:00+00:00", "2000-02-29T00:00:00+00:00"]),
    ("croniter testWeekDay", "0 0 * * sat", UTC, utc(2010, 2, 25),
     ["2010-02-27T00:00:00+00:00", "2010-03-06T00:00:00+00:00"]),
    ("croniter testWeekDay (day fields OR-ed)", "0 0 1 * wed", UTC, utc(2010, 1, 25),
     ["2010-01-27T00:00:00+00:00", "2010-02-01T00:00:00+00:00", "2010-02-03T00:00:00+00:00"]),
    ("croniter testNthWeekDay", "0 0 * * sat#1", UTC, utc(2010, 2, 25),
     ["2010-03-06T00:00:00+00:00", "2010-04-03T00:00:00+00:00"]),
    ("croniter testNthWeekDay", "0 0 * * wed#5", UTC, utc(2010, 1, 25),
     ["2010-03-31T00:00:00+00:00", "2010-06-30T00:00:00+00:00", "2010-09-29T00:00:00+00:00"]),
    ("croniter testDomDowVixieCronBug (the union; Debian ORs)", "0 16 */2 * sat", UTC, utc(2023, 5, 2), [
        "2023-05-13T16:00:00+00:00", "2023-05-27T16:00:00+00:00", "2023-06-03T16:00:00+00:00",
        "2023-06-17T16:00:00+00:00"]),  # DIFFERS: croniter's default reads the union; Debian ANDs here
    ("croniter testMonth", "0 0 1 * *", UTC, utc(2010, 1, 25),
     ["2010-02-01T00:00:00+00:00", "2010-03-01T00:00:00+00:00"]),
    ("croniter testLastDayOfMonth", "0 0 l * *", UTC, utc(2015, 9, 4), [
        "2015-09-30T00:00:00+00:00", "2015-10-31T00:00:00+00:00", "2015-11-30T00:00:00+00:00",
        "2015-12-31T00:00:00+00:00"]),
    ("croniter testSundayToThursdayWithAlphaConversion", "30 22 * * sun-thu", UTC, utc(2010, 8, 25, 15, 56),
     ["2010-08-25T22:30:00+00:00"]),
    ("croniter testBug2", "0 * * 3 *", UTC, utc(2012, 1, 1),
     ["2012-03-01T00:00:00+00:00", "2012-03-01T01:00:00+00:00", "2012-03-01T02:00:00+00:00"]),
    ("croniter testBug3", "00 03 16,30 * *", UTC, utc(2013, 3, 1, 12, 17, 34),
     ["2013-03-16T03:00:00+00:00", "2013-03-30T03:00:00+00:00", "2013-04-16T03:00:00+00:00"]),
    ("croniter testBug57", "0 4/6 * * *", UTC, utc(2012, 2, 24), ["2012-02-24T04:00:00+00:00"]),
    ("croniter testBug57", "0 0/6 * * *", UTC, utc(2012, 2, 24), ["2012-02-24T06:00:00+00:00"]),
    ("croniter test_multiple_months", "0 0 1 3,6,9,12 *", UTC, utc(2016, 3, 1), ["2016-06-01T00:00:00+00:00"]),
    ("croniter test_multiple_months", "0 0 1 3,6,9,12 *", UTC, utc(2016, 2, 15), ["2016-03-01T00:00:00+00:00"]),
    ("croniter test_multiple_months", "0 0 1 3,6,9,12 *", UTC, utc(2016, 12, 3, 10), ["2017-03-01T00:00:00+00:00"]),
    ("croniter test_rangeGenerator", "1-9/2 0 1 * *", UTC, utc(2013, 3, 4), [
        "2013-04-01T00:01:00+00:00", "2013-04-01T00:03:00+00:00", "2013-04-01T00:05:00+00:00",
        "2013-04-01T00:07:00+00:00", "2013-04-01T00:09:00+00:00"]),
    ("croniter test_exactly_the_same_minute", "30 7,12,17 * * *", UTC, utc(2018, 8, 1, 2, 10),
     ["2018-08-01T07:30:00+00:00", "2018-08-01T12:30:00+00:00", "2018-08-01T17:30:00+00:00"]),
    # Quartz CronExpressionTest, as cron()
    ("Quartz testIsSatisfiedByLastDayOfMonth", "cron(15 10 L * ? 2005)", UTC, utc(2005, 9, 1),
     ["2005-09-30T10:15:00+00:00", "2005-10-31T10:15:00+00:00"]),
    ("Quartz testIsSatisfiedByLastDayOfMonth (February)", "cron(15 10 L 2 ? 2005)", UTC, utc(2005, 1, 1),
     ["2005-02-28T10:15:00+00:00"]),
    ("Quartz testIsSatisfiedByLastDayOfMonth (leap February)", "cron(15 10 L 2 ? 2004)", UTC, utc(2004, 1, 1),
     ["2004-02-29T10:15:00+00:00"]),
    ("Quartz testQuartz640: 5L is supported", "cron(43 9 ? * 5L *)", UTC, utc(2030, 1, 1),
     ["2030-01-31T09:43:00+00:00", "2030-02-28T09:43:00+00:00"]),  # AWS 5 = Thursday
    ("Quartz test1420: 1W, the first weekday of the month", "cron(0 0 1W * ? *)", UTC, utc(2025, 11, 18, 10, 15), [
        f"{d}T00:00:00+00:00" for d in ("2025-12-01", "2026-01-01", "2026-02-02", "2026-03-02", "2026-04-01",
                                        "2026-05-01", "2026-06-01", "2026-07-01", "2026-08-03", "2026-09-01",
                                        "2026-10-01", "2026-11-02", "2026-12-01")]),
    ("Quartz test1420: L, the last day of the month", "cron(59 23 L * ? *)", UTC, utc(2025, 11, 18, 10, 15), [
        f"{d}T23:59:00+00:00" for d in ("2025-11-30", "2025-12-31", "2026-01-31", "2026-02-28", "2026-03-31")]),
    ("Quartz LW, the last weekday of the month", "cron(15 8 LW * ? *)", UTC, utc(2030, 1, 1),
     ["2030-01-31T08:15:00+00:00", "2030-02-28T08:15:00+00:00", "2030-03-29T08:15:00+00:00"]),
    ("Quartz '#': 6#2, the second Friday, years 2007-2009", "cron(15 8 ? * 6#2 2007-2009)", UTC, utc(2009, 11, 1),
     ["2009-11-13T08:15:00+00:00", "2009-12-11T08:15:00+00:00"]),
    ("Quartz W: 15W on a Saturday is Friday the 14th", "cron(0 9 15W * ? *)", UTC, utc(2030, 6, 1),
     ["2030-06-14T09:00:00+00:00"]),
    ("Quartz W: 15W on a Sunday is Monday the 16th", "cron(0 9 15W * ? *)", UTC, utc(2030, 9, 1),
     ["2030-09-16T09:00:00+00:00"]),
    ("Quartz W: 1W on a Saturday is Monday the 3rd, never the month before", "cron(0 9 1W * ? *)", UTC,
     utc(2030, 5, 15), ["2030-06-03T09:00:00+00:00"]),
    ("Quartz W: the last day on a Sunday is the Friday before", "cron(0 9 30W * ? *)", UTC, utc(2030, 6, 1),
     ["2030-06-28T09:00:00+00:00", "2030-07-30T09:00:00+00:00"]),
]


@pytest.mark.parametrize("source,expression,zone,start,expected", VECTORS,
                         ids=[f"{case[0]}: {case[1]}" for case in VECTORS])
def test_peer_vectors(source, expression, zone, start, expected):
    assert local_fires(expression, zone, start, len(expected)) == expected, source


# Refused by the peer and by us (cronsim TestValidation, Quartz testQtz96 / testQuartz640 / the
# step tests): the expression, and the source.
REFUSED = [
    ("cronsim test_it_rejects_bad_values", f"{bad} * * * *") for bad in ("-1", "61", "ABC", "2/", "/2", "2#", "#2",
                                                                         "1##1", "1//2", "¹", "LL", "LWX")
] + [
    ("cronsim test_it_rejects_bad_values", f"* * * * MON-{bad}") for bad in ("61", "ABC", "¹")
] + [
    ("cronsim test_it_rejects_lopsided_range", "* * 5-1 * *"),
    ("cronsim test_it_rejects_underscores", "1-1_0 * * * *"),
    ("cronsim test_it_rejects_zero_step", "*/0 * * * *"),
    ("cronsim test_it_rejects_zero_nth", "* * * * 1#0"),
    ("cronsim test_it_rejects_big_nth", "* * * * 1#6"),
    ("cronsim test_it_checks_day_of_month_range", "* * 30 2 *"),
    ("cronsim test_it_checks_day_of_month_range", "* * 31 4 *"),
    ("cronsim test_it_rejects_dow_l_range", "* * * * 5L-6"),
    ("cronsim test_it_rejects_dow_l_hash", "* * * * 5L#1"),
    ("cronsim test_it_rejects_dow_l_slash", "* * * * 5L/3"),
    ("cronsim test_it_rejects_symbolic_dow_l", "* * * * MONL"),
    ("cronsim test_it_handles_no_matches", "1 1 */100 * MON#4"),
    ("croniter test_bug34", "* * 31 2 *"),
    ("Quartz testQuartz640", "cron(43 9 ? * SAT,SUN,L *)"),
    ("Quartz testQuartz640", "cron(43 9 ? * 6,7,L *)"),
    ("Quartz testQtz96", "cron(0/5 * 32W 1 ? *)"),
    ("Quartz minute step 120", "cron(0/120 8-18 ? * 2-6 *)"),
    ("Quartz minute step missing", "cron(0/ 8-18 ? * 2-6 *)"),
    ("Quartz minute step with no start", "cron(/60 8-18 ? * 2-6 *)"),
    ("Quartz hour step missing", "cron(0 0/ ? * 2-6 *)"),
    ("Quartz month step missing", "cron(0 0 ? 0/ 2-6 *)"),
    ("Quartz invalid month name", "cron(* * * Foo ? *)"),
    ("Quartz invalid month range", "cron(* * * Jan-Foo ? *)"),
    ("Quartz '?' in neither day field", "cron(0 * * * * *)"),
    ("Quartz '?' in neither day field", "cron(0 * 4 * * *)"),
]


@pytest.mark.parametrize("source,expression", REFUSED, ids=[f"{case[0]}: {case[1]}" for case in REFUSED])
def test_peer_refusals(source, expression):
    with pytest.raises(UnprocessableRequest) as error:
        cron_schedule(expression, "UTC", to_ms(utc(2020, 1, 1)))
    assert error.value.details[0].field == "schedule", source


# Where a peer accepts and we refuse (or read differently), on purpose: docs/architecture.md, "Time".
DIFFERENCES = [
    ("cronsim test_it_accepts_l_with_step: L/2 is L", "* * L/2 * *"),
    ("cronsim test_it_accepts_lw_with_step: LW/2 is LW", "* * LW/2 * *"),
    ("Quartz testLastDayOffset: L-2 (AWS does not document it)", "cron(15 10 L-2 * ? 2035)"),
    ("Quartz 1,L (AWS does not document L in a list)", "cron(15 10 1,L * ? 2035)"),
    ("Quartz 2W,16 (AWS does not document W in a list)", "cron(15 10 2W,16 * ? 2035)"),
    ("Quartz wrap-around ranges", "cron(0 22-2 ? * MON-FRI *)"),
]


@pytest.mark.parametrize("source,expression", DIFFERENCES, ids=[c[0] for c in DIFFERENCES])
def test_deliberate_differences_are_refused_clearly(source, expression):
    with pytest.raises(UnprocessableRequest) as error:
        cron_schedule(expression, "UTC", to_ms(utc(2030, 1, 1)))
    assert error.value.details[0].field == "schedule", source


def test_a_one_value_range_with_a_step_is_the_value_alone_unlike_cronsim():
    # cronsim widens `10-10/5` to 10-59/5 (it reads a one-element set as a start); Debian's range is
    # 10 through 10, so 10 alone. Listed in docs/architecture.md.
    assert local_fires("10-10/5 * * * *", UTC, utc(2030, 1, 1), 2) == [
        "2030-01-01T00:10:00+00:00", "2030-01-01T01:10:00+00:00"]
