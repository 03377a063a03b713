"""Deployment knobs come from CDK context (cdk.json or `-c key=value`), parsed once here."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_LAYER_DIR = ROOT / ".build" / "layer"


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class StackConfig:
    segments: int = 4
    layer_dir: Path = DEFAULT_LAYER_DIR
    # Lets HTTP targets reach loopback and private addresses (the local stack's echo endpoint).
    allow_private_targets: bool = False
    api_rate_limit: int = 1000
    api_burst_limit: int = 2000
    # Which AWS resources jobs may target (SQS, SNS, EventBridge, Lambda). Default: any of
    # those in the deploying account; list ARN patterns to narrow it or to allow other accounts.
    target_arn_patterns: tuple[str, ...] = ()

    @classmethod
    def from_context(cls, node) -> "StackConfig":
        def get(key, default):
            value = node.try_get_context(key)
            return default if value is None else value

        try:
            segments = int(get("segments", 4))
        except (TypeError, ValueError):
            raise ConfigError("context 'segments' must be an integer") from None
        if not 1 <= segments <= 64:
            raise ConfigError("context 'segments' must be 1..64 (one EventBridge rule each)")
        return cls(
            segments=segments,
            layer_dir=Path(get("layerDir", os.environ.get("JOBSCHED_LAYER_DIR", str(DEFAULT_LAYER_DIR)))),
            allow_private_targets=str(get("allowPrivateTargets", "false")).lower() == "true",
            target_arn_patterns=tuple(get("targetArnPatterns", [])),
        )
