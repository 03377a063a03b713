"""A small HTTP client of the jobsched API (standard library only)."""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any


@dataclass
class ApiError(Exception):
    status: int  # 0: the API could not be reached
    code: str
    message: str
    details: list

    def __str__(self) -> str:
        detail = "; ".join(f"{d.get('field')}: {d.get('message')}" for d in self.details if isinstance(d, dict))
        text = f"{self.message}" + (f" ({detail})" if detail and detail not in self.message else "")
        if not self.status:
            return text
        return f"{self.status} {self.code}: {text}"


class Client:
    def __init__(self, base_url: str, api_key: str | None, timeout: float = 15.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout

    def call(self, method: str, path: str, body: Any = None, query: dict | None = None,
             headers: dict | None = None) -> Any:
        url = self.base_url + path
        if query:
            clean = {k: v for k, v in query.items() if v is not None}
            if clean:
                url += "?" + urllib.parse.urlencode(clean, doseq=True)  # a list: the parameter repeated
        all_headers = {"Accept": "application/json", **(headers or {})}
        if self.api_key:
            all_headers["Authorization"] = f"Bearer {self.api_key}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            all_headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, method=method, headers=all_headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                error = json.loads(raw)["error"]
                raise ApiError(exc.code, error.get("code", "ERROR"), error.get("message", ""),
                               error.get("details", [])) from None
            except (ValueError, KeyError, TypeError):
                raise ApiError(exc.code, "HTTP_ERROR", raw.decode("utf-8", "replace")[:300] or exc.reason, []) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ApiError(0, "UNREACHABLE", f"cannot reach {self.base_url}: {reason}", []) from None
        return json.loads(raw) if raw else None
