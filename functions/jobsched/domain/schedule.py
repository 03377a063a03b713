"""Schedules: when a job fires. All instants are epoch milliseconds (UTC).

`next_fire_after(after_ms)` answers the first fire instant strictly after `after_ms`, or None
when the schedule has no more. Recurring jobs always compute their next fire from the due
instant just handled, never from "now", so a late tick never shifts a schedule.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from enum import Enum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter

from jobsched.domain.aws_expressions import (
    is_aws_expression,
    last_year,
    rate_to_duration,
    translate_cron,
    year_allowed,
)
from jobsched.domain.errors import UnprocessableRequest

MS_PER_SECOND = 1000
MS_PER_MINUTE = 60 * MS_PER_SECOND
MIN_RATE_MS = MS_PER_SECOND
# A cron expression that matches nothing for this long is rejected (for example 30 February).
CRON_HORIZON_YEARS = 8


class ScheduleType(str, Enum):
    ONE_TIME = "ONE_TIME"
    DELAYED = "DELAYED"
    CRON = "CRON"
    RATE = "RATE"


def to_datetime(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def to_ms(instant: datetime) -> int:
    return int(instant.timestamp() * 1000)


def format_instant(ms: int | None) -> str | None:
    """RFC 3339 in UTC with a `Z`, millisecond precision when it is not whole seconds."""
    if ms is None:
        return None
    dt = to_datetime(ms)
    if ms % 1000:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_instant(value: str, field_name: str) -> int:
    """An RFC 3339 instant with an explicit offset (`Z` or `+hh:mm`)."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise UnprocessableRequest.for_field(
            field_name, f"'{value}' is not an RFC 3339 instant such as 2030-01-01T09:00:00Z"
        ) from None
    if dt.tzinfo is None:
        raise UnprocessableRequest.for_field(
            field_name, f"'{value}' has no UTC offset; add 'Z' or an offset such as +02:00"
        )
    return to_ms(dt)


def load_zone(name: str, field_name: str = "timezone") -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, IsADirectoryError):
        raise UnprocessableRequest.for_field(
            field_name, f"unknown time zone '{name}'; use an IANA name such as Europe/Paris"
        ) from None


_DURATION = re.compile(
    r"^P(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?"
    r"(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d{1,3})?)S)?)?$"
)


def parse_duration_ms(text: str, field_name: str = "schedule") -> int:
    """ISO 8601 duration in weeks, days, hours, minutes and seconds (`PT5M`, `P1D`, `PT0.5S`).

    Years and months are refused: their length varies, so a fixed rate cannot use them
    (a CRON schedule says "monthly")."""
    match = _DURATION.match(text.strip()) if text else None
    if not match or text.strip() in ("P", "PT") or text.strip().endswith("T"):
        raise UnprocessableRequest.for_field(
            field_name,
            f"'{text}' is not an ISO 8601 duration such as PT5M, PT1H or P1D "
            "(years and months are not fixed lengths; use a CRON schedule for them)",
        )
    parts = {k: v for k, v in match.groupdict().items() if v is not None}
    ms = (
        int(parts.get("w", 0)) * 7 * 86_400_000
        + int(parts.get("d", 0)) * 86_400_000
        + int(parts.get("h", 0)) * 3_600_000
        + int(parts.get("m", 0)) * MS_PER_MINUTE
        + round(float(parts.get("s", 0)) * 1000)
    )
    if ms < MIN_RATE_MS:
        raise UnprocessableRequest.for_field(field_name, f"'{text}' is shorter than the minimum rate of 1 second")
    return ms


def validate_cron(expression: str, field_name: str = "schedule") -> str:
    """A standard 5-field cron expression (minute hour day-of-month month day-of-week)."""
    fields = expression.split()
    if len(fields) != 5:
        raise UnprocessableRequest.for_field(
            field_name,
            f"'{expression}' has {len(fields)} fields; a cron schedule has 5: "
            "minute hour day-of-month month day-of-week (for example '0 3 * * *')",
        )
    if not croniter.is_valid(expression):
        raise UnprocessableRequest.for_field(field_name, f"'{expression}' is not a valid cron expression")
    return " ".join(fields)


@dataclass(frozen=True)
class Schedule:
    """A normalized schedule. Built by the factories below, which validate."""

    type: ScheduleType
    run_at_ms: int | None = None  # ONE_TIME and DELAYED: the single fire instant
    cron: str | None = None
    timezone: str = "UTC"
    period_ms: int | None = None  # RATE
    anchor_ms: int | None = None  # RATE: fires at anchor + k * period, k >= 0
    start_ms: int | None = None
    end_ms: int | None = None
    origin_ms: int = 0  # CRON without startAt: fires after this instant (its creation)
    text: str | None = None  # the `schedule` string as the client sent it (cron or duration)
    delay_seconds: int | None = None  # DELAYED, as the client sent it
    years: str | None = None  # CRON from an AWS cron() with a year field: "2030,2032-2034"

    @property
    def recurring(self) -> bool:
        return self.type in (ScheduleType.CRON, ScheduleType.RATE)

    def first_fire(self) -> int | None:
        """The first fire instant; for a one-shot schedule it may lie in the past (run at once)."""
        if not self.recurring:
            return self.run_at_ms
        lower = self.start_ms - 1 if self.start_ms is not None else None
        if self.type is ScheduleType.RATE:
            return self._bounded(self.anchor_ms)
        return self.next_fire_after(lower if lower is not None else self.origin_ms)

    def next_fire_after(self, after_ms: int) -> int | None:
        if self.type in (ScheduleType.ONE_TIME, ScheduleType.DELAYED):
            return self.run_at_ms if self.run_at_ms is not None and self.run_at_ms > after_ms else None
        if self.start_ms is not None and after_ms < self.start_ms - 1:
            after_ms = self.start_ms - 1
        if self.type is ScheduleType.RATE:
            assert self.anchor_ms is not None and self.period_ms is not None
            if after_ms < self.anchor_ms:
                candidate = self.anchor_ms
            else:
                candidate = self.anchor_ms + ((after_ms - self.anchor_ms) // self.period_ms + 1) * self.period_ms
            return self._bounded(candidate)
        return self._bounded(_next_cron(self.cron or "", load_zone(self.timezone), after_ms, self.years))

    def _bounded(self, candidate: int | None) -> int | None:
        if candidate is None:
            return None
        if self.end_ms is not None and candidate > self.end_ms:
            return None
        return candidate

    def to_item(self) -> dict:
        item = {
            "type": self.type.value,
            "runAtMs": self.run_at_ms,
            "cron": self.cron,
            "timezone": self.timezone,
            "periodMs": self.period_ms,
            "anchorMs": self.anchor_ms,
            "startMs": self.start_ms,
            "endMs": self.end_ms,
            "originMs": self.origin_ms,
            "text": self.text,
            "delaySeconds": self.delay_seconds,
            "years": self.years,
        }
        return {k: v for k, v in item.items() if v is not None}

    @classmethod
    def from_item(cls, item: dict) -> "Schedule":
        def opt_int(key: str) -> int | None:
            return int(item[key]) if item.get(key) is not None else None

        return cls(
            type=ScheduleType(item["type"]),
            run_at_ms=opt_int("runAtMs"),
            cron=item.get("cron"),
            timezone=item.get("timezone", "UTC"),
            period_ms=opt_int("periodMs"),
            anchor_ms=opt_int("anchorMs"),
            start_ms=opt_int("startMs"),
            end_ms=opt_int("endMs"),
            origin_ms=int(item.get("originMs", 0)),
            text=item.get("text"),
            delay_seconds=opt_int("delaySeconds"),
            years=item.get("years"),
        )


def _next_cron(expression: str, zone: ZoneInfo, after_ms: int, years: str | None = None) -> int | None:
    """Next instant strictly after `after_ms` whose wall time in `zone` matches `expression`.

    DST (croniter works on zone-aware datetimes): a wall time skipped by spring-forward fires
    at the end of the gap; when fall-back repeats an hour, an expression whose hour field is
    not `*` fires once, at the first pass (as cron does), while an every-hour expression keeps
    firing every real interval through the repeated hour."""
    start = to_datetime(after_ms).astimezone(zone)
    every_hour = expression.split()[1] == "*"
    iterator = croniter(expression, start)
    horizon = after_ms + CRON_HORIZON_YEARS * 366 * 86_400_000
    for _ in range(10_000):
        try:
            candidate = iterator.get_next(datetime)
        except CroniterBadDateError:  # matches no date at all (30 February)
            return None
        ms = to_ms(candidate)
        if ms > horizon:
            return None
        if ms <= after_ms:
            continue
        if not year_allowed(years, candidate.year):
            following = next((y for y in range(candidate.year + 1, (last_year(years) or 0) + 1)
                              if year_allowed(years, y)), None)
            if following is None:
                return None
            iterator = croniter(expression, datetime(following, 1, 1, tzinfo=zone) - timedelta(minutes=1))
            continue
        if not every_hour and _is_second_pass(candidate, zone):
            continue
        return ms
    return None


def _is_second_pass(instant: datetime, zone: ZoneInfo) -> bool:
    """True when this wall time also occurred an hour or so earlier (fall-back repeat)."""
    wall = instant.replace(tzinfo=None)
    first = wall.replace(tzinfo=zone, fold=0)
    second = wall.replace(tzinfo=zone, fold=1)
    if first.utcoffset() == second.utcoffset():
        return False
    return instant.astimezone(timezone.utc) == second.astimezone(timezone.utc)


# --- factories: validate and normalize; every error names its field ---------------------

def one_time_schedule(run_at_ms: int, text: str | None = None, tz: str = "UTC") -> Schedule:
    return Schedule(type=ScheduleType.ONE_TIME, run_at_ms=run_at_ms, text=text, timezone=tz)


def local_instant(local: str, tz: str, field_name: str) -> int:
    """A wall-clock date-time without offset (from at(...)), read in the given zone."""
    zone = load_zone(tz)
    try:
        naive = datetime.fromisoformat(local)
    except ValueError:
        raise UnprocessableRequest.for_field(field_name, f"'{local}' is not a date-time") from None
    return to_ms(naive.replace(tzinfo=zone))


def delayed_schedule(delay_seconds: int, created_ms: int) -> Schedule:
    if delay_seconds < 0:
        raise UnprocessableRequest.for_field("delaySeconds", "must be 0 or more")
    return Schedule(
        type=ScheduleType.DELAYED, run_at_ms=created_ms + delay_seconds * MS_PER_SECOND, delay_seconds=delay_seconds
    )


def cron_schedule(
    expression: str, tz: str, created_ms: int, start_ms: int | None = None, end_ms: int | None = None
) -> Schedule:
    load_zone(tz)
    _check_bounds(start_ms, end_ms)
    years = None
    standard = expression
    if is_aws_expression(expression):
        translated = translate_cron(expression)
        standard, years = translated.cron, translated.years
    schedule = Schedule(
        type=ScheduleType.CRON,
        cron=validate_cron(standard),
        years=years,
        timezone=tz,
        start_ms=start_ms,
        end_ms=end_ms,
        origin_ms=created_ms,
        text=" ".join(expression.split()),
    )
    if _next_cron(schedule.cron or "", load_zone(tz), created_ms, years) is None:
        raise UnprocessableRequest.for_field("schedule", f"'{expression}' never matches a date")
    return schedule


def rate_schedule(
    duration: str, created_ms: int, start_ms: int | None = None, end_ms: int | None = None
) -> Schedule:
    period = parse_duration_ms(rate_to_duration(duration) if is_aws_expression(duration) else duration)
    _check_bounds(start_ms, end_ms)
    anchor = start_ms if start_ms is not None else created_ms + period
    return Schedule(
        type=ScheduleType.RATE, period_ms=period, anchor_ms=anchor, start_ms=start_ms, end_ms=end_ms,
        text=duration.strip(),
    )


def _check_bounds(start_ms: int | None, end_ms: int | None) -> None:
    if start_ms is not None and end_ms is not None and end_ms <= start_ms:
        raise UnprocessableRequest.for_field("endAt", "must be after startAt")
