"""A built-in echo endpoint for the tour: records and prints every call a job makes."""
from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler

from jobsched.local.events import LoopbackHTTPServer


class EchoServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, out=sys.stdout) -> None:
        self.received: list[dict] = []
        self._lock = threading.Lock()
        echo = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode("utf-8", "replace")
                call = {
                    "receivedMs": time.time_ns() // 1_000_000,
                    "path": self.path,
                    "executionId": self.headers.get("X-Execution-Id"),
                    "attempt": self.headers.get("X-Attempt"),
                    "body": body,
                }
                with echo._lock:
                    echo.received.append(call)
                stamp = time.strftime("%H:%M:%S", time.gmtime(call["receivedMs"] / 1000))
                print(f"[echo {stamp}.{call['receivedMs'] % 1000:03d}Z] {call['executionId']} "
                      f"attempt {call['attempt']}: {body[:200]}", file=out, flush=True)
                answer = json.dumps({"echoed": True, "executionId": call["executionId"]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            do_PUT = do_PATCH = do_POST  # noqa: N815

            def do_GET(self):  # noqa: N802
                with echo._lock:
                    answer = json.dumps(echo.received).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self._server = LoopbackHTTPServer((host, port), Handler)
        self.port = self._server.server_port
        self.url = f"http://{host}:{self.port}"
        threading.Thread(target=self._server.serve_forever, name="echo", daemon=True).start()

    def stop(self) -> None:
        self._server.shutdown()
