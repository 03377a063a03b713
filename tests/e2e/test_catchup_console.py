"""Catch-up that does not flood, in the console (a real browser): a job's page shows its misfire
policy, the object form with its bounds, the string form as before."""
import os
from pathlib import Path

from .test_console import browser, call, stack  # noqa: F401 - the fixtures
from .webdriver import WebDriverError

TARGET = {"type": "HTTP", "url": "http://127.0.0.1:9/x"}


def settled(read):
    """`read()`, or None while the page is being redrawn (an element replaced under the driver)."""
    try:
        return read()
    except WebDriverError:
        return None


def open_job(browser, stack, name):  # noqa: F811
    browser.get(stack.api_url + "/console#jobs")

    def click():
        for link in browser.find_all("a.job-link"):
            if browser.text(link) == name:
                browser.click(link)
                return True
        return False
    browser.wait_for(lambda: settled(click))
    browser.wait_for(lambda: settled(lambda: browser.text(browser.find("#job-name")) == name))


def policy_text(browser):  # noqa: F811
    return browser.wait_for(lambda: settled(lambda: browser.find_all("#job-misfire-policy")
                                            and browser.text(browser.find("#job-misfire-policy"))))


def test_the_job_page_shows_the_catch_up_policy(stack, browser, tmp_path):  # noqa: F811
    shots = Path(os.environ.get("JOBSCHED_SCREENSHOTS") or tmp_path)
    call(stack, "POST", "/v1/jobs", {"name": "every-minute", "type": "RATE", "schedule": "PT1M", "target": TARGET,
                                     "misfirePolicy": {"policy": "RUN_ALL", "maxCatchUp": 100,
                                                       "catchUpPerMinute": 10}})
    call(stack, "POST", "/v1/jobs", {"name": "plain", "type": "RATE", "schedule": "PT1M", "target": TARGET,
                                     "misfirePolicy": "SKIP"})
    browser.get(stack.api_url + "/console")
    browser.wait_for(lambda: "Enter an API key" in browser.text(browser.find("#status")))
    browser.type(browser.find("#key"), "k1")
    browser.click(browser.find("#use-key"))
    open_job(browser, stack, "every-minute")
    assert policy_text(browser) == ("RUN_ALL: the newest 100 missed run, 10 a minute; older ones are skipped "
                                    "(MISSED_WINDOW)")
    browser.screenshot(shots / "console-job-catch-up.png")
    open_job(browser, stack, "plain")
    assert policy_text(browser) == "SKIP"  # the string form, as before
