"""The deployment's alert topic (SNS): absence alerts for operators, beside each job's onFailure hook."""
from __future__ import annotations

import json

from botocore.exceptions import ClientError

from jobsched.domain.errors import DomainError


class AlertNotSent(DomainError):
    """SNS refused the publish (throttled, denied, or the topic is gone)."""
    code = "ALERT_NOT_SENT"


class AlertTopic:
    def __init__(self, sns, topic_arn: str) -> None:
        self._sns = sns
        self._arn = topic_arn

    def publish(self, alert: dict) -> None:
        """One message per alert (about 400 B of JSON, far below SNS's 256 KiB). Not idempotent:
        the caller publishes once, after the conditional mark it won (service/expectations.py)."""
        if not self._arn:
            return  # a deployment without the topic (tests of the domain alone): the hook and metric remain
        try:
            self._sns.publish(TopicArn=self._arn, Subject=f"jobsched {alert['alert']}"[:100],
                              Message=json.dumps(alert, separators=(",", ":")),
                              MessageAttributes={"alert": {"DataType": "String", "StringValue": alert["alert"]}})
        except ClientError as exc:
            raise AlertNotSent(f"alert topic: {exc.response.get('Error', {}).get('Code')}") from exc
