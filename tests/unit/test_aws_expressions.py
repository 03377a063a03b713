"""AWS-style expressions are translated, never handed to croniter as they are: AWS numbers days
of the week 1-7 from Sunday and has a year field and '?'; croniter numbers them 0-6."""
import pytest

from jobsched.domain.aws_expressions import rate_to_duration, translate_cron, year_allowed
from jobsched.domain.errors import UnprocessableRequest
from jobsched.domain.schedule import cron_schedule

from .test_schedule import at, fires


def next_fires(expression, after, count=3, tz="UTC"):
    return fires(cron_schedule(expression, tz, at("2029-01-01T00:00:00Z")), after, count)


@pytest.mark.parametrize("aws,standard", [
    ("cron(0 10 ? * 2-6 *)", "0 10 * * 1-5"),          # Monday-Friday: AWS 2-6 is croniter 1-5
    ("cron(0 10 ? * 1 *)", "0 10 * * 0"),              # AWS 1 = Sunday = croniter 0
    ("cron(0 10 ? * 7 *)", "0 10 * * 6"),              # AWS 7 = Saturday
    ("cron(0 10 ? * MON-FRI *)", "0 10 * * MON-FRI"),  # names pass through
    ("cron(0 10 ? * 1,7 *)", "0 10 * * 0,6"),
    ("cron(0 10 ? * 6#3 *)", "0 10 * * 5#3"),          # the third Friday
    ("cron(0 10 ? * 6L *)", "0 10 * * L5"),            # the last Friday
    ("cron(15 12 L * ? *)", "15 12 L * *"),            # the last day of the month
    ("cron(0 9 15W * ? *)", "0 9 15W * *"),            # the weekday nearest the 15th
    ("cron(0/15 * * * ? *)", "0/15 * * * *"),
])
def test_translation_to_standard_cron(aws, standard):
    assert translate_cron(aws).cron == standard


def test_translated_weekdays_fire_on_the_right_days():
    # 2030-01-01 is a Tuesday
    assert next_fires("cron(0 10 ? * 2-6 *)", "2030-01-03T12:00:00Z") == [
        "2030-01-04T10:00:00Z", "2030-01-07T10:00:00Z", "2030-01-08T10:00:00Z"]  # Fri, Mon, Tue
    assert next_fires("cron(0 10 ? * 1 *)", "2030-01-01T00:00:00Z", 1) == ["2030-01-06T10:00:00Z"]  # Sunday
    assert next_fires("cron(0 10 ? * 6#3 *)", "2030-01-01T00:00:00Z", 1) == ["2030-01-18T10:00:00Z"]
    assert next_fires("cron(0 10 ? * 6L *)", "2030-01-01T00:00:00Z", 1) == ["2030-01-25T10:00:00Z"]
    assert next_fires("cron(0 12 L * ? *)", "2030-02-01T00:00:00Z", 1) == ["2030-02-28T12:00:00Z"]
    assert next_fires("cron(0 9 15W * ? *)", "2030-06-01T00:00:00Z", 1) == ["2030-06-14T09:00:00Z"]  # 15th: Sat


def test_the_year_field_limits_the_schedule():
    translated = translate_cron("cron(0 0 1 1 ? 2031-2032)")
    assert translated.years == "2031-2032"
    assert next_fires("cron(0 0 1 1 ? 2031-2032)", "2029-06-01T00:00:00Z", 3) == [
        "2031-01-01T00:00:00Z", "2032-01-01T00:00:00Z"]
    assert year_allowed("2030,2032-2034", 2033) and not year_allowed("2030,2032-2034", 2031)


def test_the_time_zone_applies_to_aws_expressions_too():
    assert next_fires("cron(0 9 ? * 2 *)", "2030-01-01T00:00:00Z", 1, tz="America/New_York") == [
        "2030-01-07T14:00:00Z"]


@pytest.mark.parametrize("expression,hint", [
    ("cron(0 10 * * * *)", "'?'"),            # neither day field is '?'
    ("cron(0 10 ? * ? *)", "'?'"),            # both are
    ("cron(0 10 * * ?)", "6"),                # five fields
    ("cron(0 10 LW * ? *)", "LW"),            # unsupported
    ("cron(0 10 ? * 8 *)", "day of week"),    # AWS has no day 8
    ("cron(0 10 ? * 0 *)", "day of week"),    # nor a day 0
    ("cron(0 10 ? * 6#9 *)", "occurrence"),
    ("cron(0 10 ? * 2 20X)", "year"),
])
def test_untranslatable_expressions_are_refused_clearly(expression, hint):
    with pytest.raises(UnprocessableRequest) as error:
        translate_cron(expression)
    assert error.value.details[0].field == "schedule" and hint in error.value.message


@pytest.mark.parametrize("aws,iso", [("rate(1 minute)", "PT1M"), ("rate(5 minutes)", "PT5M"),
                                     ("rate(2 hours)", "PT2H"), ("rate(1 day)", "P1D")])
def test_rate_expressions(aws, iso):
    assert rate_to_duration(aws) == iso


@pytest.mark.parametrize("bad", ["rate(0 minutes)", "rate(5 weeks)", "rate(five minutes)", "rate()"])
def test_bad_rate_expressions(bad):
    with pytest.raises(UnprocessableRequest):
        rate_to_duration(bad)
