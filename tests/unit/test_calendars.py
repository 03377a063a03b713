"""Exclusion calendars in the domain: an occurrence's date in the job's time zone, across DST."""
from __future__ import annotations

import pytest

from jobsched.domain.calendars import (
    checked_job_calendars,
    is_excluded,
    local_date,
    normalized_dates,
)
from jobsched.domain.errors import UnprocessableRequest
from jobsched.domain.schedule import cron_schedule, parse_instant


def ms(text: str) -> int:
    return parse_instant(text, "t")


def test_the_date_is_the_job_zones_not_utcs():
    # 23:30 UTC on the 24th is already the 25th in Paris (UTC+1 in winter)
    assert local_date(ms("2026-12-24T23:30:00Z"), "Europe/Paris") == "2026-12-25"
    assert local_date(ms("2026-12-24T23:30:00Z"), "UTC") == "2026-12-24"
    # and still the 24th in New York
    assert local_date(ms("2026-12-25T04:30:00Z"), "America/New_York") == "2026-12-24"


def test_the_date_follows_the_zones_offset_on_each_side_of_a_dst_change():
    # Paris leaves summer time on 2026-10-25 at 03:00 local (01:00Z). At 22:30Z on the 24th Paris is
    # still at +2: 00:30 on the 25th; a fixed winter offset (+1) would say 23:30 on the 24th.
    assert local_date(ms("2026-10-24T22:30:00Z"), "Europe/Paris") == "2026-10-25"
    # The day after, at +1, 22:30Z is 23:30 on the 25th
    assert local_date(ms("2026-10-25T22:30:00Z"), "Europe/Paris") == "2026-10-25"
    # Spring: on 2026-03-29 Paris jumps from 02:00 to 03:00; 22:30Z on the 28th is 23:30 on the 28th
    assert local_date(ms("2026-03-28T22:30:00Z"), "Europe/Paris") == "2026-03-28"
    assert local_date(ms("2026-03-29T22:30:00Z"), "Europe/Paris") == "2026-03-30"


def test_a_cron_occurrence_on_an_excluded_local_date_is_excluded_around_dst():
    # A job at 00:30 every day in Paris: on 2026-10-25 its occurrence is 22:30Z on the 24th
    schedule = cron_schedule("30 0 * * *", "Europe/Paris", ms("2026-10-23T00:00:00Z"))
    occurrence = schedule.next_fire_after(ms("2026-10-24T12:00:00Z"))
    assert occurrence == ms("2026-10-24T22:30:00Z")
    dates = {"holidays": frozenset({"2026-10-25"})}
    assert is_excluded(occurrence, "Europe/Paris", ["holidays"], dates)
    # The next one (2026-10-26 00:30 at +1, 23:30Z on the 25th) is not
    following = schedule.next_fire_after(occurrence)
    assert following == ms("2026-10-25T23:30:00Z")
    assert not is_excluded(following, "Europe/Paris", ["holidays"], dates)


def test_any_named_calendar_excludes_and_a_missing_one_excludes_nothing():
    dates = {"a": frozenset({"2026-12-24"}), "b": frozenset({"2026-12-25"}), "gone": None}
    at = ms("2026-12-25T09:00:00Z")
    assert is_excluded(at, "UTC", ["a", "b"], dates)
    assert not is_excluded(at, "UTC", ["a"], dates)
    assert not is_excluded(at, "UTC", ["gone"], dates)
    assert not is_excluded(at, "UTC", [], dates)


def test_dates_are_real_days_written_yyyy_mm_dd_and_come_back_sorted_once():
    assert normalized_dates(["2026-12-31", "2026-12-25", "2026-12-31"]) == ("2026-12-25", "2026-12-31")
    for bad, field in ((["2026-12-25", "2026-13-01"], "dates.1"), (["2026-12-25\n"], "dates.0"),
                       (["٢٠٢٦-12-25"], "dates.0"), (["26-12-25"], "dates.0"), (["1969-12-31"], "dates.0")):
        with pytest.raises(UnprocessableRequest) as refused:
            normalized_dates(bad)
        assert refused.value.details[0].field == field, bad
    with pytest.raises(UnprocessableRequest) as refused:
        normalized_dates(["2026-01-01"] * 1001)
    assert refused.value.details[0].field == "dates"


def test_a_job_names_at_most_five_calendars_each_once():
    assert checked_job_calendars(["a", "b"]) == ("a", "b")
    for names, field in ((["a", "a"], "excludeCalendars.1"), (["ok", "no/slash"], "excludeCalendars.1"),
                         (["x\n"], "excludeCalendars.0"), ([str(i) for i in range(6)], "excludeCalendars")):
        with pytest.raises(UnprocessableRequest) as refused:
            checked_job_calendars(names)
        assert refused.value.details[0].field == field, names
