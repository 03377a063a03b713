"""The HTTP target connects to the very address it checked (issue 26): a name that answers a public
address to the check and a loopback one afterwards (DNS rebinding) never reaches loopback, over
HTTP or HTTPS; and a name whose addresses mix a public and a blocked one never falls back to the
blocked one. No traffic leaves the machine: connections to anything but loopback are refused by
the fake network below."""
import socket

import pytest

from jobsched.adapters.http_target import HttpTargetInvoker
from jobsched.domain.executions import ExecutionStatus

from .test_targets import DISPATCH, Recorder, http, job_for, server  # noqa: F401 (server: a fixture)

PUBLIC = "93.184.216.34"  # passes the address check; never actually connected to


class FakeNetwork:
    """Name resolution and connections for one test. `answers[i]` is what the i-th resolution of
    `host` returns (the last one repeats): a rebinding resolver answers differently the second
    time. A connection resolves its address as the real one does, is recorded, and is refused
    unless it goes to loopback."""

    def __init__(self, monkeypatch, host: str, answers: list[list[str]]) -> None:
        self.resolutions = 0
        self.connected: list[str] = []
        real_getaddrinfo, real_create_connection = socket.getaddrinfo, socket.create_connection

        def getaddrinfo(name, port, *args, **kwargs):
            if name != host:
                return real_getaddrinfo(name, port, *args, **kwargs)
            answer = answers[min(self.resolutions, len(answers) - 1)]
            self.resolutions += 1
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port)) for address in answer]

        def create_connection(address, timeout=None, *args, **kwargs):
            resolved = socket.getaddrinfo(address[0], address[1], type=socket.SOCK_STREAM)[0][4][0]
            self.connected.append(resolved)
            if resolved != "127.0.0.1":
                raise ConnectionRefusedError(f"{resolved} refused the connection")
            return real_create_connection((resolved, address[1]), timeout, *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
        monkeypatch.setattr(socket, "create_connection", create_connection)


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_the_call_connects_to_the_checked_address_though_the_name_answers_loopback_later(server, monkeypatch,
                                                                                        scheme):
    # Given a name that resolves to a public address, then (rebound) to loopback where a server listens
    network = FakeNetwork(monkeypatch, "rebind.example", [[PUBLIC], ["127.0.0.1"]])
    # When a job calls it
    outcome = HttpTargetInvoker(allow_private=False).invoke(
        job_for(http(f"{scheme}://rebind.example:{port_of(server)}/x")), DISPATCH, 1)
    # Then the one connection made goes to the address that was checked, and loopback is never reached
    assert network.connected == [PUBLIC]
    assert Recorder.seen == []
    assert outcome.status is ExecutionStatus.FAILED and "refused the connection" in outcome.error, outcome


def test_a_name_with_a_public_and_a_blocked_address_never_falls_back_to_the_blocked_one(server, monkeypatch):
    # Given a name whose public address refuses connections and whose other address is loopback
    network = FakeNetwork(monkeypatch, "mixed.example", [[PUBLIC, "127.0.0.1"]])
    # When a job calls it
    outcome = HttpTargetInvoker(allow_private=False).invoke(
        job_for(http(f"http://mixed.example:{port_of(server)}/x")), DISPATCH, 1)
    # Then only the public address is tried: the call fails rather than reach loopback
    assert network.connected == [PUBLIC]
    assert Recorder.seen == []
    assert outcome.status is ExecutionStatus.FAILED, outcome
