"""The web console in a real browser (Debian's Chromium, headless, driven through ChromeDriver):
a key typed in, the jobs listed, a job paused with a reason, and a job whose name is a script tag
shown as text. Screenshots go to $JOBSCHED_SCREENSHOTS (docs/ keeps the README's), else a temp dir."""
import json
import os
import urllib.request
from pathlib import Path

import pytest

from jobsched.local.__main__ import boot
from jobsched.local.runtime import Options

from .webdriver import CHROMEDRIVER, CHROMIUM, Browser

EVIL = "<script>alert(1)</script>"


def call(runtime, method, path, body=None):
    request = urllib.request.Request(runtime.api_url + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": "Bearer k1", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


@pytest.fixture
def stack(tmp_path):
    saved = dict(os.environ)
    runtime, _, _ = boot(Options(port=0, segments=2, workdir=tmp_path / "local"), [("tenant-1", "k1")],
                         progress=lambda text: None)
    try:
        yield runtime
    finally:
        runtime.stop()
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def browser():
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail("Debian's chromium and chromium-driver are needed (make test installs them)")
    driver = Browser()
    try:
        yield driver
    finally:
        driver.quit()


def test_the_console_lists_jobs_pauses_one_with_a_reason_and_shows_names_as_text(stack, browser, tmp_path):
    shots = Path(os.environ.get("JOBSCHED_SCREENSHOTS") or tmp_path)
    target = {"type": "HTTP", "url": "http://127.0.0.1:9/x"}
    report = call(stack, "POST", "/v1/jobs", {"name": "nightly-report", "type": "CRON", "schedule": "0 3 * * *",
                                              "timezone": "Europe/Paris", "target": target,
                                              "tags": {"team": "data"}})
    call(stack, "POST", "/v1/jobs", {"name": EVIL, "type": "CRON", "schedule": "*/15 * * * *", "target": target})
    call(stack, "POST", "/v1/jobs", {"name": "etl", "type": "RATE", "schedule": "PT1H", "tags": {"team": "data"},
                                     "steps": [{"name": "extract", "target": target},
                                               {"name": "load", "target": target, "dependsOn": ["extract"]}]})

    browser.get(stack.api_url + "/console")
    browser.wait_for(lambda: "Enter an API key" in browser.text(browser.find("#status")))
    browser.type(browser.find("#key"), "k1")
    browser.click(browser.find("#use-key"))
    links = browser.wait_for(lambda: len(browser.find_all("a.job-link")) == 3 and browser.find_all("a.job-link"))
    names = [browser.text(link) for link in links]
    assert sorted(names) == sorted(["nightly-report", EVIL, "etl"])  # the script tag is text
    assert browser.alert_text() is None  # and it never ran
    assert browser.script("return document.querySelectorAll('main script').length") == 0
    assert browser.script("return sessionStorage.getItem('jobsched.apiKey')") == "k1"
    assert "k1" not in browser.script("return location.href + document.cookie")  # never in a URL or a cookie
    browser.screenshot(shots / "console-jobs.png")

    browser.click(next(link for link, name in zip(links, names) if name == "nightly-report"))
    state = browser.wait_for(lambda: browser.text(browser.find("#job-state")) == "ACTIVE" and browser.find("#job-state"))
    assert len(browser.wait_for(lambda: browser.find_all("#next-fires li"))) == 10  # the next ten fire instants
    assert browser.wait_for(lambda: browser.text(browser.find("#job-stats"))).startswith(
        "0 fires, 0 succeeded, 0 failed, 0 dead, 0 skipped")  # its last day, from GET .../stats
    browser.screenshot(shots / "console-job.png")
    browser.type(browser.find("#pause-reason"), "maintenance window")
    browser.click(browser.find("#pause"))
    browser.wait_for(lambda: browser.text(browser.find("#job-state")) == "PAUSED")
    assert browser.text(browser.find("#job-paused-reason")) == "maintenance window"
    assert state
    job = call(stack, "GET", f"/v1/jobs/{report['jobId']}")
    assert (job["state"], job["pausedReason"]) == ("PAUSED", "maintenance window")
    browser.screenshot(shots / "console-job-paused.png")


def test_the_console_is_served_with_a_content_security_policy(stack):
    with urllib.request.urlopen(stack.api_url + "/console", timeout=10) as response:
        policy = response.headers["Content-Security-Policy"]
        page = response.read().decode()
    assert "script-src 'self'" in policy and "default-src 'none'" in policy and "unsafe-inline" not in policy
    assert "<script src=\"console/console.js\"" in page and "onclick" not in page
