"""The EMF lines the functions print (what CloudWatch would ingest), kept by the local stack in
a file, and summarized: lateness percentiles and outcome counts (`jobsched stats`)."""
from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Iterable, TextIO

EMF_MARKER = '{"_aws"'


class EmfTee:
    """Appends the EMF lines to a file and passes every other line through to the console; the
    EMF lines reach the console too only when `echo_metrics` (JOBSCHED_VERBOSE), since several a
    second would flood the window."""

    def __init__(self, console: TextIO, path: Path, echo_metrics: bool = False) -> None:
        self._console = console
        self._path = path
        self._echo = echo_metrics
        self._lock = threading.Lock()
        self._partial = ""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")

    def write(self, text: str) -> int:
        with self._lock:
            self._partial += text
            *lines, self._partial = self._partial.split("\n")
            emf = [line for line in lines if line.startswith(EMF_MARKER)]
            shown = lines if self._echo else [line for line in lines if not line.startswith(EMF_MARKER)]
            if emf:
                with self._path.open("a") as handle:
                    handle.write("\n".join(emf) + "\n")
            if shown:
                self._console.write("\n".join(shown) + "\n")
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self._partial and not self._partial.startswith(EMF_MARKER):
                self._console.write(self._partial)  # a prompt or progress without its newline yet
                self._partial = ""
        self._console.flush()

    def __getattr__(self, name):
        return getattr(self._console, name)


def summarize(lines: Iterable[str]) -> dict:
    """Lateness p50/p99/max and a count per metric, from EMF lines."""
    lateness: list[float] = []
    counts: Counter = Counter()
    for line in lines:
        if not line.startswith(EMF_MARKER):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        for directive in record["_aws"].get("CloudWatchMetrics", []):
            for metric in directive.get("Metrics", []):
                name = metric["Name"]
                values = record.get(name)
                values = values if isinstance(values, list) else [values]
                if name == "FireLatenessMs":
                    lateness.extend(float(v) for v in values)
                else:
                    counts[name] += sum(float(v) for v in values if v is not None)
    ordered = sorted(lateness)

    def pct(p: float):
        if not ordered:
            return None
        return ordered[min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))]

    return {"lateness": {"count": len(ordered), "p50": pct(50), "p99": pct(99), "max": ordered[-1] if ordered else None},
            "counts": {k: int(v) for k, v in sorted(counts.items())}}
