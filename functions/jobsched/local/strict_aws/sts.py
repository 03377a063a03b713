"""STS: AssumeRole as the strict layer checks it, and the role sessions it hands out."""
from __future__ import annotations

import re
from dataclasses import dataclass

from jobsched.local.strict_aws.base import ACCOUNT, _Call, _error
from jobsched.local.strict_aws.iam import Statement


# What STS takes as a session tag (AWS-LIMITS.md §8): key 1-128, value 0-256 characters of these.
_SESSION_TAG_KEY = re.compile(r"[\w .:/=+\-@]{1,128}")
_SESSION_TAG_VALUE = re.compile(r"[\w .:/=+\-@]{0,256}")


@dataclass(frozen=True)
class RoleSession:
    """Credentials AssumeRole handed out: the role they act as, their session tags, their end (on
    the emulator's clock), a label for reports, and the session's principal ARN."""
    role: str
    tags: dict
    expires_ms: int
    label: str
    principal_arn: str


class RoleSessions:
    """STS for the strict layer (a mixin of StrictAws): AssumeRole checked against the caller's
    policies and the role's trust policy, and the credentials it hands out remembered as a role
    session whose policies decide the calls signed with them."""

    def _authorize_assume_role(self, client, who: str, statements: list[Statement], call: _Call,
                               principal: str | None, context: dict) -> None:
        """sts:AssumeRole (and sts:TagSession when tags are passed) must be allowed by the caller's
        policies on the role, and by the role's trust policy for the caller's role ARN, with the
        request's tags (aws:RequestTag/<key>, aws:TagKeys) in the conditions."""
        p = call.params
        target = p["RoleArn"]
        tags = p.get("Tags") or []
        self._check_session_request(client, call, target, tags)
        actions = ["sts:AssumeRole"] + (["sts:TagSession"] if tags else [])
        trust = self.template.trust.get(target)
        for action in actions:
            self._decide(client, who, statements, action, target, context, call)
            trusted = trust is not None and principal is not None and any(
                ("*" in names or principal in names) and statement.applies(action, "*", context)
                for names, statement in trust)
            untrusted = trust is not None and principal is not None and any(
                ("*" in names or principal in names) and not statement.allow and statement.applies(action, "*", context)
                for names, statement in trust)
            if not trusted or untrusted:
                self._decide(client, who, statements, action, target, context, call, denied_by_trust=True)

    def _check_session_request(self, client, call: _Call, target: str, tags: list[dict]) -> None:
        """What STS refuses whatever the policies: a session longer than the role allows, or than an
        hour for a role assumed with a role session's credentials (role chaining: every function's
        are), and session tags past their limits (AWS-LIMITS.md §8)."""
        duration = int(call.params.get("DurationSeconds", 3600))
        longest = min(self.template.max_session_seconds.get(target, 3600), 3600)
        if not 900 <= duration <= longest:
            raise _error(client, call.operation, "ValidationError",
                         f"The requested DurationSeconds exceeds the {longest} s session limit for roles assumed by "
                         "role chaining" if duration > longest else "DurationSeconds must be at least 900", 400)
        if len(tags) > 50 or any(not _SESSION_TAG_KEY.fullmatch(t["Key"]) or not _SESSION_TAG_VALUE.fullmatch(t["Value"])
                                 for t in tags):
            raise _error(client, call.operation, "ValidationError",
                         "1 validation error detected: Value at 'tags' failed to satisfy constraint: at most 50 tags, "
                         "keys of 1-128 and values of 0-256 letters, digits, spaces or _.:/=+-@", 400)

    def _remember_session(self, call: _Call, parsed: dict) -> None:
        credentials = parsed.get("Credentials") or {}
        key = credentials.get("AccessKeyId")
        if not key:
            return
        tags = {t["Key"]: t["Value"] for t in call.params.get("Tags") or []}
        role = call.params["RoleArn"]
        name = call.params.get("RoleSessionName", "")
        duration = int(call.params.get("DurationSeconds", 3600))
        label = f"{role.rsplit('/', 1)[-1]}({','.join(f'{k}={v}' for k, v in tags.items())})"
        principal = f"arn:aws:sts::{ACCOUNT}:assumed-role/{role.rsplit('/', 1)[-1]}/{name}"
        self._sessions[key] = RoleSession(role, tags, self.now_ms() + duration * 1000, label, principal)
        self.ledger.count_assume_role()
