"""Safeguard mutations: remove each safeguard alone and check that its test fails.

    .venv/bin/python tests/mutations.py            # every mutation (a few minutes)
    .venv/bin/python tests/mutations.py fence      # those whose name contains "fence"

Each entry names a safeguard, the exact text that implements it, the same text without it, and
the test that must fail without it. The file is restored after each run. Prints CAUGHT or MISSED
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
  "    if zone.key == \"UTC\" or fixed_time:", "    if True:",
  "tests/unit/test_cron_dst_oracle.py"),
 ("the catch-all 500 in the error shape (route handler and the handler's backstop)",
  "functions/jobsched/handlers/api.py",
  [("    @app.exception_handler(Exception)\n", ""),
   ("        except Exception:  # raised outside any route", "        except ZeroDivisionError:  # raised outside any route")],
  None,
  "tests/integration/test_fuzz_http_surface.py::test_an_exception_inside_a_route_is_a_500_in_the_error_shape_and_counted"),
 ("the API may batch-read the Jobs table (28.1: tag and name filters)", "infra/jobsched_infra/stack.py",
  "storage.jobs.grant(api_fn, *DDB_READ, *DDB_BATCH_READ, *DDB_PUT,", "storage.jobs.grant(api_fn, *DDB_READ, *DDB_PUT,",
  "tests/integration/test_strict_aws.py::test_tag_and_name_filters_answer_through_the_apis_role"),
 ("the worker may batch-read the Jobs table (28.1: a batch's jobs in one read)", "infra/jobsched_infra/stack.py",
  "storage.jobs.grant(worker_fn, *DDB_READ, *DDB_BATCH_READ, *DDB_UPDATE)", "storage.jobs.grant(worker_fn, *DDB_READ, *DDB_UPDATE)",
  "tests/integration/test_strict_aws.py::test_a_workers_batch_reads_its_jobs_in_one_allowed_call"),
 ("strict layer: an explicit Deny wins over an Allow", "functions/jobsched/local/strict_aws.py",
  "            if denied or not allowed:", "            if not allowed:",
  "tests/integration/test_strict_aws.py::test_an_explicit_deny_wins_over_an_allow"),
 ("strict layer: an item over 400 KB is refused", "functions/jobsched/local/strict_aws.py",
  "        if size > MAX_ITEM_BYTES:", "        if False:",
  "tests/integration/test_strict_aws.py::test_an_item_over_400_kb_is_refused_as_dynamodb_sizes_it"),
 ("strict layer: an update past 400 KB is undone and refused", "functions/jobsched/local/strict_aws.py",
  '        if ok and op == "UpdateItem" and item_size(after) > MAX_ITEM_BYTES:', "        if False:",
  "tests/integration/test_strict_aws.py::test_an_item_over_400_kb_is_refused_as_dynamodb_sizes_it"),
 ("strict layer: an oversize SQS message is refused", "functions/jobsched/local/strict_aws.py",
  "            if size > SQS_MAX_MESSAGE_BYTES:", "            if False:",
  "tests/integration/test_strict_aws.py::test_oversize_messages_are_refused_by_sqs_sns_and_eventbridge"),
 ("strict layer: a BatchWriteItem over 25 requests is refused", "functions/jobsched/local/strict_aws.py",
  "            if len(requests) > BATCH_WRITE_MAX_ITEMS:", "            if False:",
  "tests/integration/test_strict_aws.py::test_batches_over_their_limits_are_refused"),
 ("strict layer: a hot partition key is throttled", "functions/jobsched/local/strict_aws.py",
  "            over = rcu >= self.limits.partition_rcu if reads else wcu >= self.limits.partition_wcu",
  "            over = False",
  "tests/integration/test_strict_aws.py::test_a_hot_partition_key_is_throttled_within_its_second_and_not_after"),
 ("strict layer: an update is billed on the larger item", "functions/jobsched/local/strict_aws.py",
  "        size = max(item_size(before), item_size(after))", "        size = item_size(after)",
  "tests/integration/test_strict_aws.py::test_an_update_is_billed_on_the_larger_item_and_a_failed_condition_is_billed"),
 ("strict layer: KMS requests over the quota are throttled", "functions/jobsched/local/strict_aws.py",
  "        if self.ledger.count_kms(call.second) > self.limits.kms_per_second:",
  "        if self.ledger.count_kms(call.second) < 0:",
  "tests/integration/test_strict_aws.py::test_kms_requests_over_the_quota_are_throttled"),
]


def main(selected: list[str]) -> int:
    failures = 0
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}
    for name, path, old, new, test in MUTATIONS:
        if selected and not any(word in name for word in selected):
            continue
        source = ROOT / path
        text = source.read_text()
        pairs = old if isinstance(old, list) else [(old, new)]  # several edits make one mutation
        stale = [o for o, _ in pairs if text.count(o) != 1]
        if stale:
            print(f"STALE   {name}: {stale[0][:60]!r} is not found exactly once in {path}", flush=True)
            failures += 1
            continue
        mutated = text
        for o, n in pairs:
            mutated = mutated.replace(o, n)
        source.write_text(mutated)
        try:
            run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", test],
                                 cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)
        finally:
            source.write_text(text)
        caught = run.returncode != 0
        failures += not caught
        print(("CAUGHT  " if caught else "MISSED  ") + name, flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
