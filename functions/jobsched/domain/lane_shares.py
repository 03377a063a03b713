"""Lane shares (issue 26, item 4): what one tenant, and one target host, may hold of a lane's
concurrency, so that a slow or hung partner delays only its own jobs.

A worker invocation holds one unit of its lane's concurrency (the event source mapping's
maximum concurrency) for as long as its slowest record runs. What a slow target stalls is
therefore invocations, not attempts: the bound counts the worker containers (one invocation at
a time each) that have an attempt of a tenant, or towards a host, in flight. A container takes
one slot per tenant and per host for as many of that tenant's records as it runs at once, so a
batch of ten records of one tenant costs one slot, not ten."""
from __future__ import annotations

import re
from urllib.parse import urlsplit

from jobsched.domain.jobs import Job, Priority, TargetType

# "HIGH=400,NORMAL=200,LOW=100": each lane's maximum concurrency (its event source mapping's).
_CAPS = re.compile(r"(?:HIGH|NORMAL|LOW)=[1-9][0-9]{0,5}(?:,(?:HIGH|NORMAL|LOW)=[1-9][0-9]{0,5})*")


def parse_caps(text: str) -> dict[Priority, int]:
    """ValueError unless `text` is a list of lane=cap pairs (fullmatch: no trailing newline)."""
    if not _CAPS.fullmatch(text):
        raise ValueError(f"expected LANE=cap pairs such as 'HIGH=400,NORMAL=200,LOW=100', got {text!r}")
    return {Priority(lane): int(cap) for lane, cap in (pair.split("=") for pair in text.split(","))}


def format_caps(caps: dict[str, int]) -> str:
    return ",".join(f"{lane}={cap}" for lane, cap in caps.items())


def share_of(cap: int, percent: int) -> int:
    """Slots out of a lane cap of `cap` at `percent` (0: no bound): at least one, rounded down, so
    below 100% another tenant keeps a unit of any lane of 2 or more (a cap is at least 2)."""
    if percent <= 0:
        return 0
    return max(1, cap * percent // 100)


def target_host(job: Job) -> str | None:
    """The host (and port) an HTTP attempt calls, lowercased; None for the other target types,
    which call AWS APIs that answer in milliseconds (their own quotas bound them)."""
    target = job.spec.target
    if target is None or target.type is not TargetType.HTTP:
        return None
    try:
        parts = urlsplit(str(target.config.get("url", "")))
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return f"{(parts.hostname or '').lower()}:{port}" if parts.hostname else None
