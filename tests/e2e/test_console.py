"""The web console in a real browser (Debian's Chromium, headless, driven by the official Selenium
bindings through Debian's ChromeDriver): a key typed in, the jobs listed, a job paused with a
reason, and a job whose name is a script tag shown as text. Screenshots go to
$JOBSCHED_SCREENSHOTS (docs/ keeps the guide's), else a temp dir."""
import re
import urllib.request

from .console_support import (  # noqa: F401 - fixtures
    _strict_layer_for_each_test, alert_text, browser, call, find, find_all, screenshots, sign_in, stack, text_of,
    wait_for)

EVIL = "<script>alert(1)</script>"


def test_the_console_lists_jobs_pauses_one_with_a_reason_and_shows_names_as_text(stack, browser, tmp_path):  # noqa: F811
    shots = screenshots(tmp_path)
    target = {"type": "HTTP", "url": "http://127.0.0.1:9/x"}
    report = call(stack, "POST", "/v1/jobs", {"name": "nightly-report", "type": "CRON", "schedule": "0 3 * * *",
                                              "timezone": "Europe/Paris", "target": target,
                                              "tags": {"team": "data"}})
    call(stack, "POST", "/v1/jobs", {"name": EVIL, "type": "CRON", "schedule": "*/15 * * * *", "target": target})
    call(stack, "POST", "/v1/jobs", {"name": "etl", "type": "RATE", "schedule": "PT1H", "tags": {"team": "data"},
                                     "steps": [{"name": "extract", "target": target},
                                               {"name": "load", "target": target, "dependsOn": ["extract"]}]})

    sign_in(browser, stack.api_url, "k1", "jobs")
    links = wait_for(browser, lambda: len(find_all(browser, "a.job-link")) == 3 and find_all(browser, "a.job-link"))
    names = [link.text for link in links]
    assert sorted(names) == sorted(["nightly-report", EVIL, "etl"])  # the script tag is text
    assert alert_text(browser) is None  # and it never ran
    assert browser.execute_script("return document.querySelectorAll('main script').length") == 0
    assert browser.execute_script("return sessionStorage.getItem('jobsched.apiKey')") == "k1"
    assert "k1" not in browser.execute_script("return location.href + document.cookie")  # never in a URL or a cookie
    browser.save_screenshot(str(shots / "console-jobs.png"))

    next(link for link, name in zip(links, names) if name == "nightly-report").click()
    wait_for(browser, lambda: text_of(browser, "#job-state") == "ACTIVE")
    assert len(wait_for(browser, lambda: find_all(browser, "#next-fires li"))) == 10  # the next ten fire instants
    assert wait_for(browser, lambda: text_of(browser, "#job-stats")).startswith(
        "0 fires, 0 succeeded, 0 failed, 0 dead, 0 skipped")  # its last day, from GET .../stats
    # The occurrence ledger: its answer, or "not available" on a stack without the route (never an error)
    ledger = wait_for(browser, lambda: (lambda t: t if t and t != "loading ..." else None)(
        text_of(browser, "#timeline-status")))
    assert ledger == "The occurrence ledger is not available on this deployment." or re.fullmatch(
        r"\d+ occurrences.*", ledger), ledger
    browser.save_screenshot(str(shots / "console-job.png"))
    find(browser, "#pause-reason").send_keys("maintenance window")
    find(browser, "#pause").click()
    wait_for(browser, lambda: text_of(browser, "#job-state") == "PAUSED")
    assert text_of(browser, "#job-paused-reason") == "maintenance window"
    job = call(stack, "GET", f"/v1/jobs/{report['jobId']}")
    assert (job["state"], job["pausedReason"]) == ("PAUSED", "maintenance window")
    browser.save_screenshot(str(shots / "console-job-paused.png"))


def test_the_console_is_served_with_a_content_security_policy(stack):  # noqa: F811
    with urllib.request.urlopen(stack.api_url + "/console", timeout=10) as response:
        policy = response.headers["Content-Security-Policy"]
        page = response.read().decode()
    assert "script-src 'self'" in policy and "default-src 'none'" in policy and "unsafe-inline" not in policy
    assert "<script src=\"console/console.js\"" in page and "onclick" not in page
