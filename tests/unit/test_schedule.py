"""Schedules: next fire instants, DST in two zones, leap days, rate boundaries."""
import pytest

from jobsched.domain.errors import UnprocessableRequest
from jobsched.domain.schedule import (
    cron_schedule,
    delayed_schedule,
    format_instant,
    one_time_schedule,
    parse_duration_ms,
    parse_instant,
    rate_schedule,
)


def at(text: str) -> int:
    return parse_instant(text, "t")


def fires(schedule, after: str, count: int) -> list[str]:
    out, cursor = [], at(after)
    for _ in range(count):
        nxt = schedule.next_fire_after(cursor)
        if nxt is None:
            break
        out.append(format_instant(nxt))
        cursor = nxt
    return out


class TestCronDst:
    def test_new_york_spring_forward_runs_a_skipped_wall_time_once_at_the_gap_end(self):
        daily = cron_schedule("30 2 * * *", "America/New_York", at("2026-03-01T00:00:00Z"))
        assert fires(daily, "2026-03-07T12:00:00Z", 3) == [
            "2026-03-08T07:00:00Z",  # 02:30 does not exist on 8 March: runs at 03:00 EDT
            "2026-03-09T06:30:00Z",  # 02:30 EDT
            "2026-03-10T06:30:00Z",
        ]

    def test_new_york_fall_back_runs_a_fixed_time_job_once(self):
        daily = cron_schedule("30 1 * * *", "America/New_York", at("2026-10-01T00:00:00Z"))
        assert fires(daily, "2026-10-31T12:00:00Z", 2) == [
            "2026-11-01T05:30:00Z",  # 01:30 EDT, the first pass; 01:30 EST is not repeated
            "2026-11-02T06:30:00Z",  # 01:30 EST
        ]

    def test_new_york_fall_back_keeps_an_every_half_hour_job_on_real_intervals(self):
        every = cron_schedule("*/30 * * * *", "America/New_York", at("2026-10-01T00:00:00Z"))
        assert fires(every, "2026-11-01T04:50:00Z", 5) == [
            "2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z",  # 01:00, 01:30 EDT
            "2026-11-01T06:00:00Z", "2026-11-01T06:30:00Z",  # 01:00, 01:30 EST
            "2026-11-01T07:00:00Z",
        ]

    def test_berlin_spring_forward_and_fall_back(self):
        daily = cron_schedule("30 2 * * *", "Europe/Berlin", at("2026-01-01T00:00:00Z"))
        # 29 March 2026: 02:00 CET → 03:00 CEST; 02:30 does not exist
        assert fires(daily, "2026-03-28T12:00:00Z", 2) == ["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"]
        # 25 October 2026: 03:00 CEST → 02:00 CET; 02:30 happens twice, runs once
        assert fires(daily, "2026-10-24T12:00:00Z", 2) == ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]

    def test_time_zone_decides_the_utc_instant(self):
        tokyo = cron_schedule("0 9 * * *", "Asia/Tokyo", at("2030-01-01T00:00:00Z"))
        assert fires(tokyo, "2030-01-01T00:00:00Z", 1) == ["2030-01-02T00:00:00Z"]


class TestCronCalendar:
    def test_leap_day_fires_only_in_leap_years(self):
        leap = cron_schedule("0 12 29 2 *", "UTC", at("2025-01-01T00:00:00Z"))
        assert fires(leap, "2025-01-01T00:00:00Z", 2) == ["2028-02-29T12:00:00Z", "2032-02-29T12:00:00Z"]

    def test_day_of_week_zero_is_sunday(self):
        sundays = cron_schedule("0 8 * * 0", "UTC", at("2030-01-01T00:00:00Z"))
        assert fires(sundays, "2030-01-01T00:00:00Z", 1) == ["2030-01-06T08:00:00Z"]  # a Sunday

    def test_end_at_bounds_the_schedule(self):
        bounded = cron_schedule("0 * * * *", "UTC", at("2030-01-01T00:00:00Z"), end_ms=at("2030-01-01T02:00:00Z"))
        # Fires only in [startAt, endAt) (shared/API.md): the occurrence at endAt itself does not fire.
        assert fires(bounded, "2030-01-01T00:00:00Z", 5) == ["2030-01-01T01:00:00Z"]

    def test_start_at_delays_the_first_fire(self):
        later = cron_schedule("0 * * * *", "UTC", at("2030-01-01T00:00:00Z"), start_ms=at("2030-01-01T05:00:00Z"))
        assert format_instant(later.first_fire()) == "2030-01-01T05:00:00Z"

    @pytest.mark.parametrize("expression", ["61 * * * *", "* * *", "0 0 * * * *", "bad cron here x", "0 0 30 2 *"])
    def test_invalid_expressions_name_the_schedule_field(self, expression):
        with pytest.raises(UnprocessableRequest) as err:
            cron_schedule(expression, "UTC", at("2030-01-01T00:00:00Z"))
        assert err.value.details[0].field == "schedule"

    def test_unknown_time_zone_names_the_timezone_field(self):
        with pytest.raises(UnprocessableRequest) as err:
            cron_schedule("0 0 * * *", "Mars/Olympus_Mons", at("2030-01-01T00:00:00Z"))
        assert err.value.details[0].field == "timezone"


class TestRate:
    def test_first_fire_is_one_period_after_creation(self):
        rate = rate_schedule("PT5M", at("2030-01-01T00:00:07Z"))
        assert format_instant(rate.first_fire()) == "2030-01-01T00:05:07Z"

    def test_next_fire_is_strictly_after_and_on_the_grid(self):
        rate = rate_schedule("PT10S", at("2030-01-01T00:00:00Z"))
        assert format_instant(rate.next_fire_after(at("2030-01-01T00:00:10Z"))) == "2030-01-01T00:00:20Z"
        assert format_instant(rate.next_fire_after(at("2030-01-01T00:00:10.001Z"))) == "2030-01-01T00:00:20Z"
        assert format_instant(rate.next_fire_after(at("2030-01-01T00:00:09.999Z"))) == "2030-01-01T00:00:10Z"

    def test_start_at_anchors_the_grid(self):
        rate = rate_schedule("PT1H", at("2030-01-01T00:00:00Z"), start_ms=at("2030-01-02T03:00:00Z"))
        assert fires(rate, "2030-01-01T00:00:00Z", 2) == ["2030-01-02T03:00:00Z", "2030-01-02T04:00:00Z"]

    def test_end_at_is_exclusive(self):
        # Round 3 of the contract (shared/API.md): fires only in [startAt, endAt).
        rate = rate_schedule("PT1M", at("2030-01-01T00:00:00Z"), end_ms=at("2030-01-01T00:02:00Z"))
        assert fires(rate, "2030-01-01T00:00:00Z", 5) == ["2030-01-01T00:01:00Z"]

    @pytest.mark.parametrize("text,ms", [("PT1S", 1000), ("PT0.5S", None), ("PT1M30S", 90_000), ("P1D", 86_400_000),
                                         ("P1W", 604_800_000), ("PT2H", 7_200_000)])
    def test_durations(self, text, ms):
        if ms is None:
            with pytest.raises(UnprocessableRequest):
                parse_duration_ms(text)
        else:
            assert parse_duration_ms(text) == ms

    @pytest.mark.parametrize("text", ["P1M", "P1Y", "5m", "PT", "P", "", "PT-5M", "P1DT"])
    def test_bad_durations_are_refused_naming_the_field(self, text):
        with pytest.raises(UnprocessableRequest) as err:
            parse_duration_ms(text)
        assert err.value.details[0].field == "schedule"


class TestOneShot:
    def test_one_time_fires_once(self):
        once = one_time_schedule(at("2030-01-01T00:00:00Z"))
        assert fires(once, "2029-12-31T00:00:00Z", 3) == ["2030-01-01T00:00:00Z"]
        assert not once.recurring

    def test_delayed_runs_its_delay_after_creation(self):
        delayed = delayed_schedule(90, at("2030-01-01T00:00:00Z"))
        assert format_instant(delayed.first_fire()) == "2030-01-01T00:01:30Z"


def test_instants_must_carry_an_offset():
    with pytest.raises(UnprocessableRequest) as err:
        parse_instant("2030-01-01T00:00:00", "runAt")
    assert err.value.details[0].field == "runAt"
    assert parse_instant("2030-01-01T01:00:00+01:00", "runAt") == at("2030-01-01T00:00:00Z")


def test_schedules_survive_a_round_trip_through_the_table():
    from jobsched.domain.schedule import Schedule

    original = cron_schedule("0 3 * * *", "America/Los_Angeles", at("2030-01-01T00:00:00Z"), end_ms=at("2031-01-01T00:00:00Z"))
    assert Schedule.from_item(original.to_item()) == original


class TestSpanOfTime:
    """Every instant the API accepts can be stored, computed from and printed (the end of time is
    9999-01-01T00:00:00Z); schedules search as far as they need and end there."""

    @pytest.mark.parametrize("text", [
        "2030-W01-1T00:00:00Z", "20300101T000000Z", "2030-001T00:00:00Z", "2030-01-01", "2030-01-01T09:00Z",
        "2030-01-01T09:00:00", "2030-01-01T09:00:60Z", "2030-02-30T00:00:00Z", "+12030-01-01T00:00:00Z",
        "2030-01-01T09:00:00+2400", "2030-01-01T09:00:00+24:00", "２０３０-01-01T00:00:00Z", "0000-01-01T00:00:00Z",
        "9999-06-01T00:00:00Z", "1969-12-31T23:59:59Z",
    ])
    def test_only_rfc_3339_instants_within_the_span_are_taken(self, text):
        with pytest.raises(UnprocessableRequest) as caught:
            parse_instant(text, "runAt")
        assert caught.value.details[0].field == "runAt"

    @pytest.mark.parametrize("text,expected", [
        ("2030-01-01T09:00:00Z", "2030-01-01T09:00:00Z"),
        ("2030-01-01t09:00:00.5+02:00", "2030-01-01T07:00:00.500Z"),
        ("2030-01-01T09:00:00.123456789Z", "2030-01-01T09:00:00.123Z"),
        ("1970-01-01T00:00:00Z", "1970-01-01T00:00:00Z"),
        ("9999-01-01T00:00:00Z", "9999-01-01T00:00:00Z"),
    ])
    def test_rfc_3339_round_trips_with_a_four_digit_year(self, text, expected):
        assert format_instant(parse_instant(text, "t")) == expected

    def test_a_rate_too_long_to_compute_is_refused_naming_the_schedule(self):
        with pytest.raises(UnprocessableRequest) as caught:
            rate_schedule("P1000000W", at("2030-01-01T00:00:00Z"))
        assert caught.value.details[0].field == "schedule"
        assert rate_schedule("P3653D", at("2030-01-01T00:00:00Z")).first_fire() is not None

    def test_schedules_end_at_the_end_of_time(self):
        # The last occurrence is the most jitter (an hour) before the end of time: no fire passes it.
        every_second = rate_schedule("PT1S", at("2030-01-01T00:00:00Z"), start_ms=at("9998-12-31T22:59:58Z"))
        assert fires(every_second, "9998-12-31T22:59:57Z", 5) == [
            "9998-12-31T22:59:58Z", "9998-12-31T22:59:59Z", "9998-12-31T23:00:00Z"]
        yearly = cron_schedule("0 0 1 1 *", "Pacific/Kiritimati", at("2030-01-01T00:00:00Z"))
        assert fires(yearly, "9996-06-01T00:00:00Z", 5) == ["9996-12-31T10:00:00Z", "9997-12-31T10:00:00Z"]

    def test_a_far_year_of_an_aws_cron_is_found(self):
        schedule = cron_schedule("cron(0 0 1 1 ? 2040)", "UTC", at("2030-01-01T00:00:00Z"))
        assert fires(schedule, "2030-01-01T00:00:00Z", 3) == ["2040-01-01T00:00:00Z"]

    def test_a_rare_date_keeps_firing_decades_apart(self):
        # the fifth Sunday of February exists only when 29 February is a Sunday: 2032, 2060, 2088
        schedule = cron_schedule("cron(0 12 ? 2 SUN#5 *)", "UTC", at("2030-01-01T00:00:00Z"))
        assert fires(schedule, "2030-01-01T00:00:00Z", 3) == [
            "2032-02-29T12:00:00Z", "2060-02-29T12:00:00Z", "2088-02-29T12:00:00Z"]

    def test_an_expression_that_never_matches_is_refused(self):
        with pytest.raises(UnprocessableRequest):
            cron_schedule("0 0 30 2 *", "UTC", at("2030-01-01T00:00:00Z"))


class TestStoredBeforeTheGrammar:
    """A job stored when croniter read its expression keeps firing as it was accepted, and never
    fails the tick, even where the grammar now refuses its expression as new input."""

    @staticmethod
    def stored(item: dict):
        from jobsched.domain.schedule import Schedule

        return Schedule.from_item({"type": "CRON", "timezone": "UTC", "originMs": at("2029-01-01T00:00:00Z"), **item})

    def test_a_backwards_range_keeps_wrapping_around(self):
        schedule = self.stored({"cron": "58-1 * * * *", "text": "58-1 * * * *"})
        assert fires(schedule, "2030-01-01T00:30:00Z", 4) == [
            "2030-01-01T00:58:00Z", "2030-01-01T00:59:00Z", "2030-01-01T01:00:00Z", "2030-01-01T01:01:00Z"]

    def test_an_aws_expression_stored_with_its_old_translation_is_read_from_its_text(self):
        schedule = self.stored({"cron": "0 10 * * L5", "text": "cron(0 10 ? * 6L *)"})
        assert fires(schedule, "2030-01-01T00:00:00Z", 1) == ["2030-01-25T10:00:00Z"]

    def test_aws_forms_refused_now_keep_their_old_reading(self):
        steps = self.stored({"cron": "0 0 * * 0/2", "text": "cron(0 0 ? * 1/2 *)"})  # Sun, Tue, Thu, Sat
        assert fires(steps, "2030-01-01T00:00:00Z", 3) == [
            "2030-01-03T00:00:00Z", "2030-01-05T00:00:00Z", "2030-01-06T00:00:00Z"]
        two = self.stored({"cron": "0 0 * * 2#1,5#3", "text": "cron(0 0 ? * 3#1,6#3 *)"})
        assert fires(two, "2030-01-01T12:00:00Z", 2) == ["2030-01-18T00:00:00Z", "2030-02-05T00:00:00Z"]

    def test_a_stored_expression_that_cannot_be_read_at_all_has_no_fire(self):
        assert self.stored({"cron": "0 0 30 2 *", "text": "0 0 30 2 *"}).next_fire_after(0) is None


@pytest.mark.parametrize("text", ["2030-01-01T09:00:00Z\n", "2030-01-01T09:00:00+01:00\n"])
def test_an_instant_ending_in_a_newline_is_refused_naming_its_field(text):
    """`$` matches before a final newline: the pattern is matched to the true end of the text."""
    with pytest.raises(UnprocessableRequest) as refused:
        parse_instant(text, "runAt")
    assert "runAt" in str(refused.value)
