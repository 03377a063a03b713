"""The web console: plain HTML, CSS and JavaScript served by the API function itself at /console
(so it works in `make run` and after `cdk deploy` with nothing more to deploy). The page calls the
public API with the key the user types, kept for the browser tab only (sessionStorage), never in
a URL or a cookie. Every value it shows is set as text (never as HTML), and the page is served
with a Content-Security-Policy that allows its own script and style files and nothing inline."""
from __future__ import annotations

from importlib import resources

FILES = {
    "index.html": "text/html; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",  # linked by the page: no request for /favicon.ico, no 404
}
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                           "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CONTENT_SECURITY_POLICY, "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "no-referrer", "Cache-Control": "no-cache"}


def asset(name: str) -> tuple[str, str] | None:
    """(content type, text) of one of the console's files, or None."""
    if name not in FILES:
        return None
    return FILES[name], resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
