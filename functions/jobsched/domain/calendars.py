"""Exclusion calendars: named sets of dates on which a tenant's recurring jobs do not fire.

A job lists the calendars it excludes (`excludeCalendars`); an occurrence whose date, read in the
job's time zone at its nominal instant (before jitter), is in one of them is recorded SKIPPED with
reason EXCLUDED instead of running. Plain Python: the hand-off asks `is_excluded` with the dates it
read once per tick run (service/calendars.py)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Callable, Iterable, Mapping

from jobsched.domain.errors import FieldProblem, InvalidRequest, UnprocessableRequest
from jobsched.domain.jobs import Job, JobState
from jobsched.domain.schedule import load_zone, to_datetime, to_ms

MAX_CALENDAR_DATES = 1000
MAX_CALENDARS_PER_JOB = 5
MAX_DESCRIPTION_CHARS = 1024
# A calendar's name is part of a path and of a sort key: letters, digits, '-', '_' (fullmatch).
CALENDAR_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)
EXCLUDED = "EXCLUDED"


@dataclass(frozen=True)
class Calendar:
    tenant_id: str
    name: str
    description: str
    dates: tuple[str, ...]  # "YYYY-MM-DD", sorted, distinct
    created_ms: int
    updated_ms: int
    version: int = 1


def check_calendar_name(name: str, field_name: str = "name") -> str:
    if not isinstance(name, str) or not CALENDAR_NAME.fullmatch(name):
        raise InvalidRequest(f"{field_name}: 1 to 64 of A-Z, a-z, 0-9, '-', '_'",
                             [FieldProblem(field_name, "1 to 64 of A-Z, a-z, 0-9, '-', '_'")])
    return name


def normalized_dates(values: Iterable[str]) -> tuple[str, ...]:
    """Calendar dates as given (each a real day, YYYY-MM-DD), sorted and without repeats; 422
    naming `dates.<i>` for the first that is not one."""
    values = list(values)
    if len(values) > MAX_CALENDAR_DATES:
        raise UnprocessableRequest.for_field("dates", f"at most {MAX_CALENDAR_DATES} dates, got {len(values)}")
    for i, value in enumerate(values):
        if not _DATE.fullmatch(value):
            raise UnprocessableRequest.for_field(f"dates.{i}", "a date written YYYY-MM-DD")
        try:
            day = date.fromisoformat(value)
        except ValueError:
            raise UnprocessableRequest.for_field(f"dates.{i}", f"{value} is not a day of the calendar") from None
        if day.year < 1970:
            raise UnprocessableRequest.for_field(f"dates.{i}", "no job fires before 1970")
    return tuple(sorted(set(values)))


def checked_job_calendars(names: Iterable[str]) -> tuple[str, ...]:
    """A job's excludeCalendars: valid names, at most MAX_CALENDARS_PER_JOB, each once (order kept,
    so that `excludeCalendars.<i>` in an answer names the entry the client sent)."""
    names = list(names)
    if len(names) > MAX_CALENDARS_PER_JOB:
        raise UnprocessableRequest.for_field("excludeCalendars", f"at most {MAX_CALENDARS_PER_JOB} calendars")
    for i, name in enumerate(names):
        if not isinstance(name, str) or not CALENDAR_NAME.fullmatch(name):
            raise UnprocessableRequest.for_field(f"excludeCalendars.{i}", "1 to 64 of A-Z, a-z, 0-9, '-', '_'")
        if name in names[:i]:
            raise UnprocessableRequest.for_field(f"excludeCalendars.{i}", f"{name} is listed twice")
    return tuple(names)


def local_date(instant_ms: int, zone_name: str) -> str:
    """The date, YYYY-MM-DD, of an instant on the wall clock of a time zone."""
    return to_datetime(instant_ms).astimezone(load_zone(zone_name)).date().isoformat()


def is_excluded(nominal_ms: int, zone_name: str, names: Iterable[str],
                dates_of: Mapping[str, frozenset[str] | None]) -> bool:
    """Whether an occurrence falls on a date of one of the named calendars (a calendar missing
    from `dates_of`, or None there, excludes nothing: it cannot be deleted while a job names it)."""
    names = tuple(names)
    if not names:
        return False
    day = local_date(nominal_ms, zone_name)
    return any(day in (dates_of.get(name) or ()) for name in names)


def first_not_excluded(job: Job, nominal_ms: int | None, excludes: Callable[[Job, int], bool]) -> int | None:
    """The job's first occurrence from `nominal_ms` on that `excludes` (the hand-off's rule,
    CalendarCache.excludes) lets fire: what nextFireAt shows. An excluded occurrence's whole date
    is passed over at once, so the walk takes a step per excluded date, at most one per date its
    calendars can hold; None past that (or when the schedule ends first)."""
    zone = load_zone(job.spec.schedule.timezone)
    for _ in range(MAX_CALENDAR_DATES * MAX_CALENDARS_PER_JOB + 1):
        if nominal_ms is None or not excludes(job, nominal_ms):
            return nominal_ms
        next_day = to_datetime(nominal_ms).astimezone(zone).date() + timedelta(days=1)
        nominal_ms = job.spec.schedule.next_fire_after(to_ms(datetime.combine(next_day, time(0), tzinfo=zone)) - 1)
    return None


def calendars_held(job: Job | None) -> tuple[str, ...]:
    """The calendars a job counts in (their reference counts): those it names, until it is
    CANCELLED. A COMPLETED job keeps its references until it is deleted, which cancels it."""
    if job is None or job.state is JobState.CANCELLED:
        return ()
    return job.spec.exclude_calendars
