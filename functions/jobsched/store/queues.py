"""SQS lanes: dispatches go out in batches of 10, the batches in parallel."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from jobsched.domain.executions import Dispatch
from jobsched.domain.jobs import Priority

SQS_BATCH = 10
SQS_MAX_DELAY_SECONDS = 900


class SendFailed(RuntimeError):
    """Some messages could not be sent after a retry; the caller must not mark them handed off."""


@dataclass(frozen=True)
class Outgoing:
    priority: Priority
    dispatch: Dispatch
    delay_seconds: int


class LaneQueues:
    def __init__(self, sqs, lane_urls: dict[Priority, str], parallelism: int = 8) -> None:
        self._sqs = sqs
        self._urls = lane_urls
        self._parallelism = parallelism

    def send(self, outgoing: list[Outgoing]) -> int:
        """Send every message or raise SendFailed. Returns the number of SendMessageBatch calls."""
        batches: list[tuple[str, list[Outgoing]]] = []
        for priority in Priority:
            lane = [o for o in outgoing if o.priority is priority]
            for start in range(0, len(lane), SQS_BATCH):
                batches.append((self._urls[priority], lane[start:start + SQS_BATCH]))
        if len(batches) <= 1:
            for url, batch in batches:
                self._send_batch(url, batch)
        else:
            with ThreadPoolExecutor(max_workers=min(self._parallelism, len(batches))) as pool:
                list(pool.map(lambda b: self._send_batch(*b), batches))
        return len(batches)

    def _send_batch(self, url: str, batch: list[Outgoing]) -> None:
        entries = {
            str(i): {
                "Id": str(i),
                "MessageBody": o.dispatch.to_json(),
                "DelaySeconds": max(0, min(SQS_MAX_DELAY_SECONDS, o.delay_seconds)),
            }
            for i, o in enumerate(batch)
        }
        for _ in range(2):
            answer = self._sqs.send_message_batch(QueueUrl=url, Entries=list(entries.values()))
            failed = {f["Id"] for f in answer.get("Failed", [])}
            entries = {k: v for k, v in entries.items() if k in failed}
            if not entries:
                return
        raise SendFailed(f"{len(entries)} messages not accepted by {url}")
