// The jobsched console: calls the public API with the key typed in, kept for this tab only
// (sessionStorage; never in a URL or a cookie). Every value is shown as text (textContent),
// never parsed as HTML: job names, payloads and errors are user input.
"use strict";

const KEY = "jobsched.apiKey";
const $ = (id) => document.getElementById(id);
let nextCursor = null;

function key() { return sessionStorage.getItem(KEY) || ""; }

function status(text, isError) {
  $("status").textContent = text || "";
  $("status").className = isError ? "error" : "";
}

async function api(method, path, body) {
  const headers = { "Authorization": "Bearer " + key() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const answer = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = answer.status === 204 ? null : await answer.json().catch(() => null);
  if (!answer.ok) {
    const message = data && data.error ? data.error.code + ": " + data.error.message : "HTTP " + answer.status;
    throw new Error(message);
  }
  return data;
}

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function show(view) {
  for (const id of ["jobs-view", "job-view", "dead-view", "calendars-view"]) $(id).hidden = id !== view;
}

// --- jobs ----------------------------------------------------------------------------------
async function loadJobs(more) {
  const query = new URLSearchParams({ limit: "50" });
  const tag = $("filter-tag").value.trim();
  if (tag) query.append("tag", tag);
  if ($("filter-state").value) query.append("state", $("filter-state").value);
  if ($("filter-name").value.trim()) query.append("namePrefix", $("filter-name").value.trim());
  if (more && nextCursor) query.append("cursor", nextCursor);
  const page = await api("GET", "v1/jobs?" + query.toString());
  const body = $("jobs-table").tBodies[0];
  if (!more) body.replaceChildren();
  for (const job of page.items) {
    const row = document.createElement("tr");
    const name = cell(row, "");
    const link = document.createElement("a");
    link.href = "#job/" + encodeURIComponent(job.jobId);
    link.textContent = job.name;
    link.className = "job-link";
    name.appendChild(link);
    cell(row, job.state + (job.pausedReason ? " (" + job.pausedReason + ")" : ""), "state-" + job.state);
    cell(row, job.type + (job.schedule ? " " + job.schedule : "") + (job.timezone !== "UTC" ? " " + job.timezone : ""));
    cell(row, job.nextFireAt || "-");
    cell(row, Object.entries(job.tags || {}).map(([k, v]) => k + ":" + v).join(" "));
    body.appendChild(row);
  }
  nextCursor = page.nextCursor;
  $("more-jobs").hidden = !nextCursor;
  status(page.items.length || more ? "" : "No jobs match.");
}

// --- one job -------------------------------------------------------------------------------
// Schedule bounds and self-pausing: the job's runs, bounds and why it completed, and the preview
// kept inside them (the runs left, from now).
const BOUND_FIELDS = { "Completed because": "job-completed-reason", "Runs": "job-runs", "Starts": "job-start-at",
  "Ends": "job-end-at", "Pauses after failures": "job-pause-after-failures" };

function boundFields(job) {
  return [["Completed because", job.completedReason],
    ["Runs", job.type !== "CRON" && job.type !== "RATE" ? null
      : job.maxRuns ? job.runCount + " of " + job.maxRuns : job.runCount],
    ["Starts", job.startAt], ["Ends", job.endAt], ["Pauses after failures", job.pauseAfterFailures]];
}

function boundPreview(job, query) {
  if (job.startAt) query.set("startAt", job.startAt);
  if (job.endAt) query.set("endAt", job.endAt);
  if (job.maxRuns) query.set("maxRuns", String(Math.max(1, job.maxRuns - (job.runCount || 0))));
  return query;
}

async function loadJob(jobId) {
  const job = await api("GET", "v1/jobs/" + encodeURIComponent(jobId));
  $("job-name").textContent = job.name;
  const details = $("job-details");
  details.replaceChildren();
  const fields = [["Job id", job.jobId], ["State", job.state], ["Paused because", job.pausedReason],
    ["Type", job.type], ["Schedule", job.schedule], ["Time zone", job.timezone], ["Next fire", job.nextFireAt],
    ["Target", job.target ? JSON.stringify(job.target) : null],
    ["Steps", job.steps ? job.steps.map((s) => s.name + (s.dependsOn ? " after " + s.dependsOn.join(", ") : "")).join("; ") : null],
    ["Tags", Object.entries(job.tags || {}).map(([k, v]) => k + ":" + v).join(" ")],
    ["Excluded calendars", (job.excludeCalendars || []).join(", ")],
    ["Payload", JSON.stringify(job.payload)], ["Version", job.version]];
  fields.splice(3, 0, ...boundFields(job));
  for (const [label, value] of fields) {
    if (value === null || value === undefined || value === "") continue;
    const dt = document.createElement("dt");
    dt.textContent = label;
    const dd = document.createElement("dd");
    dd.textContent = String(value);
    if (label === "State") { dd.id = "job-state"; dd.className = "state-" + value; }
    if (label === "Paused because") dd.id = "job-paused-reason";
    if (BOUND_FIELDS[label]) dd.id = BOUND_FIELDS[label];
    if (label === "Excluded calendars") dd.id = "job-excluded-calendars";
    details.append(dt, dd);
  }
  showCatchUp(details, job.misfirePolicy);
  $("job-view").dataset.jobId = job.jobId;
  const fires = $("next-fires");
  fires.replaceChildren();
  if (job.schedule && job.state === "ACTIVE") {
    const query = boundPreview(job, new URLSearchParams({
      type: job.type, schedule: job.schedule, timezone: job.timezone, count: "10" }));
    if ((job.excludeCalendars || []).length) query.append("excludeCalendars", job.excludeCalendars.join(","));
    const preview = await api("GET", "v1/schedule-preview?" + query.toString()).catch(() => null);
    // Exclusion calendars: the occurrences they skip, in order among the fire times.
    const entries = (preview ? preview.fireTimes : []).map((at) => [at, ""])
      .concat((preview && preview.skipped ? preview.skipped : []).map((s) => [s.at, " skipped (" + s.reason + ")"]))
      .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    for (const [at, note] of entries) {
      const li = document.createElement("li");
      li.textContent = at + note;
      if (note) li.className = "skipped";
      fires.appendChild(li);
    }
  } else if (job.nextFireAt) {
    const li = document.createElement("li");
    li.textContent = job.nextFireAt;
    fires.appendChild(li);
  }
  const stats = await api("GET", "v1/jobs/" + encodeURIComponent(jobId) + "/stats?window=24h").catch(() => null);
  const late = stats ? stats.lateMs : null;
  $("job-stats").textContent = !stats ? "" : stats.fires + " fires, " + stats.succeeded + " succeeded, " +
    stats.failed + " failed, " + stats.dead + " dead, " + stats.skipped + " skipped" +
    (late && late.p50 !== null ? "; lateness p50 " + late.p50 + " ms, p99 " + late.p99 + " ms, max " + late.max + " ms" : "") +
    (stats.complete ? "" : " (the newest 20,000 executions)");
  const executions = await api("GET", "v1/jobs/" + encodeURIComponent(jobId) + "/executions?limit=20");
  const body = $("executions-table").tBodies[0];
  body.replaceChildren();
  for (const e of executions.items) {
    const run = job.steps ? await api("GET", "v1/executions/" + encodeURIComponent(e.executionId)).catch(() => e) : e;
    const row = document.createElement("tr");
    cell(row, e.executionId);
    cell(row, e.status, "state-" + e.status);
    cell(row, e.scheduledAt);
    cell(row, e.attempts.map((a) => "#" + a.attempt + " " + a.status + (a.error ? " (" + a.error + ")" : "")).join("; "));
    const steps = cell(row, "");
    if (run.steps) {
      const list = document.createElement("ul");
      list.className = "steps";
      for (const s of run.steps) {
        const li = document.createElement("li");
        li.textContent = s.name + ": " + s.status + (s.attempt ? " (attempt " + s.attempt + ")" : "");
        list.appendChild(li);
      }
      steps.appendChild(list);
    }
    cell(row, e.error);
    markCatchUp(row.cells[1], e);
    body.appendChild(row);
  }
}

// --- catch-up that does not flood ----------------------------------------------------------
function showCatchUp(details, misfire) {
  if (!misfire) return;
  const dt = document.createElement("dt");
  dt.textContent = "Misfire policy";
  const dd = document.createElement("dd");
  dd.id = "job-misfire-policy";
  dd.textContent = typeof misfire === "string" ? misfire
    : misfire.policy + ": the newest " + misfire.maxCatchUp + " missed run, " + misfire.catchUpPerMinute +
      " a minute; older ones are skipped (MISSED_WINDOW)";
  details.append(dt, dd);
}

function markCatchUp(statusCell, e) {
  if (e.catchUp) statusCell.textContent += " (catch-up, " + Math.round(e.lateMs / 1000) + " s late)";
  if (e.reason === "MISSED_WINDOW") {
    statusCell.textContent += " (MISSED_WINDOW: " + e.skippedCount + " through " + e.skippedThrough + ")";
  }
}

async function act(method, suffix, body, done) {
  const jobId = $("job-view").dataset.jobId;
  try {
    await api(method, "v1/jobs/" + encodeURIComponent(jobId) + suffix, body);
    status(done);
    await loadJob(jobId);
  } catch (error) {
    status(error.message, true);
  }
}

// --- dead letters --------------------------------------------------------------------------
async function loadDead() {
  const page = await api("GET", "v1/dead-letters?limit=50");
  const body = $("dead-table").tBodies[0];
  body.replaceChildren();
  for (const e of page.items) {
    const row = document.createElement("tr");
    cell(row, e.executionId);
    cell(row, e.jobId);
    cell(row, e.error);
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = "Redrive";
    button.addEventListener("click", async () => {
      try {
        await api("POST", "v1/executions/" + encodeURIComponent(e.executionId) + "/redrive");
        status("Redriven: " + e.executionId);
        await loadDead();
      } catch (error) { status(error.message, true); }
    });
    cell(row, "").appendChild(button);
    body.appendChild(row);
  }
  status(page.items.length ? "" : "No dead letters.");
}

// --- exclusion calendars -------------------------------------------------------------------
async function loadCalendars() {
  const page = await api("GET", "v1/calendars?limit=100");
  const body = $("calendars-table").tBodies[0];
  body.replaceChildren();
  for (const c of page.items) {
    const row = document.createElement("tr");
    cell(row, c.name, "calendar-name");
    cell(row, c.description);
    cell(row, c.dates.length ? c.dates.join(" ") : "(no dates)", "calendar-dates");
    cell(row, c.updatedAt);
    body.appendChild(row);
  }
  status(page.items.length ? "" : "No calendars.");
}

// --- routing -------------------------------------------------------------------------------
async function route() {
  if (!key()) { show(null); status("Enter an API key to start."); return; }
  const hash = location.hash.slice(1);
  try {
    if (hash.startsWith("job/")) { show("job-view"); await loadJob(decodeURIComponent(hash.slice(4))); }
    else if (hash === "dead") { show("dead-view"); await loadDead(); }
    else if (hash === "calendars") { show("calendars-view"); await loadCalendars(); }
    else { show("jobs-view"); await loadJobs(false); }
  } catch (error) {
    status(error.message, true);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY, $("key").value.trim());
    $("key").value = "";
    route();
  });
  $("forget-key").addEventListener("click", () => { sessionStorage.removeItem(KEY); route(); });
  $("filters").addEventListener("submit", (event) => { event.preventDefault(); loadJobs(false).catch((e) => status(e.message, true)); });
  $("more-jobs").addEventListener("click", () => loadJobs(true).catch((e) => status(e.message, true)));
  $("run-now").addEventListener("click", () => act("POST", "/trigger", undefined, "Triggered."));
  $("pause").addEventListener("click", () => act("POST", "/pause",
    $("pause-reason").value.trim() ? { reason: $("pause-reason").value.trim() } : {}, "Paused."));
  $("resume").addEventListener("click", () => act("POST", "/resume", undefined, "Resumed."));
  $("cancel").addEventListener("click", () => act("DELETE", "", undefined, "Cancelled."));
  window.addEventListener("hashchange", route);
  route();
});
