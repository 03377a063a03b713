"""Exclusion calendars in the web console, in a real browser (Debian's Chromium, headless): the
calendars view lists each calendar with its dates, and a job's page names its excluded calendars
and shows the occurrences they skip among its next fire times."""
from datetime import datetime, timedelta, timezone

from .console_support import (  # noqa: F401 - the fixtures, shared
    _strict_layer_for_each_test, alert_text, browser, call, find_all, screenshots, sign_in, stack, text_of, wait_for)

EVIL = "<img src=x onerror=alert(1)>"


def test_the_console_shows_calendars_and_a_jobs_excluded_dates(stack, browser, tmp_path):  # noqa: F811
    shots = screenshots(tmp_path)
    # Given a calendar holding tomorrow and the day after (UTC), and a daily job that excludes it
    today = datetime.now(timezone.utc).date()
    excluded = [(today + timedelta(days=d)).isoformat() for d in (1, 2)]
    call(stack, "PUT", "/v1/calendars/team-offsite", {"description": EVIL, "dates": excluded})
    call(stack, "PUT", "/v1/calendars/empty", {"dates": []})
    job = call(stack, "POST", "/v1/jobs", {"name": "daily-sync", "type": "CRON", "schedule": "0 12 * * *",
                                           "target": {"type": "HTTP", "url": "http://127.0.0.1:9/x"},
                                           "excludeCalendars": ["team-offsite"]})

    sign_in(browser, stack.api_url, "k1", "calendars")
    # When the calendars view is open: each calendar with its dates, the description as text
    names = wait_for(browser, lambda: len(find_all(browser, ".calendar-name")) == 2
                     and find_all(browser, ".calendar-name"))
    assert [n.text for n in names] == ["empty", "team-offsite"]
    assert [d.text for d in find_all(browser, ".calendar-dates")] == ["(no dates)", " ".join(excluded)]
    assert alert_text(browser) is None
    assert EVIL in text_of(browser, "#calendars-table")
    browser.save_screenshot(str(shots / "console-calendars.png"))

    # And the job's page names the calendar and marks the two days it skips
    browser.get(stack.api_url + f"/console#job/{job['jobId']}")
    wait_for(browser, lambda: text_of(browser, "#job-excluded-calendars") == "team-offsite")
    skipped = wait_for(browser, lambda: len(find_all(browser, "#next-fires li.skipped")) == 2
                       and [s.get_attribute("data-at") + " " + s.get_attribute("data-note")
                            for s in find_all(browser, "#next-fires li.skipped")])
    assert skipped == [f"{d}T12:00:00Z skipped (EXCLUDED)" for d in excluded]
    assert len(find_all(browser, "#next-fires li")) == 12  # ten fire times and the two skipped
    browser.save_screenshot(str(shots / "console-job-calendars.png"))
