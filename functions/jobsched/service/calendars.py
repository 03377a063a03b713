"""Exclusion calendars: the API's use cases, and the cache a hand-off reads them through."""
from __future__ import annotations

from typing import Iterable

from jobsched.domain.calendars import check_calendar_name, is_excluded, normalized_dates
from jobsched.domain.calendars import Calendar
from jobsched.domain.clock import Clock
from jobsched.domain.errors import NotFound, UnprocessableRequest
from jobsched.domain.jobs import Job


class CalendarCache:
    """The dates of the calendars that one tick run's (or one API request's) jobs exclude. Each
    calendar is read at most once per run, by one BatchGetItem for the calendars a page names that
    were not read yet: a run whose jobs name no calendar reads none, and a herd of 30,000 jobs naming
    the same calendar reads it once (docs/architecture.md, "Exclusion calendars")."""

    def __init__(self, store) -> None:
        self._store = store
        self._dates: dict[tuple[str, str], frozenset[str] | None] = {}
        self.reads = 0  # BatchGetItem rounds made (tests count them)

    def load(self, jobs: Iterable[Job | None]) -> None:
        wanted = list(dict.fromkeys((job.tenant_id, name) for job in jobs if job is not None
                                    for name in job.spec.exclude_calendars if (job.tenant_id, name) not in self._dates))
        if not wanted:
            return
        self.reads += 1
        self._dates.update(self._store.dates_many(wanted))

    def excludes(self, job: Job, nominal_ms: int) -> bool:
        names = job.spec.exclude_calendars
        if not names:
            return False
        self.load([job])  # a job the page's load did not see (a chain's re-read): read once here
        return is_excluded(nominal_ms, job.spec.schedule.timezone, names,
                           {name: self._dates.get((job.tenant_id, name)) for name in names})


class CalendarsService:
    def __init__(self, stores, clock: Clock) -> None:
        self._calendars = stores.calendars
        self._clock = clock

    def put(self, tenant_id: str, name: str, description: str, dates: list[str]) -> Calendar:
        """Create or replace. Jobs that name it see the new dates from their next hand-off (each
        occurrence's about two minutes before it is due)."""
        check_calendar_name(name)
        return self._calendars.put(tenant_id, name, description, normalized_dates(dates), self._clock.now_ms())

    def get(self, tenant_id: str, name: str) -> Calendar:
        check_calendar_name(name)
        calendar = self._calendars.get(tenant_id, name)
        if calendar is None:
            raise NotFound(f"no calendar {name}")
        return calendar

    def list(self, tenant_id: str, limit: int, cursor: str | None):
        return self._calendars.list(tenant_id, limit, cursor)

    def delete(self, tenant_id: str, name: str) -> Calendar:
        check_calendar_name(name)
        return self._calendars.delete(tenant_id, name, self._clock.now_ms())

    def dates_for_preview(self, tenant_id: str, names: tuple[str, ...]) -> dict[str, frozenset[str] | None]:
        """A preview's calendars, each of which must exist (422 naming excludeCalendars.<i>)."""
        found = self._calendars.dates_many([(tenant_id, name) for name in names]) if names else {}
        for i, name in enumerate(names):
            if found.get((tenant_id, name)) is None:
                raise UnprocessableRequest.for_field(f"excludeCalendars.{i}", f"no calendar {name}")
        return {name: found[(tenant_id, name)] for name in names}
