"""What the console's browser tests share: one local stack and one headless Chromium per test
module (each takes seconds to start), driven through the official Selenium bindings with Debian's
chromium and chromium-driver. The paths are given explicitly, so Selenium Manager never runs (it
would try to download a driver, and there is no internet here)."""
from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from jobsched.local import strict_aws
from jobsched.local.__main__ import boot
from jobsched.local.runtime import Options

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# One tenant per test of a module (a module shares one stack): each test sees only its own jobs.
TENANTS = [(f"tenant-{n}", f"k{n}") for n in range(1, 7)]


def call(runtime, method, path, body=None, key="k1"):
    request = urllib.request.Request(runtime.api_url + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def call_status(runtime, method, path, body=None, key="k1"):
    """(status, body) of a call that may be refused."""
    try:
        return 200, call(runtime, method, path, body, key)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    saved = dict(os.environ)
    runtime, _, _ = boot(Options(port=0, segments=2, workdir=tmp_path_factory.mktemp("local")), TENANTS,
                         progress=lambda text: None)
    try:
        yield runtime
    finally:
        runtime.stop()
        os.environ.clear()
        os.environ.update(saved)  # the runtime pointed AWS_ENDPOINT_URL at its emulator


@pytest.fixture(autouse=True)
def _strict_layer_for_each_test(request):
    """The suite's conftest turns the strict AWS layer off after every test; a stack shared by a
    module turns its own back on for the next one."""
    if "stack" in request.fixturenames:
        strict_aws.activate(request.getfixturevalue("stack").strict)
    yield


def new_chromium(width: int = 1280, height: int = 900) -> webdriver.Chrome:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail("Debian's chromium and chromium-driver are needed (make test installs them)")
    os.environ["SE_OFFLINE"] = "true"  # should Selenium Manager run after all: never the network
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--window-size={width},{height}", "--lang=en-US"):
        options.add_argument(argument)
    return webdriver.Chrome(service=webdriver.ChromeService(executable_path=CHROMEDRIVER), options=options)


@pytest.fixture(scope="module")
def browser():
    driver = new_chromium()
    try:
        yield driver
    finally:
        driver.quit()


def screenshots(tmp_path) -> Path:
    """$JOBSCHED_SCREENSHOTS (docs/ keeps the guide's), else the test's temp dir."""
    return Path(os.environ.get("JOBSCHED_SCREENSHOTS") or tmp_path)


def wait_for(driver, predicate, seconds: float = 15.0):
    """predicate(driver)'s first truthy value; an element redrawn under the driver is retried."""
    return WebDriverWait(driver, seconds, poll_frequency=0.1,
                         ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: predicate())


def find(driver, css):
    return driver.find_element(By.CSS_SELECTOR, css)


def find_all(driver, css):
    return driver.find_elements(By.CSS_SELECTOR, css)


def text_of(driver, css) -> str:
    found = find_all(driver, css)
    return found[0].text if found else ""


def alert_text(driver) -> str | None:
    try:
        return driver.switch_to.alert.text
    except NoAlertPresentException:
        return None


def sign_in(driver, base_url: str, key: str = "k1", page: str = "") -> None:
    """The console with a fresh tab state, the key typed in, then `page` (a #hash) opened."""
    driver.get(base_url + "/console/console.css")  # the origin, without the page's script running
    driver.execute_script("sessionStorage.clear()")
    driver.get(base_url + "/console")
    wait_for(driver, lambda: "Enter an API key" in text_of(driver, "#status"))
    find(driver, "#key").send_keys(key)
    find(driver, "#use-key").click()
    wait_for(driver, lambda: driver.execute_script("return sessionStorage.getItem('jobsched.apiKey')") == key)
    if page:
        driver.get(base_url + "/console#" + page)


class ApiProxy:
    """A loopback server in front of the local stack that answers some routes itself: the test
    server for a route the stack may not have yet (the occurrence ledger), serving the shape
    ../shared/API.md documents. Everything else, the console's files included, is forwarded."""

    def __init__(self, upstream: str) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        self.upstream = upstream
        self.routes: dict = {}  # path regex -> fn(path, query, headers) -> (status, body)
        self.seen: list[dict] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # noqa: D102 - quiet
                pass

            def _answer(self):
                import re
                from urllib.parse import parse_qs, urlsplit
                parts = urlsplit(self.path)
                for pattern, answer in proxy.routes.items():
                    if re.fullmatch(pattern, parts.path):
                        proxy.seen.append({"path": parts.path, "query": parse_qs(parts.query),
                                           "authorization": self.headers.get("Authorization")})
                        code, body = answer(parts.path, parse_qs(parts.query))
                        self._send(code, {"Content-Type": "application/json"}, json.dumps(body).encode())
                        return
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() in ("authorization", "content-type", "if-match", "idempotency-key")}
                request = urllib.request.Request(proxy.upstream + self.path, data=data, method=self.command,
                                                 headers=headers)
                try:
                    with urllib.request.urlopen(request, timeout=30) as response:
                        self._send(response.status, dict(response.headers), response.read())
                except urllib.error.HTTPError as exc:
                    self._send(exc.code, dict(exc.headers), exc.read())

            def _send(self, code, headers, body):
                self.send_response(code)
                for name, value in headers.items():
                    if name.lower() not in ("content-length", "connection", "transfer-encoding", "date", "server"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = _answer

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
