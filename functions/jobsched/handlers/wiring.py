"""Dependencies of a function, built once per container from its settings."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Mapping

import boto3

from jobsched.domain.clock import Clock, SystemClock
from jobsched.service.handoff import HandOff
from jobsched.settings import Settings
from jobsched.store.aws import Stores, build_stores


@dataclass
class Components:
    settings: Settings
    stores: Stores
    clock: Clock
    handoff: HandOff


def build(env: Mapping[str, str], function: str, clock: Clock | None = None,
          session: boto3.session.Session | None = None) -> Components:
    settings = Settings.from_env(env, function)
    clock = clock or SystemClock()
    stores = build_stores(settings, session, clock)
    return Components(settings, stores, clock, HandOff(stores, clock, settings.segments,
                                                       settings.tenant_fires_per_second))


def lazy(make_handler: Callable[..., Callable]) -> Callable:
    """The module-level `handler` Lambda calls: built on first use from os.environ, so that
    importing a handler module never needs AWS settings (tests and the local stack call
    make_handler with their own environment and clock)."""
    built: list[Callable] = []

    def handler(event, context):
        if not built:
            built.append(make_handler(os.environ))
        return built[0](event, context)

    return handler


def metrics_for(env: Mapping[str, str], service: str):
    """EMF metrics of one function. Ephemeral: no state shared with other handlers in the same
    process (the local stack runs all functions in one)."""
    from aws_lambda_powertools.metrics import EphemeralMetrics

    from jobsched.settings import Env

    return EphemeralMetrics(namespace=env.get(Env.METRICS_NAMESPACE, "Jobsched"), service=service)
