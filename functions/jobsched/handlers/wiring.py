"""Dependencies of a function, built once per container from its settings."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Mapping

import boto3

from jobsched.domain.clock import Clock, SystemClock
from jobsched.domain.ownership import LeaseRules
from jobsched.domain.timers import segment_of
from jobsched.service.handoff import HandOff
from jobsched.service.ownership import Ownership
from jobsched.settings import Settings
from jobsched.store.aws import Stores, build_stores


@dataclass
class Components:
    settings: Settings
    stores: Stores
    clock: Clock
    handoff: HandOff
    ownership: Ownership  # regions (service/ownership.py): single-region holds every segment


def build(env: Mapping[str, str], function: str, clock: Clock | None = None,
          session: boto3.session.Session | None = None) -> Components:
    settings = Settings.from_env(env, function)
    clock = clock or SystemClock()
    stores = build_stores(settings, session, clock)
    ownership = build_ownership(settings, session, clock)
    if ownership.multi_region:
        stores.lanes.epoch_of = lambda job_id: ownership.epoch_for(segment_of(job_id, settings.segments))
    return Components(settings, stores, clock, HandOff(stores, clock, settings.segments,
                                                       settings.tenant_fires_per_second, ownership), ownership)


def build_ownership(settings: Settings, session: boto3.session.Session | None, clock: Clock) -> Ownership:
    """The segment leases of a multi-region deployment, read in the ownership table's region."""
    if not settings.multi_region:
        return Ownership.single_region(settings.segments)
    from jobsched.store.aws import ownership_store

    return Ownership(ownership_store(settings, session), LeaseRules(settings.lease_ms, settings.clock_bound_ms),
                     settings.regions, settings.this_region, settings.segments, clock)


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
