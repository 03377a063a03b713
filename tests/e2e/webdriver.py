"""A few lines of the W3C WebDriver protocol (JSON over HTTP to ChromeDriver): enough to drive
Debian's Chromium headless in the console's browser test, without a driver library."""
from __future__ import annotations

import base64
import json
import socket
import subprocess
import time
import urllib.error
import urllib.request

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Browser:
    def __init__(self, width: int = 1280, height: int = 900) -> None:
        port = _free_port()
        self._driver = subprocess.Popen([CHROMEDRIVER, f"--port={port}"], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        self._base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 20
        while True:
            try:
                if self._request("GET", "/status")["ready"]:
                    break
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if time.time() > deadline:
                self._driver.kill()
                raise RuntimeError("chromedriver did not start")
            time.sleep(0.1)
        options = {"binary": CHROMIUM, "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                                                "--disable-dev-shm-usage", f"--window-size={width},{height}"]}
        answer = self._request("POST", "/session", {"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:chromeOptions": options}}})
        self._session = f"/session/{answer['sessionId']}"

    def _request(self, method: str, path: str, body: dict | None = None):
        data = json.dumps(body if body is not None else {}).encode() if method == "POST" else None
        request = urllib.request.Request(self._base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read())["value"]
        except urllib.error.HTTPError as error:
            value = json.loads(error.read() or b"{}").get("value", {})
            raise WebDriverError(value.get("error", str(error.code)), value.get("message", "")) from None

    def _call(self, method: str, path: str, body: dict | None = None):
        return self._request(method, self._session + path, body)

    def get(self, url: str) -> None:
        self._call("POST", "/url", {"url": url})

    def find_all(self, css: str) -> list[str]:
        return [e[ELEMENT] for e in self._call("POST", "/elements", {"using": "css selector", "value": css})]

    def find(self, css: str) -> str:
        return self._call("POST", "/element", {"using": "css selector", "value": css})[ELEMENT]

    def click(self, element: str) -> None:
        self._call("POST", f"/element/{element}/click")

    def type(self, element: str, text: str) -> None:
        self._call("POST", f"/element/{element}/value", {"text": text})

    def text(self, element: str) -> str:
        return self._call("GET", f"/element/{element}/text")

    def script(self, source: str, *args):
        return self._call("POST", "/execute/sync", {"script": source, "args": list(args)})

    def alert_text(self) -> str | None:
        try:
            return self._call("GET", "/alert/text")
        except WebDriverError as error:
            if error.code == "no such alert":
                return None
            raise

    def screenshot(self, path) -> None:
        with open(path, "wb") as handle:
            handle.write(base64.b64decode(self._call("GET", "/screenshot")))

    def wait_for(self, predicate, seconds: float = 15.0):
        deadline = time.time() + seconds
        while True:
            try:
                value = predicate()
                if value:
                    return value
            except WebDriverError:
                pass
            if time.time() > deadline:
                raise TimeoutError("the page did not get there in time")
            time.sleep(0.1)

    def quit(self) -> None:
        try:
            self._request("DELETE", self._session)
        except Exception:  # noqa: BLE001 - closing anyway
            pass
        self._driver.terminate()
        self._driver.wait(10)


class WebDriverError(RuntimeError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message[:300]}")
        self.code = code
