"""API Gateway's Lambda authorizer step, as the template configures it (the HTTP API's REQUEST
authorizer: infra stack.py), for the local stack's API adapter (local/runtime.py) and the tests.

For a request whose route needs the authorizer (every path but the template's routes without
one), API Gateway answers 401 {"message":"Unauthorized"} itself when the identity source (the
Authorization header) is missing; else it takes the answer cached for that header value within
the authorizer's TTL, or invokes the authorizer function (payload 2.0) and caches its answer;
`isAuthorized` false is 403 {"message":"Forbidden"}, an authorizer that fails is 500; true passes
the request on with the answer's context in requestContext.authorizer (as the payload 1.0
integration's event carries it). Only then is the API function invoked ("Control access to HTTP
APIs with AWS Lambda authorizers": identity sources, caching)."""
from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import urlsplit

UNAUTHORIZED = (401, {"Content-Type": "application/json"}, json.dumps({"message": "Unauthorized"}).encode())
FORBIDDEN = (403, {"Content-Type": "application/json"}, json.dumps({"message": "Forbidden"}).encode())
FAILED = (500, {"Content-Type": "application/json"}, json.dumps({"message": "Internal Server Error"}).encode())


@dataclass
class GatewayAuthorizer:
    """`invoke`: the authorizer function (a local Function's invoke); `now_ms`: the clock its cache
    runs on; `public`: (method, path regex) of the routes without the authorizer; `header`: the
    identity source's header (lower case); `ttl_ms`: the cache's TTL."""
    invoke: Callable[[dict], dict]
    now_ms: Callable[[], int]
    public: tuple[tuple[str, re.Pattern], ...]
    header: str = "authorization"
    ttl_ms: int = 0
    invocations: int = 0  # the authorizer's invocations (tests)
    _cache: dict[str, tuple[dict, int]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_template(cls, template: dict, invoke: Callable[[dict], dict],
                      now_ms: Callable[[], int]) -> "GatewayAuthorizer | None":
        """The template's HTTP API authorizer (None: the template has none, the API checks keys itself)."""
        resources = template.get("Resources", {})
        authorizers = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::ApiGatewayV2::Authorizer"]
        if not authorizers:
            return None
        [props] = authorizers
        [source] = props["IdentitySource"]
        header = re.fullmatch(r"\$request\.header\.(.+)", source)
        if header is None:
            raise ValueError(f"the local API models header identity sources only, not {source!r}")
        public = []
        for resource in resources.values():
            route = resource.get("Properties", {})
            if resource["Type"] == "AWS::ApiGatewayV2::Route" and route.get("AuthorizationType", "NONE") == "NONE" \
                    and route["RouteKey"] != "$default":
                method, path = route["RouteKey"].split(" ", 1)
                pattern = re.escape(path).replace(r"\{", "{").replace(r"\}", "}")
                pattern = re.sub(r"\{[^}/]+\+\}", ".+", pattern)
                public.append((method, re.compile(re.sub(r"\{[^}/]+\}", "[^/]+", pattern))))
        return cls(invoke, now_ms, tuple(public), header.group(1).lower(),
                   int(props.get("AuthorizerResultTtlInSeconds", 0)) * 1000)

    def needs(self, method: str, path: str) -> bool:
        """The route a request takes has the authorizer (the $default route has it)."""
        return not any(m in (method, "ANY") and p.fullmatch(path) for m, p in self.public)

    def authorize(self, event: dict) -> tuple[int, dict, bytes] | None:
        """None: the request goes on to the API function, with the authorizer's context added to
        `event`; else API Gateway's own answer. `event`: the integration's event (payload 1.0)."""
        path = urlsplit(event.get("path") or "/").path
        if not self.needs(event["httpMethod"], path):
            return None
        identity = next((v for k, v in (event.get("headers") or {}).items() if k.lower() == self.header), None)
        if not identity:
            return UNAUTHORIZED
        now = self.now_ms()
        with self._lock:
            cached = self._cache.get(identity)
        if cached is not None and cached[1] > now:
            answer = cached[0]
        else:
            try:
                answer = self.invoke(self._request(event, identity))
            except Exception:  # noqa: BLE001 - API Gateway answers 500 when its authorizer fails
                return FAILED
            finally:
                self.invocations += 1
            if not isinstance(answer, dict) or not isinstance(answer.get("isAuthorized"), bool):
                return FAILED
            if self.ttl_ms:
                with self._lock:
                    self._cache[identity] = (answer, now + self.ttl_ms)
        if not answer["isAuthorized"]:
            return FORBIDDEN
        event.setdefault("requestContext", {})["authorizer"] = dict(answer.get("context") or {})
        return None

    def _request(self, event: dict, identity: str) -> dict:
        """The authorizer's event (payload 2.0, REQUEST)."""
        return {"version": "2.0", "type": "REQUEST", "routeKey": "$default", "identitySource": [identity],
                "rawPath": event.get("path"),
                "headers": {k.lower(): v for k, v in (event.get("headers") or {}).items()},
                "queryStringParameters": event.get("queryStringParameters"),
                "requestContext": {"http": {"method": event["httpMethod"], "path": event.get("path")}}}
