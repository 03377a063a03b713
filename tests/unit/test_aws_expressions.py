"""AWS expressions read as EventBridge Scheduler reads them: cron() in AWS's own grammar (never
translated into another), rate() and at() as documented, and AWS's DST rule.

Sources on each case: "AWS cron reference" is
https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-cron-expressions.html (field table,
wildcards, limits, examples); "AWS schedule types" is
https://docs.aws.amazon.com/scheduler/latest/UserGuide/schedule-types.html (rate(), DST)."""
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobsched.domain.aws_expressions import rate_to_duration
from jobsched.domain.errors import UnprocessableRequest
from jobsched.domain.schedule import cron_schedule, format_instant, local_instant, rate_schedule

from .test_schedule import at, fires


def next_fires(expression, after, count=3, tz="UTC"):
    return fires(cron_schedule(expression, tz, at("2029-01-01T00:00:00Z")), after, count)


# (source, expression, after, expected next fires). 2030-01-01 is a Tuesday.
DOCUMENTED = [
    ("AWS cron reference, example: 10:00 every day", "cron(0 10 * * ? *)", "2030-01-01T11:00:00Z",
     ["2030-01-02T10:00:00Z", "2030-01-03T10:00:00Z"]),
    ("AWS cron reference, example: 12:15 every day", "cron(15 12 * * ? *)", "2030-01-01T00:00:00Z",
     ["2030-01-01T12:15:00Z", "2030-01-02T12:15:00Z"]),
    ("AWS cron reference, example: 18:00 Monday-Friday", "cron(0 18 ? * MON-FRI *)", "2030-01-03T19:00:00Z",
     ["2030-01-04T18:00:00Z", "2030-01-07T18:00:00Z"]),
    ("AWS cron reference, example: 08:00 on the 1st", "cron(0 8 1 * ? *)", "2030-01-01T09:00:00Z",
     ["2030-02-01T08:00:00Z", "2030-03-01T08:00:00Z"]),
    ("AWS cron reference, example: every 15 minutes", "cron(0/15 * * * ? *)", "2030-01-01T00:50:00Z",
     ["2030-01-01T01:00:00Z", "2030-01-01T01:15:00Z"]),
    ("AWS cron reference, example: every 10 minutes Monday-Friday", "cron(0/10 * ? * MON-FRI *)",
     "2030-01-04T23:55:00Z", ["2030-01-07T00:00:00Z", "2030-01-07T00:10:00Z"]),
    ("AWS cron reference, example: every 5 minutes 08:00-17:55 Monday-Friday", "cron(0/5 8-17 ? * MON-FRI *)",
     "2030-01-01T17:50:00Z", ["2030-01-01T17:55:00Z", "2030-01-02T08:00:00Z"]),
    ("AWS cron reference, '/': 1/10 is the 1st, 11th, 21st minute", "cron(1/10 * * * ? *)", "2030-01-01T00:00:00Z",
     ["2030-01-01T00:01:00Z", "2030-01-01T00:11:00Z", "2030-01-01T00:21:00Z"]),
    ("AWS cron reference, ',': JAN,FEB,MAR", "cron(0 0 1 JAN,FEB,MAR ? *)", "2030-02-15T00:00:00Z",
     ["2030-03-01T00:00:00Z", "2031-01-01T00:00:00Z"]),
    ("AWS cron reference, '-': 1-15 in the day field", "cron(0 0 1-15 * ? *)", "2030-01-14T12:00:00Z",
     ["2030-01-15T00:00:00Z", "2030-02-01T00:00:00Z"]),
    ("AWS cron reference, 'L' in day-of-month: the last day", "cron(0 12 L * ? *)", "2030-02-01T00:00:00Z",
     ["2030-02-28T12:00:00Z", "2030-03-31T12:00:00Z"]),
    ("AWS cron reference, 'L' in day-of-week: the last day of the week", "cron(0 12 ? * L *)", "2030-01-01T00:00:00Z",
     ["2030-01-05T12:00:00Z", "2030-01-12T12:00:00Z"]),
    ("AWS cron reference, 'W': 3W is the weekday closest to the 3rd", "cron(0 9 3W * ? *)", "2030-07-01T00:00:00Z",
     ["2030-07-03T09:00:00Z", "2030-08-02T09:00:00Z", "2030-09-03T09:00:00Z"]),  # 3 Aug 2030 is a Saturday
    ("AWS cron reference, '#': 3#2 is the second Tuesday", "cron(0 9 ? * 3#2 *)", "2030-01-01T00:00:00Z",
     ["2030-01-08T09:00:00Z", "2030-02-12T09:00:00Z"]),
    ("AWS cron reference: days of the week 1-7 from SUN", "cron(0 10 ? * 1 *)", "2030-01-01T00:00:00Z",
     ["2030-01-06T10:00:00Z"]),
    ("AWS cron reference: days of the week 1-7 from SUN", "cron(0 10 ? * 7 *)", "2030-01-01T00:00:00Z",
     ["2030-01-05T10:00:00Z"]),
    ("AWS cron reference: year field, ranges", "cron(0 0 1 1 ? 2031-2032)", "2029-06-01T00:00:00Z",
     ["2031-01-01T00:00:00Z", "2032-01-01T00:00:00Z"]),
    ("AWS cron reference: '/' in the year field", "cron(0 0 1 1 ? 2030/2)", "2029-06-01T00:00:00Z",
     ["2030-01-01T00:00:00Z", "2032-01-01T00:00:00Z", "2034-01-01T00:00:00Z"]),
    ("AWS cron reference: the year field ends at 2199", "cron(0 0 1 1 ? 2198-2199)", "2198-06-01T00:00:00Z",
     ["2199-01-01T00:00:00Z"]),
]


@pytest.mark.parametrize("source,expression,after,expected", DOCUMENTED, ids=[c[1] for c in DOCUMENTED])
def test_documented_expressions_fire_as_aws_says(source, expression, after, expected):
    assert next_fires(expression, after, len(expected) + 1)[:len(expected)] == expected, source
    if "2199" in expression:
        assert next_fires(expression, after, 3) == expected  # nothing after the last year


@pytest.mark.parametrize("expression,hint", [
    ("cron(0 10 * * * *)", "'?'"),              # AWS cron reference, limits: '?' in one day field
    ("cron(0 10 ? * ? *)", "'?'"),
    ("cron(0 10 * * ?)", "6"),                  # six required fields
    ("cron(0 10 ? * 8 *)", "day-of-week"),      # days of the week are 1-7
    ("cron(0 10 ? * 0 *)", "day-of-week"),
    ("cron(0 10 ? * 6#9 *)", "occurrence"),
    ("cron(0 10 ? * 2 20X)", "year"),
    ("cron(0 0 1 1 ? 2200)", "1970-2199"),      # AWS cron reference: years 1970-2199
    ("cron(0 0 1 1 ? 2030-2200)", "1970-2199"),
    ("cron(0 0 1 1 ? 1969)", "1970-2199"),
    ("cron(0 0 ? * 3#1,6#3 *)", "one expression"),         # AWS cron reference: "3#1,6#3" is not valid
    ("cron(0 0 ? * 1/2 *)", "'/'"),             # AWS cron reference: day-of-week takes , - * ? L #
    ("cron(0 0 ? * SAT,SUN,L *)", "stands alone"),  # Quartz QUARTZ-640: L with other days
    ("cron(0 0 32W * ? *)", "day-of-month"),    # Quartz QTZ-96: W past 31
    ("cron(0 0 L-2 * ? *)", "stand alone"),     # L-n is Quartz's, not in AWS's documentation
    ("cron(0 0 1,L * ? *)", "stand alone"),
    ("cron(60 0 * * ? *)", "minutes"),
    ("cron(0 24 * * ? *)", "hours"),
    ("cron(0 0 30 2 ? *)", "never matches"),
    ("cron(0 0 1 1 ? 1999)", "no fire time"),   # every year allowed lies in the past
])
def test_what_aws_refuses_is_refused_naming_the_schedule(expression, hint):
    with pytest.raises(UnprocessableRequest) as error:
        cron_schedule(expression, "UTC", at("2029-01-01T00:00:00Z"))
    assert error.value.details[0].field == "schedule" and hint in error.value.message, error.value.message


@pytest.mark.parametrize("expression,after,expected", [
    ("cron(0 12 1-1 * ? *)", "2030-01-01T13:00:00Z", ["2030-02-01T12:00:00Z", "2030-03-01T12:00:00Z"]),
    ("cron(5-5 * * * ? *)", "2030-01-01T00:10:00Z", ["2030-01-01T01:05:00Z", "2030-01-01T02:05:00Z"]),
    ("cron(0 9 ? * MON-MON *)", "2030-01-01T00:00:00Z", ["2030-01-07T09:00:00Z", "2030-01-14T09:00:00Z"]),
    ("cron(0 0 1 JAN-JAN ? *)", "2030-01-01T00:00:00Z", ["2031-01-01T00:00:00Z", "2032-01-01T00:00:00Z"]),
    ("cron(0 0 1 1 ? 2031-2031)", "2030-01-01T00:00:00Z", ["2031-01-01T00:00:00Z"]),
])
def test_a_one_value_range_is_that_value_alone(expression, after, expected):
    # AWS cron reference, '-': a range includes the values from its start to its end.
    assert next_fires(expression, after, len(expected)) == expected


def test_the_time_zone_applies_to_aws_expressions_too():
    assert next_fires("cron(0 9 ? * 2 *)", "2030-01-01T00:00:00Z", 1, tz="America/New_York") == [
        "2030-01-07T14:00:00Z"]


def test_a_rare_date_keeps_firing_decades_apart():
    # the fifth Sunday of February exists only when 29 February is a Sunday
    assert next_fires("cron(0 12 ? 2 SUN#5 *)", "2030-01-01T00:00:00Z") == [
        "2032-02-29T12:00:00Z", "2060-02-29T12:00:00Z", "2088-02-29T12:00:00Z"]


class TestAwsDaylightSavingTime:
    """AWS schedule types, daylight saving time: when the time shifts forward, an invocation whose
    cron expression falls on a time that does not exist is skipped; when it shifts back, the
    schedule runs only once and does not repeat its invocation. (Debian's rule for 5-field cron,
    in test_schedule.py, runs a skipped time right after the jump instead.)"""

    def test_a_time_the_spring_forward_skips_does_not_fire(self):
        # New York, 8 March 2026: 02:00 EST → 03:00 EDT; 02:30 does not exist that day
        assert next_fires("cron(30 2 * * ? *)", "2026-03-07T12:00:00Z", 2, tz="America/New_York") == [
            "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"]

    def test_the_same_expression_in_5_fields_follows_debian(self):
        assert next_fires("30 2 * * *", "2026-03-07T12:00:00Z", 2, tz="America/New_York") == [
            "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"]

    def test_a_repeated_hour_runs_once_at_its_first_pass(self):
        # New York, 1 November 2026: 02:00 EDT → 01:00 EST; 01:00-01:59 happens twice
        assert next_fires("cron(0/30 * * * ? *)", "2026-11-01T04:50:00Z", 4, tz="America/New_York") == [
            "2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z",  # 01:00, 01:30 EDT
            "2026-11-01T07:00:00Z", "2026-11-01T07:30:00Z"]  # 02:00, 02:30 EST: 01:00, 01:30 EST do not repeat

    def test_a_wildcard_hour_does_not_fire_in_the_skipped_hour(self):
        assert next_fires("cron(15 * * * ? *)", "2026-03-29T00:00:00Z", 2, tz="Europe/Paris") == [
            "2026-03-29T00:15:00Z", "2026-03-29T01:15:00Z"]  # 01:15 CET, then 03:15 CEST

    def test_a_rate_counts_real_time_across_the_change(self):
        # AWS schedule types: a rate in days is 24 hours, even when DST makes a day 23 or 25 hours
        daily = rate_schedule("rate(1 day)", at("2026-03-07T12:00:00Z") - 86_400_000)
        assert fires(daily, "2026-03-07T11:00:00Z", 3) == [
            "2026-03-07T12:00:00Z", "2026-03-08T12:00:00Z", "2026-03-09T12:00:00Z"]

    def test_an_at_time_that_does_not_exist_is_refused(self):
        with pytest.raises(UnprocessableRequest) as error:
            local_instant("2026-03-08T02:30:00", "America/New_York", "schedule")
        assert error.value.details[0].field == "schedule" and "does not exist" in error.value.message

    def test_a_repeated_at_time_is_its_first_pass(self):
        assert local_instant("2026-11-01T01:30:00", "America/New_York", "schedule") == at("2026-11-01T05:30:00Z")


@pytest.mark.parametrize("aws,iso", [("rate(1 minute)", "PT1M"), ("rate(5 minutes)", "PT5M"),
                                     ("rate(1 hour)", "PT1H"), ("rate(2 hours)", "PT2H"),
                                     ("rate(1 day)", "P1D"), ("rate(3 days)", "P3D")])
def test_rate_expressions(aws, iso):
    assert rate_to_duration(aws) == iso


@pytest.mark.parametrize("bad", [
    "rate(0 minutes)", "rate(5 weeks)", "rate(five minutes)", "rate()",
    "rate(1 minutes)", "rate(1 hours)", "rate(1 days)",  # AWS: the unit is singular for 1
    "rate(5 minute)", "rate(2 hour)", "rate(2 day)",  # and plural for more
    "rate(-1 minutes)", "rate(1.5 hours)", "rate(5  minutes x)",
])
def test_bad_rate_expressions(bad):
    with pytest.raises(UnprocessableRequest) as error:
        rate_to_duration(bad)
    assert error.value.details[0].field == "schedule"


# AWS's DST rule against a brute-force reading of its text: walk every real minute around each
# transition; a minute fires when its wall time matches and it is that wall time's first pass
# (Python marks the second pass fold=1). A skipped wall time is no real minute's, so it never fires.
def _transitions(zone_name: str) -> list:
    zone, found = ZoneInfo(zone_name), []
    t, end = datetime(2026, 1, 1, tzinfo=timezone.utc), datetime(2028, 1, 1, tzinfo=timezone.utc)
    while t < end:
        step = t + timedelta(hours=1)
        if step.astimezone(zone).utcoffset() != t.astimezone(zone).utcoffset():
            found.append((zone_name, t))
        t = step
    return found


_AWS_DST_CASES = [case for zone in ("America/New_York", "Europe/London", "Australia/Lord_Howe", "Australia/Sydney")
                  for case in _transitions(zone)]
_MINUTE_FORMS = {"0": {0}, "30": {30}, "0/15": {0, 15, 30, 45}, "10-40/10": {10, 20, 30, 40}, "*": set(range(60)),
                 "45-45": {45}}
_HOUR_FORMS = {"*": set(range(24)), "1": {1}, "2": {2}, "1-3": {1, 2, 3}, "0/2": set(range(0, 24, 2)), "2-2": {2}}


def _brute_force(minutes: set, hours: set, zone_name: str, start, end) -> list[str]:
    zone, out, t = ZoneInfo(zone_name), [], start + timedelta(minutes=1)
    while t <= end:
        local = t.astimezone(zone)
        if local.minute in minutes and local.hour in hours and local.fold == 0:
            out.append(t.strftime("%Y-%m-%dT%H:%M:%SZ"))
        t += timedelta(minutes=1)
    return out


@settings(max_examples=150, deadline=None)
@given(case=st.sampled_from(_AWS_DST_CASES), minute=st.sampled_from(sorted(_MINUTE_FORMS)),
       hour=st.sampled_from(sorted(_HOUR_FORMS)), lead_minutes=st.integers(30, 300))
def test_cron_fires_by_awss_dst_rule_around_every_transition(case, minute, hour, lead_minutes):
    zone_name, transition = case
    start = (transition - timedelta(minutes=lead_minutes)).replace(second=0, microsecond=0)
    end = transition + timedelta(hours=4)
    expected = _brute_force(_MINUTE_FORMS[minute], _HOUR_FORMS[hour], zone_name, start, end)
    schedule = cron_schedule(f"cron({minute} {hour} * * ? *)", zone_name, at("2025-01-01T00:00:00Z"))
    got, cursor = [], int(start.timestamp() * 1000)
    while (cursor := schedule.next_fire_after(cursor)) is not None and cursor <= int(end.timestamp() * 1000):
        got.append(format_instant(cursor))
    assert got == expected, (minute, hour, zone_name, transition.isoformat())
