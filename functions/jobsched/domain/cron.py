"""Cron expressions parsed into explicit value sets, and the next matching wall time.

Two grammars, each read the way its owner reads it, never through another library's reading:
- 5-field cron as Debian cron reads it (cronsim is the reference: its extensions `L`, `LW` in
  day-of-month and `5L`, `5#3` in day-of-week are accepted too).
- the inside of AWS `cron(...)`: six fields as EventBridge documents them (minutes hours
  day-of-month month day-of-week year, days of the week 1-7 from Sunday, `?`, `L`, `W`, `#`).

Both compile to a `CronSpec` of explicit sets; `next_wall_match` walks years, months, days,
hours and minutes of the wall clock. The days of a month that match depend only on the month's
length and the weekday of its first day (28 combinations), so they are computed once per spec,
and "never matches" is decided from those 28 answers in microseconds instead of a 400-year walk.
No time zone lives here: the caller maps wall times to instants (schedule.py, with its DST rule).
"""
from __future__ import annotations

import calendar
import re
from bisect import bisect_left
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import Enum
from functools import lru_cache

from jobsched.domain.errors import UnprocessableRequest

FIELD = "schedule"
MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
LAST_YEAR_SEARCHED = 9998  # the end of time is 9999-01-01T00:00:00Z
AWS_YEARS = (1970, 2199)  # EventBridge's year field takes these and no others
_NUMBER = re.compile(r"[0-9]{1,4}")  # ASCII digits only: str.isdigit() would take '¹' and '٣'


class Dialect(str, Enum):
    DEBIAN = "DEBIAN"  # 5-field cron
    AWS = "AWS"  # the six fields inside cron(...)


@dataclass(frozen=True)
class DaySpec:
    """Which days of a month match. Day-of-week numbers are 0-6 from Sunday here."""

    dom: frozenset[int]  # days of the month 1-31
    dom_last: bool = False  # L: the month's last day
    dom_last_weekday: bool = False  # LW: the month's last Monday-Friday
    dom_nearest_weekday: int | None = None  # 15W: the Monday-Friday nearest the 15th, within the month
    dow: frozenset[int] = frozenset(range(7))
    dow_last: frozenset[int] = frozenset()  # 5L: the month's last Friday
    dow_nth: frozenset[tuple[int, int]] = frozenset()  # (5, 3): the third Friday
    dom_any: bool = False  # the day-of-month field does not restrict (AWS '?')
    dow_any: bool = False  # the day-of-week field does not restrict (AWS '?')
    both: bool = True  # both fields must match (Debian: either starts with '*'); else either does

    def days(self, length: int, first_weekday: int) -> tuple[int, ...]:
        """Matching days of a month of `length` days whose 1st falls on `first_weekday` (0 = Sunday)."""
        return tuple(day for day in range(1, length + 1) if self._matches(day, length, first_weekday))

    def _matches(self, day: int, length: int, first_weekday: int) -> bool:
        dom = self.dom_any or self._dom_matches(day, length, first_weekday)
        dow = self.dow_any or self._dow_matches(day, length, first_weekday)
        if self.dom_any or self.dow_any or self.both:
            return dom and dow
        return dom or dow

    def _dom_matches(self, day: int, length: int, first_weekday: int) -> bool:
        if day in self.dom or (self.dom_last and day == length):
            return True
        if self.dom_last_weekday and day == _last_weekday(length, first_weekday):
            return True
        return self.dom_nearest_weekday is not None and day == _nearest_weekday(
            self.dom_nearest_weekday, length, first_weekday)

    def _dow_matches(self, day: int, length: int, first_weekday: int) -> bool:
        weekday = (first_weekday + day - 1) % 7
        if weekday in self.dow:
            return True
        if weekday in self.dow_last and day + 7 > length:
            return True
        return (weekday, (day + 6) // 7) in self.dow_nth


def _weekday_of(day: int, first_weekday: int) -> int:
    return (first_weekday + day - 1) % 7


def _last_weekday(length: int, first_weekday: int) -> int:
    weekday = _weekday_of(length, first_weekday)
    return length - 2 if weekday == 0 else length - 1 if weekday == 6 else length


def _nearest_weekday(target: int, length: int, first_weekday: int) -> int | None:
    """Quartz's W: Saturday moves to Friday and Sunday to Monday, never out of the month (1W on a
    Saturday is Monday the 3rd; the last day on a Sunday is the Friday before). A day past the
    month's end (31W in April) matches nothing that month."""
    if target > length:
        return None
    weekday = _weekday_of(target, first_weekday)
    if weekday == 6:
        return target + 2 if target == 1 else target - 1
    if weekday == 0:
        return target - 2 if target == length else target + 1
    return target


@dataclass(frozen=True)
class CronSpec:
    dialect: Dialect
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    months: tuple[int, ...]
    days: DaySpec
    years: tuple[int, ...] | None = None  # AWS: the allowed years; None is every year
    # Debian's DST rule reads a job on the wall clock when neither its minute nor its hour field
    # starts with '*' (a job "at a fixed time"), and in real time otherwise.
    fixed_time: bool = True
    _day_cache: dict = field(default_factory=dict, compare=False, repr=False)

    def days_of(self, year: int, month: int) -> tuple[int, ...]:
        first_weekday = (calendar.weekday(year, month, 1) + 1) % 7  # calendar: Monday is 0
        length = calendar.monthrange(year, month)[1]
        key = (length, first_weekday)
        if key not in self._day_cache:
            self._day_cache[key] = self.days.days(length, first_weekday)
        return self._day_cache[key]

    def can_match(self) -> bool:
        """Some minute of some allowed year matches. Without a year field every (length, first
        weekday) pair a month can have occurs within 28 years, so the 28 answers decide it."""
        if self.years is not None:
            return any(self.days_of(year, month) for year in self.years for month in self.months)
        lengths = {length for month in self.months for length in ((28, 29) if month == 2 else
                                                                    (calendar.monthrange(2001, month)[1],))}
        return any(self.days.days(length, first) for length in lengths for first in range(7))


def next_wall_match(spec: CronSpec, after: datetime) -> datetime | None:
    """The first naive wall time (whole minute) strictly after `after` that `spec` matches, or
    None when there is none up to the end of time."""
    start = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    year, month, day, hour, minute = start.year, start.month, start.day, start.hour, start.minute
    last_year = spec.years[-1] if spec.years is not None else LAST_YEAR_SEARCHED
    years = spec.years[bisect_left(spec.years, year):] if spec.years is not None else range(year, last_year + 1)
    for y in years:
        if y > LAST_YEAR_SEARCHED:
            return None
        same_year = y == year
        for m in spec.months[bisect_left(spec.months, month) if same_year else 0:]:
            same_month = same_year and m == month
            days = spec.days_of(y, m)
            for d in days[bisect_left(days, day) if same_month else 0:]:
                same_day = same_month and d == day
                for h in spec.hours[bisect_left(spec.hours, hour) if same_day else 0:]:
                    same_hour = same_day and h == hour
                    minutes = spec.minutes[bisect_left(spec.minutes, minute) if same_hour else 0:]
                    if minutes:
                        return datetime(y, m, d, h, minutes[0])
    return None


# --- parsing ---------------------------------------------------------------------------------

def _bad(text: str, what: str) -> UnprocessableRequest:
    return UnprocessableRequest.for_field(FIELD, f"'{text}': {what}")


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    name_base: int = 0  # the number of names[0]
    max_step: int | None = None  # AWS (Quartz): a step past the field's span is refused, not read as "once"
    wraps: bool = False  # legacy reading only: a backwards range wraps around, as croniter read it


_DEBIAN_FIELDS = (
    _Field("minute", 0, 59), _Field("hour", 0, 23), _Field("day-of-month", 1, 31),
    _Field("month", 1, 12, MONTH_NAMES, 1), _Field("day-of-week", 0, 7, DAY_NAMES, 0),
)
_AWS_FIELDS = (
    _Field("minutes", 0, 59, max_step=59), _Field("hours", 0, 23, max_step=23),
    _Field("day-of-month", 1, 31, max_step=31), _Field("month", 1, 12, MONTH_NAMES, 1, max_step=12), _Field("day-of-week", 1, 7, DAY_NAMES, 1),
    _Field("year", *AWS_YEARS),
)


def _value(token: str, spec: _Field, text: str) -> int:
    upper = token.upper()
    if upper in spec.names:
        return spec.names.index(upper) + spec.name_base
    if not _NUMBER.fullmatch(token):
        expected = f"{spec.low}-{spec.high}" + (f" or {spec.names[0]}-{spec.names[-1]}" if spec.names else "")
        raise _bad(text, f"'{token}' is not a {spec.name} value ({expected})")
    value = int(token)
    if not spec.low <= value <= spec.high:
        raise _bad(text, f"{value} is outside the {spec.name} field's {spec.low}-{spec.high}")
    return value


def _values(term: str, spec: _Field, text: str) -> set[int]:
    """One list element: `*`, `N`, `N-M`, each optionally `/step`; `N/step` runs from N to the
    field's end. A range is read as written: `N-N` is N alone (the reading of Debian cron and of
    AWS; croniter widened it to the whole field). A range that runs backwards (`5-1`) is refused:
    cronsim refuses it, and wrapping it silently would be a guess."""
    body, slash, step_text = term.partition("/")
    step = 1
    if slash:
        if not _NUMBER.fullmatch(step_text) or int(step_text) == 0:
            raise _bad(text, f"'{term}': a step in the {spec.name} field is a whole number of 1 or more")
        step = int(step_text)
        if spec.max_step is not None and step > spec.max_step:
            raise _bad(text, f"'{term}': a step in the {spec.name} field is at most {spec.max_step}")
    if body == "*":
        low, high = spec.low, spec.high
    elif "-" in body:
        first, _, last = body.partition("-")
        low, high = _value(first, spec, text), _value(last, spec, text)
        if high < low and spec.wraps:
            return set(range(low, spec.high + 1, step)) | set(range(spec.low, high + 1, step))
        if high < low:
            raise _bad(text, f"'{term}': a range in the {spec.name} field runs from low to high; "
                             f"write {first}-{spec.high},{spec.low}-{last} for one that wraps around")
    else:
        low = _value(body, spec, text)
        high = spec.high if slash else low
    return set(range(low, high + 1, step))


def _list(field_text: str, spec: _Field, text: str) -> set[int]:
    values: set[int] = set()
    for term in field_text.split(","):
        if not term:
            raise _bad(text, f"an empty element in the {spec.name} field")
        values |= _values(term, spec, text)
    return values


def _sorted(values: set[int]) -> tuple[int, ...]:
    return tuple(sorted(values))


def _cached(parse):
    """Parsing is pure; the tick computes next fires for the same few expressions over and over."""
    return lru_cache(maxsize=4096)(parse)


def _legacy(fields: tuple[_Field, ...]) -> tuple[_Field, ...]:
    return tuple(replace(spec, wraps=True, max_step=None) for spec in fields)


_DEBIAN_LEGACY = _legacy(_DEBIAN_FIELDS)
_AWS_LEGACY = _legacy(_AWS_FIELDS[:5]) + (replace(_AWS_FIELDS[5], high=LAST_YEAR_SEARCHED),)


@_cached
def parse_debian(expression: str, legacy: bool = False) -> CronSpec:
    """minute hour day-of-month month day-of-week, as Debian cron (and cronsim) read them.

    `legacy` reads a schedule stored before this grammar as it was accepted then (croniter
    wrapped a backwards range, `L5` was the last Friday): a stored job keeps firing instead of
    failing the tick. New input is never read this way."""
    specs = _DEBIAN_LEGACY if legacy else _DEBIAN_FIELDS
    fields = expression.split()
    if len(fields) != 5:
        raise _bad(expression, f"has {len(fields)} fields; a cron schedule has 5: minute hour day-of-month "
                               "month day-of-week (for example '0 3 * * *')")
    minute, hour, dom, month, dow = fields
    if legacy:
        dow = re.sub(r"(?i)\bL([0-7])\b", r"\1L", dow)
    minutes = _list(minute, specs[0], expression)
    hours = _list(hour, specs[1], expression)
    months = _list(month, specs[3], expression)
    days = DaySpec(**_debian_dom(dom, expression, specs[2]), **_debian_dow(dow, expression, specs[4]),
                   both=dom.startswith("*") or dow.startswith("*"))
    spec = CronSpec(Dialect.DEBIAN, _sorted(minutes), _sorted(hours), _sorted(months), days,
                    fixed_time=not minute.startswith("*") and not hour.startswith("*"))
    return _matching(spec, expression)


def _debian_dom(text: str, expression: str, spec: _Field) -> dict:
    days: set[int] = set()
    last = last_weekday = False
    for term in text.split(","):
        upper = term.upper()
        if upper == "L":
            last = True
        elif upper == "LW":
            last_weekday = True
        elif term:
            days |= _values(term, spec, expression)
        else:
            raise _bad(expression, "an empty element in the day-of-month field")
    return {"dom": frozenset(days), "dom_last": last, "dom_last_weekday": last_weekday}


def _debian_dow(text: str, expression: str, spec: _Field) -> dict:
    days: set[int] = set()
    last: set[int] = set()
    nth: set[tuple[int, int]] = set()
    for term in text.split(","):
        upper = term.upper()
        if "#" in term:
            day, _, occurrence = term.partition("#")
            nth.add((_value(day, spec, expression) % 7, _occurrence(occurrence, term, expression)))
        elif upper.endswith("L") and _NUMBER.fullmatch(term[:-1]):
            last.add(_value(term[:-1], spec, expression) % 7)
        elif term:
            days |= {day % 7 for day in _values(term, spec, expression)}  # 7 is Sunday too
        else:
            raise _bad(expression, "an empty element in the day-of-week field")
    return {"dow": frozenset(days), "dow_last": frozenset(last), "dow_nth": frozenset(nth)}


def _occurrence(text: str, term: str, expression: str) -> int:
    if not _NUMBER.fullmatch(text) or not 1 <= int(text) <= 5:
        raise _bad(expression, f"'{term}' needs an occurrence 1-5 after '#'")
    return int(text)


@_cached
def parse_aws(inner: str, legacy: bool = False) -> CronSpec:
    """The six fields inside cron(...), as EventBridge documents them. `legacy` reads a schedule
    stored before this grammar as it was accepted then ('/' and several '#' items in
    day-of-week, years past 2199, backwards ranges wrapped); new input is never read this way."""
    specs = _AWS_LEGACY if legacy else _AWS_FIELDS
    text = f"cron({inner})"
    fields = inner.split()
    if len(fields) != 6:
        raise _bad(text, f"has {len(fields)} fields; AWS cron has 6: minutes hours day-of-month month "
                         "day-of-week year")
    minute, hour, dom, month, dow, year = fields
    if (dom == "?") == (dow == "?"):
        raise _bad(text, "use '?' in exactly one of day-of-month and day-of-week")
    if "/" in dow and not legacy:
        raise _bad(text, "the day-of-week field takes , - * ? L # and no '/' step (AWS's field table)")
    days = DaySpec(**_aws_dom(dom, text, specs[2]), **_aws_dow(dow, text, specs[4], legacy))
    years = None if year == "*" else _sorted(_list(year, specs[5], text))
    spec = CronSpec(Dialect.AWS, _sorted(_list(minute, specs[0], text)), _sorted(_list(hour, specs[1], text)),
                    _sorted(_list(month, specs[3], text)), days, years=years)
    return _matching(spec, text)


_AWS_NEAREST_WEEKDAY = re.compile(r"([0-9]{1,2})W", re.IGNORECASE)


def _aws_dom(text: str, expression: str, spec: _Field) -> dict:
    upper = text.upper()
    if upper == "?":
        return {"dom": frozenset(), "dom_any": True}
    if upper == "L":
        return {"dom": frozenset(), "dom_last": True}
    if upper == "LW":
        return {"dom": frozenset(), "dom_last_weekday": True}
    if nearest := _AWS_NEAREST_WEEKDAY.fullmatch(text):
        return {"dom": frozenset(), "dom_nearest_weekday": _value(nearest.group(1), spec, expression)}
    if "L" in upper or "W" in upper:
        # Quartz, whose grammar AWS's follows: L, LW and nW stand alone, never in a list or range.
        raise _bad(expression, "in day-of-month, L, LW and nW (such as 15W) stand alone")
    return {"dom": frozenset(_list(text, spec, expression))}


def _aws_dow(text: str, expression: str, spec: _Field, legacy: bool = False) -> dict:
    upper = text.upper()
    if upper == "?":
        return {"dow_any": True}
    if upper == "L":  # L alone is the last day of the week: Saturday
        return {"dow": frozenset({6})}
    if "#" in text and legacy:
        nth = {(_value(day, spec, expression) - 1, _occurrence(k, item, expression))
               for item in text.split(",") for day, _, k in [item.partition("#")]}
        return {"dow": frozenset(), "dow_nth": frozenset(nth)}
    if "#" in text:
        if "," in text:  # AWS: "3#1,6#3" is two expressions and not valid
            raise _bad(expression, "with '#', the day-of-week field holds that one expression only")
        day, _, occurrence = text.partition("#")
        return {"dow": frozenset(), "dow_nth": frozenset({(_value(day, spec, expression) - 1,
                                                            _occurrence(occurrence, text, expression))})}
    if upper.endswith("L"):
        if "," in text or "-" in text:
            raise _bad(expression, "in day-of-week, nL (such as 6L, the last Friday) stands alone")
        return {"dow": frozenset(), "dow_last": frozenset({_value(text[:-1], spec, expression) - 1})}
    return {"dow": frozenset(day - 1 for day in _list(text, spec, expression))}


def _matching(spec: CronSpec, text: str) -> CronSpec:
    if not spec.can_match():
        raise _bad(text, "never matches a date")
    return spec


def normalized(expression: str) -> str:
    return " ".join(expression.split())
