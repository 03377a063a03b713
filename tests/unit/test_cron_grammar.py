"""5-field cron read as Debian cron reads it, field by field: what each element means, the
decisions docs/architecture.md ("Time") records, and the bound on refusing what never matches."""
import time

import pytest

from jobsched.domain.cron import parse_debian
from jobsched.domain.errors import UnprocessableRequest
from jobsched.domain.schedule import cron_schedule

from .test_schedule import at, fires


def next_fires(expression, after, count=3, tz="UTC"):
    return fires(cron_schedule(expression, tz, at("2029-01-01T00:00:00Z")), after, count)


# A one-value range is its value alone (Debian cron, crontab(5): a range is inclusive of its two
# ends; AWS the same). croniter widened `N-N` to the whole field: up to 60 fires for one.
@pytest.mark.parametrize("expression,after,expected", [
    ("30 2-2 * * *", "2030-01-01T03:00:00Z", ["2030-01-02T02:30:00Z", "2030-01-03T02:30:00Z"]),
    ("5-5 * * * *", "2030-01-01T00:10:00Z", ["2030-01-01T01:05:00Z", "2030-01-01T02:05:00Z"]),
    ("0 9 * * MON-MON", "2030-01-01T00:00:00Z", ["2030-01-07T09:00:00Z", "2030-01-14T09:00:00Z"]),
    ("0 0 * JAN-JAN *", "2030-01-30T12:00:00Z", ["2030-01-31T00:00:00Z", "2031-01-01T00:00:00Z"]),
    ("0 12 1-1 * *", "2030-01-01T13:00:00Z", ["2030-02-01T12:00:00Z", "2030-03-01T12:00:00Z"]),
    ("0 0 * * 0-0", "2030-01-01T00:00:00Z", ["2030-01-06T00:00:00Z", "2030-01-13T00:00:00Z"]),
    ("0 0 * * 7-7", "2030-01-01T00:00:00Z", ["2030-01-06T00:00:00Z", "2030-01-13T00:00:00Z"]),
    ("10-10/5 * * * *", "2030-01-01T00:00:00Z", ["2030-01-01T00:10:00Z", "2030-01-01T01:10:00Z"]),
])
def test_a_one_value_range_fires_on_that_value_alone(expression, after, expected):
    assert next_fires(expression, after, len(expected)) == expected


@pytest.mark.parametrize("expression,minutes", [
    ("5 * * * *", (5,)), ("1,2,3 * * * *", (1, 2, 3)), ("1-3 * * * *", (1, 2, 3)),
    ("*/15 * * * *", (0, 15, 30, 45)), ("0-10/5 * * * *", (0, 5, 10)), ("5/15 * * * *", (5, 20, 35, 50)),
    ("50-59/4,1 * * * *", (1, 50, 54, 58)), ("*/61 * * * *", (0,)),
])
def test_each_element_of_a_field_is_read_as_written(expression, minutes):
    assert parse_debian(expression).minutes == minutes


class TestDecisions:
    def test_a_star_element_in_day_of_week_covers_every_day(self):
        # Debian: a field that starts with '*' does not restrict; cronsim the same. `*,sat#3` is
        # every day (the '#' item adds nothing), not the third Saturday.
        assert next_fires("0 0 * * *,sat#3", "2030-01-01T00:00:00Z") == [
            "2030-01-02T00:00:00Z", "2030-01-03T00:00:00Z", "2030-01-04T00:00:00Z"]

    def test_hash_with_a_restricted_day_of_month_is_either_day(self):
        # Debian ORs two restricted day fields, '#' included: the 1st, and the third Saturday.
        assert next_fires("0 0 1 * sat#3", "2030-01-01T12:00:00Z") == [
            "2030-01-19T00:00:00Z", "2030-02-01T00:00:00Z", "2030-02-16T00:00:00Z"]

    def test_a_star_step_in_day_of_month_makes_the_day_fields_both_apply(self):
        # cronsim's vector "First Monday of the month": '*/100' starts with '*', so AND
        assert next_fires("1 1 */100,1-7 * MON", "2020-01-01T00:00:00Z", 2) == [
            "2020-01-06T01:01:00Z", "2020-02-03T01:01:00Z"]

    @pytest.mark.parametrize("expression,field", [("5-1 * * * *", "minute"), ("0 22-2 * * *", "hour"),
                                                  ("0 0 * * FRI-MON", "day-of-week"), ("0 0 * DEC-JAN *", "month")])
    def test_a_range_that_wraps_around_is_refused_with_the_list_to_write(self, expression, field):
        with pytest.raises(UnprocessableRequest) as error:
            cron_schedule(expression, "UTC", at("2030-01-01T00:00:00Z"))
        assert error.value.details[0].field == "schedule"
        assert field in error.value.message and "wraps around" in error.value.message


@pytest.mark.parametrize("expression", [
    "61 * * * *", "* 24 * * *", "* * 0 * *", "* * 32 * *", "* * * 13 *", "* * * * 8", "*/0 * * * *",
    "1-1_0 * * * *", "¹ * * * *", "1,,2 * * * *", "* * * * 1#0", "* * * * 1#6", "* * * * MONL",
    "* * * * 5L-6", "* * * * 5L#1", "* * LL * *", "* * LWX * *", "* * * * * *", "* * * *", "0 0 30 2 *",
    "0 0 31 4 *", "1 1 */100 * MON#4", "* * L/2 * *", "@daily", "0 0 ? * *",
])
def test_malformed_or_never_matching_expressions_are_refused_naming_the_schedule(expression):
    with pytest.raises(UnprocessableRequest) as error:
        cron_schedule(expression, "UTC", at("2030-01-01T00:00:00Z"))
    assert error.value.details[0].field == "schedule"


@pytest.mark.parametrize("expression", ["0 0 30 2 *", "1 1 */100 * MON#4", "cron(0 0 31 2,4,6,9,11 ? *)",
                                        "cron(0 0 ? 2 1#5 2089-2127)"])
def test_refusing_what_never_matches_costs_well_under_what_a_request_may_spend(expression):
    # A 401-year search took 130 ms or more; the 28 shapes a month can have decide it at once.
    started = time.process_time()
    for _ in range(10):
        with pytest.raises(UnprocessableRequest):
            cron_schedule(expression, "UTC", at("2030-01-01T00:00:00Z"))
    assert (time.process_time() - started) / 10 < 0.02


def test_parsing_is_read_in_the_project_not_by_croniter():
    # `L` in day-of-week was croniter's spelling (L5) and means nothing to Debian or cronsim
    with pytest.raises(UnprocessableRequest):
        cron_schedule("0 0 * * L5", "UTC", at("2030-01-01T00:00:00Z"))
