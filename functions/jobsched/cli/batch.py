"""`jobsched jobs create --file jobs.jsonl`: one job request a line, sent as batches of up to 100
(POST /v1/jobs/batch). Each batch goes with an Idempotency-Key of its own, so a batch repeated
after a lost answer creates nothing twice; the jobs a batch answers 429 (this second's creates are
used up) or 503 are sent again, alone, after a pause, a few times."""
from __future__ import annotations

import json
import time
import uuid
from typing import Callable

from jobsched.cli.client import ApiError, Client

BATCH_SIZE = 100  # the API's largest batch
# A batch's body stays under the API's bound (5 MB) with room for the envelope.
BATCH_BYTES = 4 * 1024 * 1024
RETRIED_STATUSES = (429, 503)
RETRIES = 5


class JsonLinesError(ValueError):
    pass


def is_json_lines(path: str, text: str) -> bool:
    """A `.jsonl` file, or text that is not one JSON value but a JSON object a line."""
    if path.endswith(".jsonl"):
        return True
    try:
        json.loads(text)
        return False
    except ValueError:
        return len([line for line in text.splitlines() if line.strip()]) > 1


def read_json_lines(text: str) -> list[tuple[int, dict]]:
    """(line number, job request) for each non-blank line; a line that is not a JSON object names
    its number."""
    jobs = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            job = json.loads(line)
        except ValueError as exc:
            raise JsonLinesError(f"line {number}: not JSON: {exc}") from None
        if not isinstance(job, dict):
            raise JsonLinesError(f"line {number}: a job request must be a JSON object")
        jobs.append((number, job))
    if not jobs:
        raise JsonLinesError("no job requests in the file")
    return jobs


def batches(jobs: list[tuple[int, dict]]) -> list[list[tuple[int, dict]]]:
    """Consecutive groups of at most BATCH_SIZE jobs and BATCH_BYTES of body."""
    out: list[list[tuple[int, dict]]] = [[]]
    size = 0
    for entry in jobs:
        length = len(json.dumps(entry[1]))
        if out[-1] and (len(out[-1]) == BATCH_SIZE or size + length > BATCH_BYTES):
            out.append([])
            size = 0
        out[-1].append(entry)
        size += length
    return out


def send(client: Client, jobs: list[tuple[int, dict]], sleep: Callable[[float], None] | None = None,
         new_key: Callable[[], str] = lambda: uuid.uuid4().hex) -> list[dict]:
    """Every job sent; returns per line {"line", "status", "job" | "error"} in the file's order."""
    sleep = sleep or time.sleep
    results: dict[int, dict] = {}
    pending = jobs
    for attempt in range(RETRIES + 1):
        again: list[tuple[int, dict]] = []
        for group in batches(pending):
            answer = _call(client, group, new_key(), sleep)
            for (line, job), result in zip(group, answer["results"]):
                if result["status"] in RETRIED_STATUSES and attempt < RETRIES:
                    again.append((line, job))
                else:
                    results[line] = {"line": line, **{k: v for k, v in result.items() if k != "index"}}
        if not again:
            break
        sleep(1.0 + attempt)  # a later second: the creates-per-second quota starts again
        pending = again
    return [results[line] for line, _ in jobs]


def _call(client: Client, group: list[tuple[int, dict]], key: str, sleep) -> dict:
    """One batch; a lost answer or a 503 for the whole batch is repeated with the same key."""
    for attempt in range(RETRIES + 1):
        try:
            return client.call("POST", "/v1/jobs/batch", {"jobs": [job for _, job in group]},
                               headers={"Idempotency-Key": key})
        except ApiError as error:
            if error.status not in (0, 503) or attempt == RETRIES:
                raise
            sleep(1.0 + attempt)
    raise AssertionError("unreachable")
