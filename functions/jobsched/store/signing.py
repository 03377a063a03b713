"""Tenants' signing secrets, encrypted with the stack's KMS key (encryption context: tenant and
purpose), so that reading the table alone never yields a secret. Without a key (the stack's
`encryption` is `aws-owned`) they are kept as the table keeps everything: encrypted at rest by
DynamoDB.

Items, in the Jobs table:
- the record (`tenantId`, `jobId = "signing#secrets"`): current and previous sealed secrets, the
  previous one's end of grace, a `version`; rotations are conditional writes on it;
- COPIES copies of it (`tenantId = "<tenant>#signing#<k>"`, `jobId = "signing#copy"`), each on a
  partition key of its own, written by the rotation before it answers. A worker reads one copy,
  strongly consistent, before every call: a rotation answered before the call is seen, and one
  tenant's call rate is spread over COPIES keys (docs/architecture.md, "Signed calls")."""
from __future__ import annotations

import base64
from dataclasses import dataclass

from botocore.exceptions import ClientError

from jobsched.store.dynamo import _condition_lost
SIGNING_ITEM = "signing#secrets"
COPY_ITEM = "signing#copy"
COPIES = 16
SIGNING_PURPOSE = "signing"  # the encryption context's purpose; the API may Encrypt only under it


class SigningUnavailable(Exception):
    """The secrets that sign a call could not be read or decrypted now (a throttle, a denial, a
    spent decrypt budget): the attempt fails and is retried under the job's policy."""


@dataclass(frozen=True)
class SealedSecrets:
    """A tenant's secrets as stored: sealed text ("kms:<base64>" or "plain:<secret>")."""
    version: int
    current: str
    previous: str | None
    previous_until_ms: int | None


def copy_key(tenant_id: str, k: int) -> dict:
    return {"tenantId": f"{tenant_id}#signing#{k}", "jobId": COPY_ITEM}


def _sealed(item: dict | None) -> SealedSecrets | None:
    if not item or not item.get("current"):
        return None
    until = item.get("previousUntilMs")
    return SealedSecrets(int(item.get("version", 0)), str(item["current"]), item.get("previous") or None,
                         int(until) if until is not None else None)


def _code(exc: ClientError) -> str:
    return exc.response.get("Error", {}).get("Code", "")


class SigningSecretsStore:
    def __init__(self, dynamodb, table_name: str, kms=None, key_id: str = "") -> None:
        self._table = dynamodb.Table(table_name)
        self._kms = kms
        self._key_id = key_id

    @staticmethod
    def _context(tenant_id: str) -> dict:
        return {"tenantId": tenant_id, "purpose": SIGNING_PURPOSE}

    def _seal(self, tenant_id: str, secret: str) -> str:
        if not self._key_id:
            return "plain:" + secret
        answer = self._kms.encrypt(KeyId=self._key_id, Plaintext=secret.encode(),
                                   EncryptionContext=self._context(tenant_id))
        return "kms:" + base64.b64encode(answer["CiphertextBlob"]).decode()

    def open(self, tenant_id: str, sealed: str) -> str:
        """The secret inside `sealed` (one KMS Decrypt when it was sealed with the key)."""
        kind, _, text = sealed.partition(":")
        if kind == "plain":
            return text
        if self._kms is None or not self._key_id:
            # Sealed with the stack's key by a deployment that had one: this one has none (deployed
            # since with `-c encryption=aws-owned`), so no secret of it can be opened here.
            raise SigningUnavailable("the secret is sealed with the stack's KMS key and this deployment has none "
                                     "(deploy with -c encryption=kms)")
        try:
            answer = self._kms.decrypt(CiphertextBlob=base64.b64decode(text),
                                       EncryptionContext=self._context(tenant_id))
        except ClientError as exc:
            raise SigningUnavailable(f"KMS Decrypt: {_code(exc)}") from exc
        return answer["Plaintext"].decode()

    def rotate(self, tenant_id: str, secret: str, now_ms: int, previous_until_ms: int) -> bool:
        """Make `secret` current; the current one becomes the previous one until
        `previous_until_ms`. Conditional on the current one read (two rotations at once: one
        wins, the other is repeated on what it left), then copied to every copy before returning
        (so that the next call signs with it). Returns whether there was a previous one."""
        key = {"tenantId": tenant_id, "jobId": SIGNING_ITEM}
        sealed_new = self._seal(tenant_id, secret)
        for _ in range(5):
            item = self._table.get_item(Key=key, ConsistentRead=True).get("Item")
            current = item.get("current") if item else None
            version = int(item.get("version", 0)) + 1 if item else 1
            values = {":new": sealed_new, ":now": now_ms, ":v": version}
            expression = "SET #cur = :new, createdMs = :now, version = :v"
            if current:
                expression += ", previous = :old, previousUntilMs = :until"
                values.update({":old": current, ":until": previous_until_ms})
                condition = "#cur = :old"
            else:
                expression += " REMOVE previous, previousUntilMs"
                condition = "attribute_not_exists(#cur)"
            try:
                self._table.update_item(Key=key, UpdateExpression=expression, ConditionExpression=condition,
                                        ExpressionAttributeNames={"#cur": "current"},
                                        ExpressionAttributeValues=values)
            except ClientError as exc:
                if not _condition_lost(exc, "rotated meanwhile"):
                    raise
                continue
            # Crash before every copy is written: the API answers 500 and the new secret was never
            # shown; the next rotation starts from the record and writes every copy again.
            self._write_copies(tenant_id, SealedSecrets(version, sealed_new, current,
                                                        previous_until_ms if current else None))
            return current is not None
        raise RuntimeError("the signing secret kept changing; try again")

    def _write_copies(self, tenant_id: str, sealed: SealedSecrets) -> None:
        for k in range(COPIES):
            item = {**copy_key(tenant_id, k), "version": sealed.version, "current": sealed.current}
            if sealed.previous:
                item.update({"previous": sealed.previous, "previousUntilMs": sealed.previous_until_ms})
            try:
                # Never over a newer rotation's copy (two rotations writing copies at once).
                self._table.put_item(Item=item, ConditionExpression="attribute_not_exists(version) OR version < :v",
                                     ExpressionAttributeValues={":v": sealed.version})
            except ClientError as exc:
                if not _condition_lost(exc, "a newer rotation's copy"):
                    raise

    def read_copy(self, tenant_id: str, k: int) -> SealedSecrets | None:
        """Copy `k` of the tenant's secrets, strongly consistent (a rotation answered before this
        read is seen); None if the tenant has no copies."""
        try:
            item = self._table.get_item(Key=copy_key(tenant_id, k), ConsistentRead=True).get("Item")
        except ClientError as exc:
            raise SigningUnavailable(f"DynamoDB GetItem: {_code(exc)}") from exc
        return _sealed(item)

    def read_record(self, tenant_id: str) -> SealedSecrets | None:
        """The record itself: for a tenant whose secret was made before copies existed."""
        try:
            item = self._table.get_item(Key={"tenantId": tenant_id, "jobId": SIGNING_ITEM}).get("Item")
        except ClientError as exc:
            raise SigningUnavailable(f"DynamoDB GetItem: {_code(exc)}") from exc
        return _sealed(item)
