"""Safeguard mutations: remove each safeguard alone and check that its test fails.

    .venv/bin/python tests/mutations.py            # every mutation (a few minutes)
    .venv/bin/python tests/mutations.py fence      # those whose name contains "fence"

Each entry names a safeguard, the exact text that implements it, the same text without it, and
the test that must fail without it (several edits: a list of (old, new) pairs in one file, or,
with the path None, of (path, old, new) triples). The file is restored after each run. Prints CAUGHT or MISSED
per safeguard and exits non-zero if any is missed or its text is no longer found (so that a
refactoring that moves a safeguard updates this list too). Not collected by pytest: each
mutation reruns tests, which is too slow for `make test`."""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
MUTATIONS = [
 ("flow control's concurrency limit on taking a slot", "functions/jobsched/store/dynamo.py",
  'ConditionExpression="attribute_exists(slots) AND (attribute_exists(slots.#ex) OR size(slots) < :limit)"',
  'ConditionExpression="attribute_exists(slots)"',
  "tests/integration/test_flow_control.py::test_max_concurrency_holds_at_the_target_and_the_excess_waits_without_an_attempt"),
 ("a crashed attempt's slot is reclaimed after its lease", "functions/jobsched/service/flow.py",
  "                self._flow.give_back(job.tenant_id, control.key, execution, if_lease=lease)",
  "                pass",
  "tests/integration/test_flow_control.py::test_a_slot_held_by_a_dead_worker_comes_back_after_its_lease"),
 ("flow control's rate limit", "functions/jobsched/service/flow.py",
  "            if not self._jobs.take_quota(", "            if False and self._jobs.take_quota(",
  "tests/integration/test_flow_control.py::test_rate_per_second_holds_in_every_second"),
 ("an ended execution delivered again does what follows its end (hook, completion)", "functions/jobsched/service/worker.py",
  "            self._outcomes.after_end(job, dispatch, ExecutionStatus(status), self._clock.now_ms())",
  "            pass",
  "tests/integration/test_hooks.py::test_a_worker_dying_after_the_end_is_recorded_still_calls_the_hook_once"),
 ("a join's completing writer alone dispatches (the set as its own write left it)", "functions/jobsched/service/runs.py",
  "                joined = self._executions.join_step(job.job_id, below_id, name)\n                if joined is None:",
  "                self._executions.join_step(job.job_id, below_id, name)\n                if True:",
  "tests/integration/test_workflows.py::test_a_join_whose_two_upstream_steps_finish_at_once_starts_once"),
 ("a step's end delivered again does what follows it", "functions/jobsched/service/worker.py",
  "            self._runs.step_ended(job, dispatch.execution_id, ExecutionStatus(status))\n"
  "            return WorkResult(Outcome.DUPLICATE, int(",
  "            return WorkResult(Outcome.DUPLICATE, int(",
  "tests/integration/test_workflows.py::test_a_worker_dying_after_a_steps_success_is_recorded_loses_nothing"),
 ("a join is recorded whatever the downstream step's state", "functions/jobsched/store/dynamo.py",
  'ConditionExpression="attribute_exists(executionId) AND NOT contains(upstreamDone, :name)"',
  'ConditionExpression="attribute_exists(executionId) AND NOT contains(upstreamDone, :name) AND attribute_not_exists(finishedMs)"',
  "tests/integration/test_workflows.py::test_a_redrive_runs_the_failed_part_again_and_keeps_what_succeeded"),
 ("attempt fence (attempt = :mine) on the result write", "functions/jobsched/store/dynamo.py",
  'condition = "attempt = :mine AND #st = :running"', 'condition = "(attempt = :mine OR attempt <> :mine) AND #st = :running"',
  "tests/integration/test_safeguards.py::test_a_taken_over_attempt_cannot_write_its_result"),
 ("attempt fence (RUNNING) on the result write", "functions/jobsched/store/dynamo.py",
  'condition = "attempt = :mine AND #st = :running"', 'condition = "attempt = :mine AND (#st = :running OR #st <> :running)"',
  "tests/integration/test_safeguards.py::test_an_ended_attempt_cannot_write_a_second_result"),
 ("fenced heartbeat/progress write", "functions/jobsched/store/dynamo.py",
  'ConditionExpression="attempt = :mine AND #st = :running",\n                ExpressionAttributeNames={"#st": "status"},\n                ExpressionAttributeValues={**values',
  'ConditionExpression="attempt = :mine OR attempt <> :mine OR #st = :running",\n                ExpressionAttributeNames={"#st": "status"},\n                ExpressionAttributeValues={**values',
  "tests/integration/test_safeguards.py::test_a_heartbeat_of_a_replaced_or_ended_attempt_changes_nothing"),
 ("lease-expiry condition of a LOST verdict", "functions/jobsched/store/dynamo.py",
  'condition += " AND leaseUntilMs <= :leaseNow"', 'condition += " AND (leaseUntilMs <= :leaseNow OR leaseUntilMs > :leaseNow)"',
  "tests/integration/test_safeguards.py::test_a_heartbeat_between_the_lease_check_and_the_lost_verdict_wins"),
 ("cancel-requested condition of a retry", "functions/jobsched/store/dynamo.py",
  'condition += " AND attribute_not_exists(cancelRequested)"', 'condition += ""',
  "tests/integration/test_safeguards.py::test_a_failed_attempt_of_a_cancelled_execution_schedules_no_retry"),
 ("tick claims before its query", "functions/jobsched/service/tick.py",
  "            self._stores.watermarks.claim(segment, minute)\n            pages = self._pages(segment, minute, watermark, time_left)\n",
  "            pages = iter(list(self._pages(segment, minute, watermark, time_left)))\n            self._stores.watermarks.claim(segment, minute)\n",
  "tests/integration/test_safeguards.py::test_a_job_placed_while_the_tick_reads_its_bucket_still_fires"),
 ("one-time jobs exempt from misfirePolicy SKIP", "functions/jobsched/service/handoff.py",
  "if late and schedule.recurring and policy is MisfirePolicy.SKIP:", "if late and policy is MisfirePolicy.SKIP:",
  "tests/integration/test_safeguards.py::test_a_late_one_time_job_runs_even_with_misfire_skip"),
 ("tenant check before cancelling an execution", "functions/jobsched/service/jobs.py",
  "        execution, job = self._owned(tenant_id, execution_id)  # another tenant's answers 404 here",
  "        execution = self._executions.get(job_id_of(execution_id), execution_id)\n"
  "        job = self._jobs.get(execution.tenant_id, execution.job_id)",
  "tests/integration/test_safeguards.py::test_another_tenant_cannot_cancel_an_execution_by_its_id"),
 ("Idempotency-Key on trigger", "functions/jobsched/handlers/api.py",
  'service.trigger(tenant_id, jobId, _idempotency_key(header("Idempotency-Key")))', 'service.trigger(tenant_id, jobId, None)',
  "tests/integration/test_safeguards.py::test_a_repeated_trigger_with_its_key_a_second_later_runs_once"),
 ("API keys stored hashed", "functions/jobsched/service/auth.py",
  "    return hashlib.sha256(key.encode()).hexdigest()", "    return key",
  "tests/integration/test_safeguards.py::test_api_keys_are_stored_only_as_hashes"),

 ("claim condition (one claim per execution)", "functions/jobsched/store/dynamo.py",
  '                    "attribute_not_exists(executionId)"\n                    " OR (#st IN (:failed, :pending) AND attempt = :prev)"',
  '                    "attribute_not_exists(executionId) OR attribute_exists(executionId)"\n                    " OR (#st IN (:failed, :pending) AND attempt = :prev)"',
  "tests/integration/test_faults.py::test_1_an_occurrence_of_a_recurring_job_delivered_twice_in_turn_runs_once"),
 ("expired-lease takeover in the claim", "functions/jobsched/store/dynamo.py",
  '" OR (#st = :running AND leaseUntilMs < :now)"', '" OR (#st = :running AND leaseUntilMs < :now AND #st <> :running)"',
  "tests/integration/test_faults.py::test_4_a_worker_dying_after_its_claim_and_before_its_result"),
 ("the writer's claim check (direct dispatch into a claimed bucket)", "functions/jobsched/service/handoff.py",
  "        if not is_claimed(timer.minute, watermark):\n            return HandOffReport()",
  "        if True:\n            return HandOffReport()",
  "tests/integration/test_faults.py::test_6_the_api_writes_a_timer_into_a_bucket_a_tick_has_just_claimed"),
 ("consistent job reads of the tick", "functions/jobsched/store/dynamo.py",
  'for t, j in keys],\n            "ConsistentRead": True,\n',
  'for t, j in keys],\n            "ConsistentRead": False,\n',
  "tests/integration/test_aws_behaviour.py::test_a_job_replaced_just_before_the_tick_fires_although_a_replica_still_has_the_old_version"),
 ("the seal check on lane messages", "functions/jobsched/domain/dispatch_seal.py",
  "        if not hmac.compare_digest(mac, self._mac(body)):", "        if False:",
  "tests/integration/test_own_resources.py::test_a_forged_dispatch_on_a_lane_never_runs_another_tenants_job"),
 ("a stale message ends what waited for it", "functions/jobsched/service/worker.py",
  "            self._end_waiting(dispatch)\n            return WorkResult(Outcome.STALE_MESSAGE)",
  "            return WorkResult(Outcome.STALE_MESSAGE)",
  "tests/integration/test_every_execution_ends.py::test_a_trigger_followed_at_once_by_a_delete_ends_cancelled"),
 ("the sweep of a trigger's lost send", "functions/jobsched/service/jobs.py",
  "        self._arm_sweep(job, execution_id, 1, now)\n", "",
  "tests/integration/test_every_execution_ends.py::test_a_trigger_whose_send_was_lost_is_run_by_its_sweep_once"),
 ("typed cursors", "functions/jobsched/store/dynamo.py",
  "            or not all(_cursor_value_ok(key[name], kind) for name, kind in required.items())):",
  "            or False):",
  "tests/integration/test_boundaries.py::test_bad_headers_query_strings_and_cursors_name_their_field"),
 ("ASCII-only numbers in query strings and headers", "functions/jobsched/handlers/api.py",
  '_ASCII_INT = re.compile(r"-?[0-9]{1,18}", re.ASCII)', '_ASCII_INT = re.compile(r"-?\\d{1,18}")',
  "tests/integration/test_boundaries.py::test_bad_headers_query_strings_and_cursors_name_their_field"),
 ("the end of time on accepted instants", "functions/jobsched/domain/schedule.py",
  "    if not BEGINNING_OF_TIME_MS <= ms <= END_OF_TIME_MS:", "    if False:",
  "tests/integration/test_boundaries.py::test_instants_beyond_the_end_of_time_are_refused_and_the_tenant_keeps_working"),
 ("Debian cron across DST (wildcard jobs follow real time)", "functions/jobsched/domain/schedule.py",
  "    if zone.key == \"UTC\" or spec.fixed_time:", "    if True:",
  "tests/unit/test_cron_dst_oracle.py"),
 ("the catch-all 500 in the error shape (route handler and the handler's backstop)",
  "functions/jobsched/handlers/api.py",
  [("    @app.exception_handler(Exception)\n", ""),
   ("        except Exception:  # raised outside any route", "        except ZeroDivisionError:  # raised outside any route")],
  None,
  "tests/integration/test_fuzz_http_surface.py::test_an_exception_inside_a_route_is_a_500_in_the_error_shape_and_counted"),

 ("a DEAD step fails every step below it, not only its children", "functions/jobsched/service/runs.py",
  "            for below in workflow.below(name):", "            for below in workflow.downstream(name):",
  "tests/integration/test_workflow_safeguards.py::test_a_dead_step_fails_its_grandchildren_too_and_the_run_ends"),
 ("a run being redriven cannot end (both redriving guards: the read and the condition)", None,
  [("functions/jobsched/service/runs.py",
    "        if run is None or run.status is not ExecutionStatus.RUNNING or run.redriving:",
    "        if run is None or run.status is not ExecutionStatus.RUNNING:"),
   ("functions/jobsched/store/dynamo.py",
    'ConditionExpression="#st = :running AND attribute_not_exists(redriving)"',
    'ConditionExpression="#st = :running"')],
  None,
  "tests/integration/test_workflow_safeguards.py::test_a_step_delivered_again_while_a_redrive_reopens_the_run_does_not_end_it"),
 ("an interrupted redrive sends the steps it reopened (PENDING after an attempt)", "functions/jobsched/service/runs.py",
  "            elif step.status is ExecutionStatus.PENDING and step.attempt > 0:",
  "            elif False:",
  "tests/integration/test_workflow_safeguards.py::test_a_redrive_interrupted_before_its_send_is_sent_by_its_sweep"),
 ("a run's cancel cancels its steps waiting for a retry (FAILED)", "functions/jobsched/service/runs.py",
  "                if step.status in (ExecutionStatus.PENDING, ExecutionStatus.FAILED):",
  "                if step.status in (ExecutionStatus.PENDING,):",
  "tests/integration/test_workflow_safeguards.py::test_cancelling_a_run_cancels_a_step_waiting_for_its_retry"),
 ("a step of a cancelled job never runs", "functions/jobsched/service/worker.py",
  "        if step is None or job.state is JobState.CANCELLED:", "        if step is None:",
  "tests/integration/test_workflow_safeguards.py::test_a_step_of_a_cancelled_job_never_runs"),

 ("a delivery that loses its claim gives back the slot it took", "functions/jobsched/service/worker.py",
  "            if took_slot:  # not ours to run after all: the slot goes back\n"
  "                self._flow.give_back(job, dispatch.execution_id)",
  "            if took_slot:  # not ours to run after all: the slot goes back\n"
  "                pass",
  "tests/integration/test_flow_control_safeguards.py::test_a_delivery_that_loses_its_claim_gives_back_the_slot_it_took"),
 ("an accepted long-running attempt extends its slot's lease", "functions/jobsched/service/worker.py",
  "            self._flow.extend(job, dispatch.execution_id, deadline + LEASE_MARGIN_MS)\n", "",
  "tests/integration/test_flow_control_safeguards.py::test_an_accepted_attempt_keeps_its_slot_past_its_calls_lease"),
 ("a heartbeat extends its attempt's slot lease", "functions/jobsched/service/callbacks.py",
  "        self._outcomes.flow.extend(job, execution_id, deadline + LEASE_MARGIN_MS)  # a long attempt keeps its slot\n",
  "",
  "tests/integration/test_flow_control_safeguards.py::test_a_heartbeat_extends_the_slot_of_a_long_running_attempt"),
 ("HTTP connects to the checked address (no second resolution: DNS rebinding)",
  "functions/jobsched/adapters/http_target.py",
  "        self.sock = socket.create_connection(self._sockaddr[:2], self.timeout)",
  "        self.sock = socket.create_connection((self.host, self.port), self.timeout)",
  "tests/unit/test_http_target_pinning.py::test_the_call_connects_to_the_checked_address_though_the_name_answers_loopback_later[http]"),
 ("HTTPS connects to the checked address (no second resolution: DNS rebinding)",
  "functions/jobsched/adapters/http_target.py",
  "        sock = socket.create_connection(self._sockaddr[:2], self.timeout)\n"
  "        self.sock = self._context.wrap_socket(",
  "        sock = socket.create_connection((self.host, self.port), self.timeout)\n"
  "        self.sock = self._context.wrap_socket(",
  "tests/unit/test_http_target_pinning.py::test_the_call_connects_to_the_checked_address_though_the_name_answers_loopback_later[https]"),
 ("a host's blocked addresses are never a fallback for its public ones", "functions/jobsched/adapters/http_target.py",
  "    return passed\n",
  "    return passed + [info[4] for info in infos if info[4] not in passed]\n",
  "tests/unit/test_http_target_pinning.py::test_a_name_with_a_public_and_a_blocked_address_never_falls_back_to_the_blocked_one"),
 ("a trigger's Idempotency-Key is scoped to its job", "functions/jobsched/service/jobs.py",
  'self._jobs.remember_request(tenant_id, f"trigger#{job_id}", idempotency_key',
  'self._jobs.remember_request(tenant_id, "trigger", idempotency_key',
  "tests/integration/test_keys_quotas_backfill_safeguards.py::test_an_idempotency_key_reused_on_another_job_triggers_that_job"),
 ("a cancelled job gives its quota place back to its own shard", "functions/jobsched/service/jobs.py",
  "            self._jobs.give_back_quota(tenant_id, active_counter(job.quota_shard))\n        return cancelled",
  "            self._jobs.give_back_quota(tenant_id, active_counter(0))\n        return cancelled",
  "tests/integration/test_keys_quotas_backfill_safeguards.py::test_a_cancelled_job_gives_its_place_back_to_its_own_shard"),
 ("backfill's lower bound: the occurrence at `from` is in", "functions/jobsched/service/jobs.py",
  "next_fire_after(job.nominal_of(from_ms) - 1)", "next_fire_after(job.nominal_of(from_ms))",
  "tests/integration/test_keys_quotas_backfill_safeguards.py::test_a_backfill_takes_the_occurrence_at_from_and_leaves_the_one_at_to"),
 ("backfill's upper bound: the occurrence at `to` is out", "functions/jobsched/service/jobs.py",
  "while nominal is not None and job.fire_at(nominal) < to_ms:",
  "while nominal is not None and job.fire_at(nominal) <= to_ms:",
  "tests/integration/test_keys_quotas_backfill_safeguards.py::test_a_backfill_takes_the_occurrence_at_from_and_leaves_the_one_at_to"),
 ("backfill's bound on a window's size", "functions/jobsched/service/jobs.py",
  "            if len(occurrences) == MAX_BACKFILL:\n", "            if False:\n",
  "tests/integration/test_keys_quotas_backfill_safeguards.py::test_a_backfill_window_of_more_than_the_bound_is_refused_naming_to"),
 ("cron: a one-value range is its value alone (croniter's whole field put back)", "functions/jobsched/domain/cron.py",
  "        low, high = _value(first, spec, text), _value(last, spec, text)\n",
  "        low, high = _value(first, spec, text), _value(last, spec, text)\n"
  "        low, high = (spec.low, spec.high) if low == high else (low, high)\n",
  "tests/unit/test_cron_dst_oracle.py::test_generated_expressions_fire_as_debian_cron"),
 ("cron: a range that runs backwards is refused", "functions/jobsched/domain/cron.py",
  "        if high < low:\n", "        if False:\n",
  "tests/unit/test_cron_grammar.py::TestDecisions::test_a_range_that_wraps_around_is_refused_with_the_list_to_write"),
 ("cron: never-matching refused from the 28 month shapes, not a search", "functions/jobsched/domain/cron.py",
  "    if not spec.can_match():", "    if False:",
  "tests/unit/test_cron_grammar.py::test_refusing_what_never_matches_costs_well_under_what_a_request_may_spend"),
 ("cron: cron() follows AWS's DST rule", "functions/jobsched/domain/schedule.py",
  "    if spec.dialect is Dialect.AWS:", "    if False:",
  "tests/unit/test_aws_expressions.py::TestAwsDaylightSavingTime"),
 ("cron: at() refuses a local time DST skips", "functions/jobsched/domain/schedule.py",
  "    if _is_imaginary(naive.replace(tzinfo=zone, fold=0)):", "    if False:",
  "tests/unit/test_aws_expressions.py::TestAwsDaylightSavingTime::test_an_at_time_that_does_not_exist_is_refused"),
 ("cron: cron() years end at 2199", "functions/jobsched/domain/cron.py",
  "AWS_YEARS = (1970, 2199)", "AWS_YEARS = (1970, 9998)",
  "tests/unit/test_aws_expressions.py::test_what_aws_refuses_is_refused_naming_the_schedule"),
 ("cron: cron() takes one '#' item in day-of-week", "functions/jobsched/domain/cron.py",
  "        if \",\" in text:  # AWS", "        if False:  # AWS",
  "tests/unit/test_aws_expressions.py::test_what_aws_refuses_is_refused_naming_the_schedule"),
 ("cron: cron() takes no '/' in day-of-week", "functions/jobsched/domain/cron.py",
  "    if \"/\" in dow and not legacy:", "    if False:",
  "tests/unit/test_aws_expressions.py::test_what_aws_refuses_is_refused_naming_the_schedule"),
 ("cron: a stored schedule the grammar now refuses keeps its old reading", "functions/jobsched/domain/schedule.py",
  "                return parse(expression, legacy=True)", "                return None",
  "tests/unit/test_schedule.py::TestStoredBeforeTheGrammar"),
 ("cron: rate() unit singular for 1, plural otherwise", "functions/jobsched/domain/aws_expressions.py",
  "    if (value == 1) != (written == unit):", "    if False:",
  "tests/unit/test_aws_expressions.py::test_bad_rate_expressions"),
 ("signing: a rotation takes effect for the next call (a copy read per call, not a cache per tenant)",
  "functions/jobsched/service/signing.py",
  "        sealed = self._store.read_copy(tenant_id, self._pick_copy())\n        if sealed is None:\n"
  "            sealed = self._record(tenant_id)",
  "        sealed = self._record(tenant_id)",
  "tests/integration/test_signed_calls.py::test_a_rotation_takes_effect_for_the_next_call_of_a_running_container"),
 ("signing: opened secrets are kept per tenant (not under a constant key)", "functions/jobsched/service/signing.py",
  "        key = (tenant_id, sealed)", '        key = ("tenant", "secret")',
  "tests/integration/test_signed_calls.py::test_one_container_signs_each_tenants_calls_with_that_tenants_secret"),
 ("signing: a record read without copies expires after a minute", "functions/jobsched/service/signing.py",
  "        if cached is not None and cached[0] > now:", "        if cached is not None:",
  "tests/integration/test_signed_calls.py::test_a_secret_made_before_copies_existed_keeps_signing_and_a_rotation_replaces_it_at_once"),
 ("signing: a previous secret past its grace is neither used nor decrypted", "functions/jobsched/service/signing.py",
  "sealed.previous_until_ms is not None and sealed.previous_until_ms > now:",
  "sealed.previous_until_ms is not None:",
  "tests/integration/test_signed_calls.py::test_kms_is_called_once_per_ciphertext_a_container_meets_and_never_for_an_ended_grace"),
 ("signing: a container's KMS Decrypt budget", "functions/jobsched/service/signing.py",
  "                if not self._budget.take(self._clock.now_ms()):", "                if False:",
  "tests/unit/test_signing.py::test_a_container_decrypts_at_most_its_burst_then_its_steady_rate"),
 ("signing: a secret that cannot be read or decrypted is a failed attempt, not an exception after the claim",
  "functions/jobsched/adapters/http_target.py",
  "        except SigningUnavailable as exc:", "        except ZeroDivisionError as exc:",
  "tests/integration/test_signed_calls.py::test_a_kms_throttle_or_denial_is_a_failed_attempt_retried_under_the_jobs_policy"),
 ("signing: a copy is never written over a newer rotation's", "functions/jobsched/store/signing.py",
  'ConditionExpression="attribute_not_exists(version) OR version < :v"',
  'ConditionExpression="attribute_not_exists(version) OR version <> :v"',
  "tests/integration/test_signed_calls.py::test_a_late_copy_write_of_an_older_rotation_changes_nothing"),
 ("signing: a job's own webhook-* headers are never sent", "functions/jobsched/adapters/http_target.py",
  "                   if str(k).lower() not in SIGNED_CALL_HEADERS}", "                   if True}",
  "tests/integration/test_signed_calls.py::test_a_job_stored_with_a_signed_call_header_never_sends_it"),
 ("signing: webhook-* headers are reserved in a job's request", "functions/jobsched/api/models.py",
  '    "webhook-id", "webhook-timestamp", "webhook-signature",', "",
  "tests/integration/test_signed_calls.py::test_a_job_cannot_set_the_signed_call_headers"),
]


def main(selected: list[str]) -> int:
    failures = 0
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
           # This tree's code, mutated, not whichever tree the shared venv's editable install names.
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "functions"), str(ROOT / "infra"),
                                                        os.environ.get("PYTHONPATH")]))}
    for name, path, old, new, test in MUTATIONS:
        if selected and not any(word in name for word in selected):
            continue
        # Several edits make one mutation: (old, new) pairs in `path`, or, with path None,
        # (path, old, new) triples (a safeguard made of guards in several files).
        edits = [(p, o, n) for p, o, n in old] if path is None else \
            [(path, o, n) for o, n in (old if isinstance(old, list) else [(old, new)])]
        originals = {p: (ROOT / p).read_text() for p, _, _ in edits}
        stale = [(p, o) for p, o, _ in edits if originals[p].count(o) != 1]
        if stale:
            print(f"STALE   {name}: {stale[0][1][:60]!r} is not found exactly once in {stale[0][0]}", flush=True)
            failures += 1
            continue
        mutated = dict(originals)
        for p, o, n in edits:
            mutated[p] = mutated[p].replace(o, n)
        try:
            for p, text in mutated.items():
                (ROOT / p).write_text(text)
            run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", test],
                                 cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)
        finally:
            for p, text in originals.items():
                (ROOT / p).write_text(text)
        caught = run.returncode != 0
        failures += not caught
        print(("CAUGHT  " if caught else "MISSED  ") + name, flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
