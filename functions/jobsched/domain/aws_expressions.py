"""AWS-style schedule expressions (EventBridge): at(...), rate(...), cron(...).

AWS cron has six fields (minutes hours day-of-month month day-of-week year), `?`, and numbers
days of the week 1-7 from Sunday; croniter has five fields here (a sixth would be seconds) and
numbers them 0-6 from Sunday. We translate AWS into standard cron plus a year filter, and never
hand an AWS expression to croniter."""
from __future__ import annotations

import re
from dataclasses import dataclass

from jobsched.domain.errors import UnprocessableRequest

FIELD = "schedule"
_AT = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")
_RATE = re.compile(r"^rate\((\d+)\s+(minutes?|hours?|days?)\)$")
_CRON = re.compile(r"^cron\((.*)\)$")
_DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_RATE_UNITS = {"minute": "M", "hour": "H", "day": "D"}


def is_aws_expression(text: str) -> bool:
    return bool(re.match(r"^(at|rate|cron)\(", text.strip()))


def _bad(message: str) -> UnprocessableRequest:
    return UnprocessableRequest.for_field(FIELD, message)


def parse_at(text: str) -> str:
    """at(yyyy-mm-ddThh:mm:ss) → the local date-time, read in the job's timezone."""
    match = _AT.match(text.strip())
    if not match:
        raise _bad(f"'{text}' is not an at() expression such as at(2030-01-31T09:00:00)")
    return match.group(1)


def rate_to_duration(text: str) -> str:
    """rate(5 minutes) → PT5M; rate(1 day) → P1D."""
    match = _RATE.match(text.strip())
    if not match:
        raise _bad(f"'{text}' is not a rate() expression such as rate(5 minutes), rate(1 hour), rate(2 days)")
    value, unit = int(match.group(1)), match.group(2).rstrip("s")
    if value < 1:
        raise _bad(f"'{text}': the rate must be at least 1")
    return f"P{value}D" if unit == "day" else f"PT{value}{_RATE_UNITS[unit]}"


@dataclass(frozen=True)
class TranslatedCron:
    cron: str  # standard 5-field, croniter's numbering
    years: str | None  # the AWS year field when it is not '*'


def translate_cron(text: str) -> TranslatedCron:
    match = _CRON.match(text.strip())
    if not match:
        raise _bad(f"'{text}' is not a cron() expression such as cron(0 10 ? * MON-FRI *)")
    fields = match.group(1).split()
    if len(fields) != 6:
        raise _bad(f"'{text}' has {len(fields)} fields; AWS cron has 6: minutes hours day-of-month month "
                   "day-of-week year")
    minute, hour, dom, month, dow, year = fields
    if (dom == "?") == (dow == "?"):
        raise _bad(f"'{text}': use '?' in exactly one of day-of-month and day-of-week")
    if dom == "LW":
        raise _bad(f"'{text}': 'LW' (last weekday of the month) is not supported")
    return TranslatedCron(
        cron=" ".join([minute, hour, "*" if dom == "?" else dom, month, "*" if dow == "?" else _translate_dow(dow, text)]),
        years=None if year == "*" else _check_years(year, text),
    )


def _translate_dow(field: str, text: str) -> str:
    return ",".join(_translate_dow_item(item, text) for item in field.split(","))


def _translate_dow_item(item: str, text: str) -> str:
    if item == "*":
        return "*"
    if "#" in item:  # nth weekday of the month: 6#3 is the third Friday
        day, _, nth = item.partition("#")
        if not nth.isdigit() or not 1 <= int(nth) <= 5:
            raise _bad(f"'{text}': '{item}' needs an occurrence 1-5 after '#'")
        return f"{_day(day, text)}#{nth}"
    if item.endswith("L") and len(item) > 1:  # last weekday of the month: 6L is the last Friday
        return f"L{_day(item[:-1], text)}"
    if item == "L":
        return "6"  # AWS: L alone in day-of-week is Saturday (7)
    step = ""
    if "/" in item:
        item, _, every = item.partition("/")
        if not every.isdigit():
            raise _bad(f"'{text}': bad step in day-of-week '{item}/{every}'")
        step = f"/{every}"
        if item == "*":
            return f"*{step}"
    if "-" in item:
        low, _, high = item.partition("-")
        return f"{_day(low, text)}-{_day(high, text)}{step}"
    return f"{_day(item, text)}{step}"


def _day(token: str, text: str) -> str:
    """An AWS day of week (1-7 from Sunday, or a name) in croniter's numbering (0-6)."""
    upper = token.upper()
    if upper in _DAY_NAMES:
        return upper
    if token.isdigit() and 1 <= int(token) <= 7:
        return str(int(token) - 1)
    raise _bad(f"'{text}': '{token}' is not a day of week (1-7 from Sunday, or SUN-SAT)")


def _check_years(field: str, text: str) -> str:
    if not re.fullmatch(r"\d{4}(-\d{4})?(,\d{4}(-\d{4})?)*", field):
        raise _bad(f"'{text}': the year field takes '*', years, ranges and lists such as 2030,2032-2034")
    return field


def year_allowed(years: str | None, year: int) -> bool:
    if not years:
        return True
    for part in years.split(","):
        low, _, high = part.partition("-")
        if int(low) <= year <= int(high or low):
            return True
    return False


def last_year(years: str | None) -> int | None:
    if not years:
        return None
    return max(int(part.partition("-")[2] or part) for part in years.split(","))
