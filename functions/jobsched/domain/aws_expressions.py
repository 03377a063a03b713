"""AWS-style schedule expressions (EventBridge Scheduler): at(...), rate(...), cron(...).

at() and rate() are read here; the six fields of cron() are read by jobsched.domain.cron in
AWS's own grammar (days of the week 1-7 from Sunday, `?`, `L`, `W`, `#`, years 1970-2199)."""
from __future__ import annotations

import re

from jobsched.domain.errors import UnprocessableRequest

FIELD = "schedule"
_AT = re.compile(r"at\(([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2})\)")
_RATE = re.compile(r"rate\(([0-9]+) +(minutes?|hours?|days?)\)")
_CRON = re.compile(r"cron\((.*)\)", re.DOTALL)
_RATE_UNITS = {"minute": "M", "hour": "H", "day": "D"}


def is_aws_expression(text: str) -> bool:
    return re.match(r"(?:at|rate|cron)\(", text.strip()) is not None


def _bad(message: str) -> UnprocessableRequest:
    return UnprocessableRequest.for_field(FIELD, message)


def parse_at(text: str) -> str:
    """at(yyyy-mm-ddThh:mm:ss) → the local date-time, read in the job's timezone."""
    match = _AT.fullmatch(text.strip())
    if not match:
        raise _bad(f"'{text}' is not an at() expression such as at(2030-01-31T09:00:00)")
    return match.group(1)


def rate_to_duration(text: str) -> str:
    """rate(5 minutes) → PT5M; rate(1 day) → P1D. As AWS: a positive whole number, and the unit
    singular for 1 and plural otherwise (rate(1 minutes) and rate(5 minute) are refused)."""
    match = _RATE.fullmatch(text.strip())
    if not match:
        raise _bad(f"'{text}' is not a rate() expression such as rate(5 minutes), rate(1 hour), rate(2 days)")
    value, written = int(match.group(1)), match.group(2)
    unit = written.rstrip("s")
    if value < 1:
        raise _bad(f"'{text}': the rate must be at least 1")
    if (value == 1) != (written == unit):
        expected = unit if value == 1 else unit + "s"
        raise _bad(f"'{text}': write rate({value} {expected}) (the unit is singular for 1, plural otherwise)")
    return f"P{value}D" if unit == "day" else f"PT{value}{_RATE_UNITS[unit]}"


def aws_cron_fields(text: str) -> str:
    """cron(0 10 ? * MON-FRI *) → "0 10 ? * MON-FRI *": the six fields, read by
    jobsched.domain.cron.parse_aws in AWS's grammar (never translated into another one)."""
    match = _CRON.fullmatch(text.strip())
    if not match:
        raise _bad(f"'{text}' is not a cron() expression such as cron(0 10 ? * MON-FRI *)")
    return " ".join(match.group(1).split())
