"""Exclusion calendars in the web console, in a real browser (Debian's Chromium, headless): the
calendars view lists each calendar with its dates, and a job's page names its excluded calendars
and shows the occurrences they skip among its next fire times."""
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

from .test_console import browser, call, stack  # noqa: F401 - the fixtures, shared

EVIL = "<img src=x onerror=alert(1)>"


def test_the_console_shows_calendars_and_a_jobs_excluded_dates(stack, browser, tmp_path):  # noqa: F811
    shots = Path(os.environ.get("JOBSCHED_SCREENSHOTS") or tmp_path)
    # Given a calendar holding tomorrow and the day after (UTC), and a daily job that excludes it
    today = datetime.now(timezone.utc).date()
    excluded = [(today + timedelta(days=d)).isoformat() for d in (1, 2)]
    call(stack, "PUT", "/v1/calendars/team-offsite", {"description": EVIL, "dates": excluded})
    call(stack, "PUT", "/v1/calendars/empty", {"dates": []})
    job = call(stack, "POST", "/v1/jobs", {"name": "daily-sync", "type": "CRON", "schedule": "0 12 * * *",
                                           "target": {"type": "HTTP", "url": "http://127.0.0.1:9/x"},
                                           "excludeCalendars": ["team-offsite"]})

    browser.get(stack.api_url + "/console#calendars")
    browser.wait_for(lambda: "Enter an API key" in browser.text(browser.find("#status")))
    browser.type(browser.find("#key"), "k1")
    browser.click(browser.find("#use-key"))
    # When the calendars view is open: each calendar with its dates, the description as text
    names = browser.wait_for(lambda: len(browser.find_all(".calendar-name")) == 2 and browser.find_all(".calendar-name"))
    assert [browser.text(n) for n in names] == ["empty", "team-offsite"]
    dates = [browser.text(d) for d in browser.find_all(".calendar-dates")]
    assert dates == ["(no dates)", " ".join(excluded)]
    assert browser.alert_text() is None
    assert EVIL in browser.text(browser.find("#calendars-table"))
    browser.screenshot(shots / "console-calendars.png")

    # And the job's page names the calendar and marks the two days it skips
    browser.get(stack.api_url + f"/console#job/{job['jobId']}")
    named = browser.wait_for(lambda: browser.find_all("#job-excluded-calendars"))
    assert browser.text(named[0]) == "team-offsite"
    skipped = browser.wait_for(lambda: len(browser.find_all("#next-fires li.skipped")) == 2
                               and browser.find_all("#next-fires li.skipped"))
    assert [browser.text(s) for s in skipped] == [f"{d}T12:00:00Z skipped (EXCLUDED)" for d in excluded]
    assert len(browser.find_all("#next-fires li")) == 12  # ten fire times and the two skipped
    browser.screenshot(shots / "console-job-calendars.png")
