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
from functools import lru_cache
from importlib import resources
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from jobsched.domain.aws_expressions import aws_cron_fields, is_aws_expression, rate_to_duration
from jobsched.domain.cron import CronSpec, Dialect, next_wall_match, normalized, parse_aws, parse_debian
from jobsched.domain.errors import UnprocessableRequest

MS_PER_SECOND = 1000
MS_PER_MINUTE = 60 * MS_PER_SECOND
MIN_RATE_MS = MS_PER_SECOND
# The end of time: no instant the API accepts, stores or computes lies after it, and every
# schedule ends there. A year short of what RFC 3339 can print (9999-12-31T23:59:59Z), so that
# what is added to an accepted instant (jitter up to an hour, retries up to 7 days each, leases,
# timeouts) is still printable and storable. The beginning of time is the Unix epoch.
END_OF_TIME_MS = 253_370_764_800_000  # 9999-01-01T00:00:00Z
BEGINNING_OF_TIME_MS = 0  # 1970-01-01T00:00:00Z
# A job's jitterSec moves each fire up to this much after its nominal occurrence.
MAX_JITTER_SEC = 3600
# The last nominal occurrence of a recurring schedule: the most jitter before the end of time, so
# that no fire (jitter included) passes it, whatever the job's jitter.
LAST_OCCURRENCE_MS = END_OF_TIME_MS - MAX_JITTER_SEC * MS_PER_SECOND
# The longest fixed rate (about 10 years); a longer period is a one-time job.
MAX_RATE_MS = 3653 * 86_400_000


class ScheduleType(str, Enum):
    ONE_TIME = "ONE_TIME"
    DELAYED = "DELAYED"
    CRON = "CRON"
    RATE = "RATE"


def to_datetime(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def to_ms(instant: datetime) -> int:
    return _epoch_ms(instant)


def format_instant(ms: int | None) -> str | None:
    """RFC 3339 in UTC with a `Z` and a four-digit year, milliseconds when not whole seconds."""
    if ms is None:
        return None
    dt = to_datetime(ms)
    text = f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}"
    return text + (f".{ms % 1000:03d}Z" if ms % 1000 else "Z")


# RFC 3339 section 5.6 date-time: full-date "T" full-time, with a required offset. No ISO 8601
# week or ordinal dates, no basic format, no missing seconds, no leap second (60).
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))",
    re.ASCII,
)


def check_instant(ms: int, field_name: str) -> int:
    """Every instant the API takes lies between the beginning and the end of time."""
    if not BEGINNING_OF_TIME_MS <= ms <= END_OF_TIME_MS:
        raise UnprocessableRequest.for_field(
            field_name, "must lie between 1970-01-01T00:00:00Z and the end of time, 9999-01-01T00:00:00Z"
        )
    return ms


def parse_instant(value: str, field_name: str) -> int:
    """An RFC 3339 instant with an explicit offset (`Z` or `+hh:mm`), within the span of time."""
    match = _RFC3339.fullmatch(value) if isinstance(value, str) else None
    if not match:
        raise UnprocessableRequest.for_field(
            field_name, f"'{str(value)[:64]}' is not an RFC 3339 instant such as 2030-01-01T09:00:00Z"
        )
    year, month, day, hour, minute, second, fraction, zulu, sign, off_h, off_m = match.groups()
    try:
        if off_m is not None and (int(off_h) > 23 or int(off_m) > 59):
            raise ValueError("offset out of range")
        offset = timedelta(0) if zulu else (1 if sign == "+" else -1) * timedelta(hours=int(off_h), minutes=int(off_m))
        dt = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second),
                      tzinfo=timezone(offset))
    except ValueError:
        raise UnprocessableRequest.for_field(field_name, f"'{value[:64]}' is not a calendar date and time") from None
    millis = int((fraction or "0")[:3].ljust(3, "0"))
    return check_instant(_epoch_ms(dt) + millis, field_name)  # year 0000 already failed as a date


def _epoch_ms(dt: datetime) -> int:
    """Exact integer milliseconds (no float rounding) of an aware datetime."""
    delta = dt - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


@lru_cache(maxsize=1)
def iana_zones() -> frozenset[str]:
    """The IANA zone names a job may give: the tzdata package's list (the one the functions load
    their zones from), less "Factory" (no time of its own). A system's own files (`localtime`,
    `posixrules`, `posix/...`, `right/...`) are not zones a deployment would have too."""
    return frozenset(resources.files("tzdata").joinpath("zones").read_text().split()) - {"Factory"}


def checked_zone(name: str, field_name: str = "timezone") -> ZoneInfo:
    """A zone of new input (a job, a preview): an IANA name (iana_zones) that loads. A stored
    job's zone is only loaded (load_zone): one accepted before is not refused at its fire."""
    if name not in iana_zones():
        raise UnprocessableRequest.for_field(
            field_name, f"unknown time zone '{name[:64]}'; use an IANA name such as Europe/Paris")
    return load_zone(name, field_name)


def load_zone(name: str, field_name: str = "timezone") -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long for a file
        raise UnprocessableRequest.for_field(
            field_name, f"unknown time zone '{name}'; use an IANA name such as Europe/Paris"
        ) from None


_DURATION = re.compile(
    r"P(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?"
    r"(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d{1,3})?)S)?)?",
    re.ASCII,
)


def parse_duration_ms(text: str, field_name: str = "schedule") -> int:
    """ISO 8601 duration in weeks, days, hours, minutes and seconds (`PT5M`, `P1D`, `PT0.5S`).

    Years and months are refused: their length varies, so a fixed rate cannot use them
    (a CRON schedule says "monthly")."""
    match = _DURATION.fullmatch(text.strip()) if text else None
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
    if ms > MAX_RATE_MS:
        raise UnprocessableRequest.for_field(field_name, f"'{text}' is longer than the maximum rate of P3653D "
                                             "(about 10 years); use a ONE_TIME or CRON job")
    return ms


def validate_cron(expression: str, field_name: str = "schedule") -> str:
    """A standard 5-field cron expression (minute hour day-of-month month day-of-week), read as
    Debian cron reads it; refused (naming the field) when malformed or when it never matches."""
    parse_debian(normalized(expression))
    return normalized(expression)


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
    years: str | None = None  # CRON from an AWS cron() with a year field, as written: "2030/2"

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
        spec = self.cron_spec()
        return self._bounded(_next_cron(spec, load_zone(self.timezone), after_ms) if spec is not None else None)

    def cron_spec(self) -> CronSpec | None:
        """The parsed expression. An AWS cron() is read from its text in AWS's grammar (items stored
        before this reading kept a translated 5-field form in `cron`; the text is what was asked).
        A stored expression the grammar now refuses was accepted when it was stored: it is read as
        it was then, so that the job keeps firing and the tick never fails on it; None when even
        that reading finds nothing (the schedule has no more fires)."""
        aws = self.text is not None and is_aws_expression(self.text)
        expression = aws_cron_fields(self.text or "") if aws else (self.cron or "")
        parse = parse_aws if aws else parse_debian
        try:
            return parse(expression)
        except UnprocessableRequest:
            try:
                return parse(expression, legacy=True)
            except UnprocessableRequest:
                return None

    def _bounded(self, candidate: int | None) -> int | None:
        if candidate is None or candidate > LAST_OCCURRENCE_MS:
            return None
        # Fires only in [startAt, endAt): an occurrence at endAt itself is past the end.
        if self.end_ms is not None and candidate >= self.end_ms:
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


def _next_cron(spec: CronSpec, zone: ZoneInfo, after_ms: int) -> int | None:
    """Next instant strictly after `after_ms` whose wall time in `zone` matches `spec`, or None
    when there is none before the end of time. Two DST rules, by dialect (docs/architecture.md,
    "Time"):

    - AWS cron() follows EventBridge Scheduler: a wall time that does not exist (skipped by a
      spring-forward) does not fire; a wall time that a fall-back repeats fires once, at its first
      pass. So every matching wall time that exists fires exactly once.
    - 5-field cron follows Debian cron. An expression whose minute and hour fields are both fixed
      (neither starts with `*`) is read on the wall clock: a skipped wall time fires right after
      the jump (several skipped ones fire once), a repeated one fires once, at its first pass. An
      expression whose minute or hour field starts with `*` follows real time: it fires in the
      repeated hour a second time and not at all in the skipped one."""
    if spec.dialect is Dialect.AWS:
        return _next_existing_wall_match(spec, zone, after_ms)
    if zone.key == "UTC" or spec.fixed_time:
        return _next_wall_match(spec, zone, after_ms)
    return _next_real_match(spec, zone, after_ms)


def _local_wall(after_ms: int, zone: ZoneInfo) -> datetime:
    return to_datetime(after_ms).astimezone(zone).replace(tzinfo=None, fold=0)


def _next_existing_wall_match(spec: CronSpec, zone: ZoneInfo, after_ms: int) -> int | None:
    """AWS's rule: skipped wall times are passed over; a repeated one counts at its first pass
    only, so a search that starts inside the second pass moves on to the next wall time."""
    wall = _local_wall(after_ms, zone)
    while (match := next_wall_match(spec, wall)) is not None:
        local = match.replace(tzinfo=zone, fold=0)
        if not _is_imaginary(local) and to_ms(local) > after_ms:
            return to_ms(local)
        wall = match
    return None


def _next_wall_match(spec: CronSpec, zone: ZoneInfo, after_ms: int) -> int | None:
    """Debian, fixed-time expressions: the wall clock decides. A skipped wall time moves to the
    first real minute after the gap; a repeated one is taken at its first pass (fold 0)."""
    wall = _local_wall(after_ms, zone)
    while (match := next_wall_match(spec, wall)) is not None:
        ms = _wall_to_ms(match, zone)
        if ms > after_ms:
            return ms
        wall = match
    return None


def _wall_to_ms(wall: datetime, zone: ZoneInfo) -> int:
    """A wall time's instant: its first pass when repeated, the end of the gap when skipped."""
    local = wall.replace(tzinfo=zone, fold=0)
    while _is_imaginary(local):
        wall += timedelta(minutes=1)
        local = wall.replace(tzinfo=zone, fold=0)
    return to_ms(local)


def _is_imaginary(local: datetime) -> bool:
    return local.astimezone(timezone.utc).astimezone(local.tzinfo).replace(tzinfo=None) != local.replace(tzinfo=None)


def _next_real_match(spec: CronSpec, zone: ZoneInfo, after_ms: int) -> int | None:
    """Debian, wildcard expressions: walk real time in spans of one UTC offset. Inside a span the
    wall clock and real time move together, so the span's first wall match is its first fire;
    when the match lies past the span's end, the search starts again at the next span."""
    bound = after_ms  # fires lie strictly after `bound` ...
    inclusive = False  # ... or at it, once a span starts exactly there
    while bound <= END_OF_TIME_MS:
        offset = _offset_ms(zone, bound)
        wall = to_datetime(bound + offset).replace(tzinfo=None, microsecond=0)
        match = next_wall_match(spec, wall - timedelta(seconds=1) if inclusive else wall)
        if match is None:
            return None
        candidate = to_ms(match.replace(tzinfo=timezone.utc)) - offset
        change = _next_offset_change(zone, bound, candidate)
        if change is None:
            return candidate
        bound, inclusive = change, True
    return None


def _offset_ms(zone: ZoneInfo, ms: int) -> int:
    offset = to_datetime(ms).astimezone(zone).utcoffset()
    return int(offset.total_seconds() * 1000) if offset is not None else 0


def _next_offset_change(zone: ZoneInfo, start_ms: int, end_ms: int) -> int | None:
    """The first instant in (start_ms, end_ms] whose UTC offset differs from start_ms's, or None
    when the offset holds over the whole span. Zones change offset at most a few times a year,
    so a step of a day finds every change (no zone changes twice within a day)."""
    base = _offset_ms(zone, start_ms)
    low = start_ms
    while low < end_ms:
        high = min(low + 86_400_000, end_ms)
        if _offset_ms(zone, high) != base:
            while high - low > 1:
                middle = (low + high) // 2
                if _offset_ms(zone, middle) != base:
                    high = middle
                else:
                    low = middle
            return high
        low = high
    return None


# --- factories: validate and normalize; every error names its field ---------------------

def one_time_schedule(run_at_ms: int, text: str | None = None, tz: str = "UTC") -> Schedule:
    return Schedule(type=ScheduleType.ONE_TIME, run_at_ms=run_at_ms, text=text, timezone=tz)


def local_instant(local: str, tz: str, field_name: str) -> int:
    """A wall-clock date-time without offset (from at(...)), read in the given zone by AWS's DST
    rule: a repeated time is its first pass; a time that a spring-forward skips never happens, so
    it is refused here rather than accepted as a job that would never fire."""
    zone = checked_zone(tz)
    try:
        naive = datetime.strptime(local, "%Y-%m-%dT%H:%M:%S")
        if naive.year < 1970 or naive.year > 9998:
            raise ValueError("outside the span of time")
    except ValueError:
        raise UnprocessableRequest.for_field(field_name, f"'{local}' is not a date-time within 1970-9998") from None
    if _is_imaginary(naive.replace(tzinfo=zone, fold=0)):
        raise UnprocessableRequest.for_field(
            field_name, f"'{local}' does not exist in {tz}: daylight saving time skips it (AWS's rule skips "
            "such a time; give the time after the change)")
    return check_instant(to_ms(naive.replace(tzinfo=zone, fold=0)), field_name)


def delayed_schedule(delay_seconds: int, created_ms: int) -> Schedule:
    if delay_seconds < 0:
        raise UnprocessableRequest.for_field("delaySeconds", "must be 0 or more")
    return Schedule(
        type=ScheduleType.DELAYED, run_at_ms=created_ms + delay_seconds * MS_PER_SECOND, delay_seconds=delay_seconds
    )


def cron_schedule(
    expression: str, tz: str, created_ms: int, start_ms: int | None = None, end_ms: int | None = None
) -> Schedule:
    checked_zone(tz)
    _check_bounds(start_ms, end_ms)
    years = None
    if is_aws_expression(expression):
        fields = aws_cron_fields(expression)
        parse_aws(fields)  # refuses what AWS refuses, and what never matches
        cron = fields
        year = fields.split()[5]
        years = None if year == "*" else year
    else:
        cron = validate_cron(expression)
    schedule = Schedule(
        type=ScheduleType.CRON,
        cron=cron,
        years=years,
        timezone=tz,
        start_ms=start_ms,
        end_ms=end_ms,
        origin_ms=created_ms,
        text=normalized(expression),
    )
    spec = parse_aws(cron) if is_aws_expression(expression) else parse_debian(cron)  # strict: new input
    if _next_cron(spec, load_zone(tz), created_ms) is None:
        raise UnprocessableRequest.for_field("schedule", f"'{expression}' has no fire time before the end of time")
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
