"""Tenants' signing secrets: one item per tenant beside its jobs (sort key "signing#secrets"),
the secrets encrypted with the stack's KMS key (encryption context: tenant and purpose), so that
reading the table alone never yields a secret. Without a key (the stack's `encryption` is
`aws-owned`) they are kept as the table keeps everything: encrypted at rest by DynamoDB."""
from __future__ import annotations

import base64

from botocore.exceptions import ClientError

from jobsched.store.dynamo import _condition_lost

SIGNING_ITEM = "signing#secrets"


class SigningSecretsStore:
    def __init__(self, dynamodb, table_name: str, kms=None, key_id: str = "") -> None:
        self._table = dynamodb.Table(table_name)
        self._kms = kms
        self._key_id = key_id

    def _seal(self, tenant_id: str, secret: str) -> str:
        if not self._key_id:
            return "plain:" + secret
        answer = self._kms.encrypt(KeyId=self._key_id, Plaintext=secret.encode(),
                                   EncryptionContext={"tenantId": tenant_id, "purpose": "signing"})
        return "kms:" + base64.b64encode(answer["CiphertextBlob"]).decode()

    def _open(self, tenant_id: str, sealed: str | None) -> str | None:
        if not sealed:
            return None
        kind, _, text = sealed.partition(":")
        if kind == "plain":
            return text
        answer = self._kms.decrypt(CiphertextBlob=base64.b64decode(text),
                                   EncryptionContext={"tenantId": tenant_id, "purpose": "signing"})
        return answer["Plaintext"].decode()

    def rotate(self, tenant_id: str, secret: str, now_ms: int, previous_until_ms: int) -> bool:
        """Make `secret` current; the current one becomes the previous one until
        `previous_until_ms`. Conditional on the current one read (two rotations at once: one
        wins, the other is repeated on what it left). Returns whether there was a previous one."""
        for _ in range(5):
            item = self._table.get_item(Key={"tenantId": tenant_id, "jobId": SIGNING_ITEM},
                                        ConsistentRead=True).get("Item")
            current = item.get("current") if item else None
            values = {":new": self._seal(tenant_id, secret), ":now": now_ms}
            expression = "SET #cur = :new, createdMs = :now"
            if current:
                expression += ", previous = :old, previousUntilMs = :until"
                values.update({":old": current, ":until": previous_until_ms})
                condition = "#cur = :old"
            else:
                expression += " REMOVE previous, previousUntilMs"
                condition = "attribute_not_exists(#cur)"
            try:
                self._table.update_item(Key={"tenantId": tenant_id, "jobId": SIGNING_ITEM},
                                        UpdateExpression=expression, ConditionExpression=condition,
                                        ExpressionAttributeNames={"#cur": "current"},
                                        ExpressionAttributeValues=values)
                return current is not None
            except ClientError as exc:
                if not _condition_lost(exc, "rotated meanwhile"):
                    raise
        raise RuntimeError("the signing secret kept changing; try again")

    def secrets(self, tenant_id: str) -> tuple[str | None, str | None, int | None]:
        """(current, previous, previous valid until ms), decrypted."""
        item = self._table.get_item(Key={"tenantId": tenant_id, "jobId": SIGNING_ITEM}).get("Item")
        if not item:
            return None, None, None
        until = item.get("previousUntilMs")
        return (self._open(tenant_id, item.get("current")), self._open(tenant_id, item.get("previous")),
                int(until) if until is not None else None)
