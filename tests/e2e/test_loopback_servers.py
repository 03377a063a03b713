"""The local stack's own HTTP servers take a burst of calls (a second with dozens of jobs due)."""
import io
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from jobsched.local.echo import EchoServer


def test_the_echo_endpoint_answers_a_burst_of_concurrent_calls():
    echo = EchoServer(out=io.StringIO())
    try:
        def post(i: int) -> int:
            request = urllib.request.Request(f"{echo.url}/burst", data=b"{}", method="POST",
                                             headers={"X-Execution-Id": f"e{i}"})
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status

        with ThreadPoolExecutor(max_workers=80) as pool:
            statuses = list(pool.map(post, range(80)))
        assert statuses == [200] * 80
        assert sorted(c["executionId"] for c in echo.received) == sorted(f"e{i}" for i in range(80))
    finally:
        echo.stop()
