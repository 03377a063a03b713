// The jobsched console: calls the public API with the key typed in, kept for this tab only
// (sessionStorage; never in a URL or a cookie). Every value is shown as text (textContent),
// never parsed as HTML: job names, payloads and errors are user input. Charts, the occurrence
// timeline and the workflow DAG are drawn here as SVG elements: no chart library, no other origin.
"use strict";

const KEY = "jobsched.apiKey";
const $ = (id) => document.getElementById(id);
const SVG_NS = "http://www.w3.org/2000/svg";
const SECOND = 1000, MINUTE = 60 * SECOND, HOUR = 60 * MINUTE, DAY = 24 * HOUR;
const VIEWER_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
let nextCursor = null;
let flash = ""; // a message for the next page opened (after a save moves to the job's page)

function key() { return sessionStorage.getItem(KEY) || ""; }

function status(text, isError) {
  $("status").textContent = text || "";
  $("status").className = isError ? "error" : "";
}

// An answer other than 2xx: its HTTP status and the API's error body (code, message, details).
class ApiError extends Error {
  constructor(httpStatus, body) {
    const error = body && body.error ? body.error : null;
    super(error ? error.code + ": " + error.message : "HTTP " + httpStatus);
    this.httpStatus = httpStatus;
    this.details = error && Array.isArray(error.details) ? error.details : [];
  }
}

async function api(method, path, body, extraHeaders) {
  const headers = Object.assign({ "Authorization": "Bearer " + key() }, extraHeaders || {});
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const answer = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = answer.status === 204 ? null : await answer.json().catch(() => null);
  if (!answer.ok) throw new ApiError(answer.status, data);
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
  for (const id of ["overview-view", "jobs-view", "job-view", "execution-view", "form-view", "dead-view",
    "calendars-view"]) $(id).hidden = id !== view;
}

// --- times: absolute in a named zone, and relative ("in 3 min", "5 min ago") -----------------
function relative(ms, now) {
  const delta = ms - (now === undefined ? Date.now() : now);
  const size = Math.abs(delta);
  if (size < 5 * SECOND) return "now";
  // Rounded in each unit before choosing it: 59.6 min reads "1 h", not "60 min".
  const seconds = Math.round(size / SECOND), minutes = Math.round(size / MINUTE), hours = Math.round(size / HOUR);
  const text = seconds < 60 ? seconds + " s" : minutes < 60 ? minutes + " min"
    : hours < 48 ? hours + " h" : Math.round(size / DAY) + " days";
  return delta > 0 ? "in " + text : text + " ago";
}

const formats = new Map();
function inZone(ms, zone) {
  if (!formats.has(zone)) {
    formats.set(zone, new Intl.DateTimeFormat("en-GB", { timeZone: zone, weekday: "short", day: "numeric",
      month: "short", year: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23",
      timeZoneName: "short" }));
  }
  return formats.get(zone).format(ms);
}

function clockIn(ms, zone) {
  return new Intl.DateTimeFormat("en-GB", { timeZone: zone, hour: "2-digit", minute: "2-digit", hourCycle: "h23" })
    .format(ms);
}

// A <time> for an instant: relative first (read at a glance), then the instant in `zone` (the
// viewer's unless given); the exact RFC 3339 value in its datetime and title. Refreshed every 15 s.
function timeEl(iso, zone) {
  const el = document.createElement("time");
  const ms = Date.parse(iso);
  el.dateTime = iso;
  el.title = iso;
  if (Number.isNaN(ms)) { el.textContent = iso; return el; }
  el.dataset.ms = String(ms);
  el.dataset.zone = zone || VIEWER_ZONE;
  paintTime(el);
  return el;
}

function paintTime(el) {
  const ms = Number(el.dataset.ms);
  el.textContent = relative(ms) + " (" + inZone(ms, el.dataset.zone) + ")";
}

function timeCell(row, iso, zone) {
  const td = cell(row, iso ? "" : "-");
  if (iso) td.appendChild(timeEl(iso, zone));
  return td;
}

// --- SVG --------------------------------------------------------------------------------------
function svg(name, attributes, text) {
  const el = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attributes || {})) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

// A value axis's label: 1200000 as "1.2M", 25000 as "25k" (the exact value is in each mark's title).
function axisLabel(v) {
  const short = (n, unit) => String(Math.round(n * 10) / 10) + unit;
  return v >= 1e6 ? short(v / 1e6, "M") : v >= 1e4 ? short(v / 1e3, "k") : String(v);
}

function titled(el, text) { el.appendChild(svg("title", {}, text)); return el; }

// The top of a value axis with four gridlines on round steps (1, 2 or 5 times a power of ten;
// whole numbers for counts).
function niceMax(value) {
  if (!(value > 0)) return 4;
  const raw = value / 4, power = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = Math.max(1, [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw));
  return step * 4;
}

// A time axis of `from..to` under a chart area `left..left+width`, with ticks on round instants
// labelled in `zone` (the viewer's unless given). A label is centred on its tick, except where
// that would cross the drawing's edge (0 or `edge`, its viewBox width): a tick at the end of the
// window has its label end at the edge instead of being cut off.
const TICK_CHAR_WIDTH = 6.2;  // the widest digit of the 10px .tick font, with room to spare
function timeAxis(group, from, to, left, width, y, zone, edge) {
  const spans = [5 * MINUTE, 10 * MINUTE, 15 * MINUTE, 30 * MINUTE, HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, DAY];
  const tick = spans.find((s) => (to - from) / s <= 8) || DAY;
  const x = (t) => left + (t - from) / (to - from) * width;
  const right = edge || left + width;
  group.appendChild(svg("line", { x1: left, x2: left + width, y1: y, y2: y, class: "axis" }));
  for (let t = Math.ceil(from / tick) * tick; t <= to; t += tick) {
    group.appendChild(svg("line", { x1: x(t), x2: x(t), y1: y, y2: y + 4, class: "axis" }));
    const text = clockIn(t, zone || VIEWER_ZONE), half = TICK_CHAR_WIDTH * text.length / 2;
    const place = x(t) + half > right - 1 ? { x: right - 1, "text-anchor": "end" }
      : x(t) - half < 1 ? { x: 1, "text-anchor": "start" } : { x: x(t), "text-anchor": "middle" };
    group.appendChild(svg("text", Object.assign(place, { y: y + 16, class: "tick" }), text));
  }
  return x;
}

// A chart of per-bucket series over [from, to): bars side by side, or lines through bucket
// centres. Each bar and point carries data-series, data-at (the bucket's start) and data-value.
function drawChart(container, from, to, bucketMs, series) {
  const values = series.flatMap((s) => [...s.points.values()].filter((v) => v !== null));
  const yMax = niceMax(Math.max(0, ...values));
  // The value axis's labels fit its margin, however large (a lateness of minutes is 7 digits).
  const labels = [0, 1, 2, 3, 4].map((i) => axisLabel(yMax * i / 4));
  const width = 560, height = 190, right = 10, top = 12, bottom = 26;
  const left = Math.max(44, 10 + 7 * Math.max(...labels.map((l) => l.length)));
  const plotW = width - left - right, plotH = height - top - bottom;
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart-svg", role: "img" });
  const y = (v) => top + plotH - v / yMax * plotH;
  for (let i = 0; i <= 4; i += 1) {
    const v = yMax * i / 4;
    root.appendChild(svg("line", { x1: left, x2: left + plotW, y1: y(v), y2: y(v), class: "grid" }));
    root.appendChild(svg("text", { x: left - 4, y: y(v) + 4, class: "tick", "text-anchor": "end" },
      labels[i]));
  }
  const x = timeAxis(root, from, to, left, plotW, top + plotH, undefined, width);
  const bars = series.filter((s) => s.kind === "bar");
  const slot = bucketMs / (to - from) * plotW;
  const barW = Math.max(1, slot * 0.8 / Math.max(1, bars.length));
  for (const s of series) {
    const points = [...s.points.entries()].filter(([, v]) => v !== null).sort((a, b) => a[0] - b[0]);
    if (s.kind === "line" && points.length > 1) {
      root.appendChild(svg("polyline", { class: "line " + s.cls, fill: "none",
        points: points.map(([t, v]) => `${x(Math.min(t + bucketMs / 2, to)).toFixed(1)},${y(v).toFixed(1)}`).join(" ") }));
    }
    for (const [t, v] of points) {
      const label = `${s.name} ${clockIn(t, VIEWER_ZONE)}-${clockIn(t + bucketMs, VIEWER_ZONE)}: ${v}`;
      const data = { "data-series": s.key, "data-at": new Date(t).toISOString(), "data-value": v, class: s.cls };
      if (s.kind === "bar") {
        if (!v) continue;
        // The newest bucket may reach past `to`: its bars end at the plot's edge.
        const offset = Math.min(x(t) + slot * 0.1, left + plotW - barW * bars.length) + bars.indexOf(s) * barW;
        root.appendChild(titled(svg("rect", Object.assign(data, { x: offset.toFixed(1), y: y(v).toFixed(1),
          width: barW.toFixed(1), height: (top + plotH - y(v)).toFixed(1) })), label));
      } else {
        root.appendChild(titled(svg("circle", Object.assign(data, { cx: x(Math.min(t + bucketMs / 2, to)).toFixed(1),
          cy: y(v).toFixed(1), r: 2.5 })), label));
      }
    }
  }
  let lx = left;
  for (const s of series) {
    root.appendChild(svg("rect", { x: lx, y: 0, width: 10, height: 8, class: s.cls }));
    root.appendChild(svg("text", { x: lx + 14, y: 8, class: "tick" }, s.name));
    lx += 24 + 7 * s.name.length;
  }
  container.replaceChildren(root);
}

function nearestRank(sorted, percent) {
  if (!sorted.length) return null;
  return sorted[Math.max(0, Math.ceil(percent / 100 * sorted.length) - 1)];
}

// --- overview: the tenant's last hours, computed here from the public API ----------------------
// No route answers a tenant-wide series, so the page reads each job's newest executions (pages of
// 100, back to the window's start) and the dead letters, with bounds that keep a large tenant's
// page load finite; the coverage line says when a bound was reached.
const OVERVIEW_MAX_JOBS = 200, OVERVIEW_PAGES_PER_JOB = 3, OVERVIEW_PARALLEL = 4;
const FAILED_ATTEMPT = new Set(["FAILED", "TIMED_OUT", "LOST", "DEAD"]);

async function pages(path, maxPages, keepGoing) {
  const items = [];
  let cursor = null, requests = 0, more = false;
  do {
    const page = await api("GET", path + (path.includes("?") ? "&" : "?") + "limit=100" +
      (cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
    requests += 1;
    items.push(...page.items);
    cursor = page.nextCursor;
    more = Boolean(cursor) && (!keepGoing || keepGoing(page.items));
  } while (more && requests < maxPages);
  return { items, requests, capped: more };
}

async function inParallel(things, limit, work) {
  const out = new Array(things.length);
  let next = 0;
  const runners = Array.from({ length: Math.min(limit, things.length) }, async () => {
    while (next < things.length) { const i = next++; out[i] = await work(things[i]); }
  });
  await Promise.all(runners);
  return out;
}

function overviewSeries(executions, deadLetters, from, to) {
  const bucket = Math.max(MINUTE, Math.round((to - from) / 36 / MINUTE) * MINUTE);
  const fires = new Map(), late = new Map(), failed = new Map(), dead = new Map();
  const lateness = [];
  const add = (map, t, size) => { const b = Math.floor(t / size) * size; map.set(b, (map.get(b) || 0) + 1); };
  for (const e of executions) {
    const at = Date.parse(e.scheduledAt);
    if (at >= from && at < to && e.status !== "SKIPPED" && e.status !== "CANCELLED") {
      add(fires, at, MINUTE);
      // A backfilled run is late on purpose: it counts for no lateness (as in the job's stats).
      if (e.lateMs !== null && e.lateMs !== undefined && !e.backfill) {
        lateness.push(e.lateMs);
        const b = Math.floor(at / bucket) * bucket;
        if (!late.has(b)) late.set(b, []);
        late.get(b).push(e.lateMs);
      }
    }
    for (const a of e.attempts || []) {
      const ended = Date.parse(a.finishedAt || a.startedAt || "");
      if (FAILED_ATTEMPT.has(a.status) && ended >= from && ended < to) add(failed, ended, bucket);
    }
  }
  for (const e of deadLetters) {
    const at = Date.parse(e.finishedAt || e.scheduledAt);
    if (at >= from && at < to) add(dead, at, bucket);
  }
  const p50 = new Map(), p99 = new Map();
  for (const [b, values] of late) {
    values.sort((a, b2) => a - b2);
    p50.set(b, nearestRank(values, 50));
    p99.set(b, nearestRank(values, 99));
  }
  lateness.sort((a, b) => a - b);
  const sum = (map) => [...map.values()].reduce((a, b) => a + b, 0);
  return { bucket, fires, p50, p99, failed, dead,
    totals: { fires: sum(fires), p50: nearestRank(lateness, 50), p99: nearestRank(lateness, 99),
      failed: sum(failed), dead: sum(dead) } };
}

function tile(parent, name, label, value, unit) {
  const box = document.createElement("div");
  box.className = "tile";
  box.dataset.tile = name;
  box.dataset.value = value === null ? "" : String(value);
  const big = document.createElement("strong");
  big.textContent = value === null ? "-" : String(value) + (unit || "");
  const small = document.createElement("span");
  small.textContent = label;
  box.append(big, small);
  parent.appendChild(box);
}

let overviewSeq = 0;

async function loadOverview() {
  const seq = ++overviewSeq, hours = $("overview-window").value;
  const to = Date.now(), from = to - Number(hours) * HOUR;
  delete $("overview-view").dataset.loaded;
  $("overview-coverage").textContent = "loading ...";
  const jobs = await pages("v1/jobs", OVERVIEW_MAX_JOBS / 100);
  const histories = await inParallel(jobs.items, OVERVIEW_PARALLEL, (job) =>
    pages("v1/jobs/" + encodeURIComponent(job.jobId) + "/executions", OVERVIEW_PAGES_PER_JOB,
      (items) => items.every((e) => Date.parse(e.scheduledAt) >= from)));
  const dead = await pages("v1/dead-letters", 3);
  if (seq !== overviewSeq) return; // a newer load (another window) draws instead
  const executions = histories.flatMap((h) => h.items);
  const s = overviewSeries(executions, dead.items, from, to);
  const tiles = $("overview-tiles");
  tiles.replaceChildren();
  tile(tiles, "fires", "fires", s.totals.fires);
  tile(tiles, "p50", "lateness p50", s.totals.p50, " ms");
  tile(tiles, "p99", "lateness p99", s.totals.p99, " ms");
  tile(tiles, "failed", "failed attempts", s.totals.failed);
  tile(tiles, "dead", "dead letters", s.totals.dead);
  tile(tiles, "jobs", "jobs", jobs.items.length);
  drawChart($("chart-fires"), from, to, MINUTE, [{ key: "fires", name: "fires", cls: "s-fires", kind: "bar", points: s.fires }]);
  drawChart($("chart-lateness"), from, to, s.bucket, [
    { key: "p50", name: "p50", cls: "s-p50", kind: "line", points: s.p50 },
    { key: "p99", name: "p99", cls: "s-p99", kind: "line", points: s.p99 }]);
  drawChart($("chart-failures"), from, to, s.bucket, [
    { key: "failed", name: "failed attempts", cls: "s-failed", kind: "bar", points: s.failed },
    { key: "dead", name: "dead letters", cls: "s-dead", kind: "bar", points: s.dead }]);
  const requests = jobs.requests + dead.requests + histories.reduce((n, h) => n + h.requests, 0);
  const capped = jobs.capped || dead.capped || histories.some((h) => h.capped);
  $("overview-coverage").textContent = `${executions.length} executions of ${jobs.items.length} jobs, ` +
    `${requests} requests` + (capped ? `; capped (the first ${OVERVIEW_MAX_JOBS} jobs, ` +
    `${OVERVIEW_PAGES_PER_JOB * 100} newest executions each, 300 dead letters)` : "");
  $("overview-view").dataset.loaded = hours;
  if (!$("overview-view").hidden) status(jobs.items.length ? "" : "No jobs yet: create one under New job.");
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
    timeCell(row, job.nextFireAt, job.timezone);
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
const TIME_FIELDS = new Set(["Starts", "Ends", "Next fire", "Created", "Updated"]);

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

// One fire instant in the job's zone and the viewer's, and how far away.
function fireEntry(li, iso, jobZone, note) {
  const ms = Date.parse(iso);
  li.dataset.at = iso;
  li.dataset.note = note || "";
  const own = document.createElement("span");
  own.className = "zone-job";
  own.textContent = inZone(ms, jobZone);
  const yours = document.createElement("span");
  yours.className = "zone-viewer";
  yours.textContent = jobZone === VIEWER_ZONE ? "" : "your zone: " + inZone(ms, VIEWER_ZONE);
  const when = document.createElement("span");
  when.className = "relative";
  when.textContent = relative(ms) + (note ? ", " + note : "");
  li.append(own, yours, when);
  if (note) li.className = "skipped";
}

async function loadJob(jobId) {
  const job = await api("GET", "v1/jobs/" + encodeURIComponent(jobId));
  $("job-name").textContent = job.name;
  // Only the actions the job takes: a one-off job is not paused (the API answers 409), an ended
  // one is neither resumed nor cancelled again.
  const recurring = job.type === "CRON" || job.type === "RATE", open = job.state === "ACTIVE" || job.state === "PAUSED";
  $("pause").hidden = $("pause-reason").parentElement.hidden = !(recurring && job.state === "ACTIVE");
  $("resume").hidden = job.state !== "PAUSED";
  $("cancel").hidden = !open;
  $("edit-job").href = "#edit/" + encodeURIComponent(job.jobId);
  const details = $("job-details");
  details.replaceChildren();
  const fields = [["Job id", job.jobId], ["State", job.state], ["Paused because", job.pausedReason],
    ["Type", job.type], ["Schedule", job.schedule], ["Time zone", job.timezone], ["Next fire", job.nextFireAt],
    ["Target", job.target ? JSON.stringify(job.target) : null],
    ["Steps", job.steps ? job.steps.map((s) => s.name + (s.dependsOn ? " after " + s.dependsOn.join(", ") : "")).join("; ") : null],
    ["Tags", Object.entries(job.tags || {}).map(([k, v]) => k + ":" + v).join(" ")],
    ["Excluded calendars", (job.excludeCalendars || []).join(", ")],
    ["Payload", JSON.stringify(job.payload)], ["Version", job.version], ["Created", job.createdAt],
    ["Updated", job.updatedAt]];
  fields.splice(3, 0, ...boundFields(job));
  for (const [label, value] of fields) {
    if (value === null || value === undefined || value === "") continue;
    const dt = document.createElement("dt");
    dt.textContent = label;
    const dd = document.createElement("dd");
    if (TIME_FIELDS.has(label)) dd.appendChild(timeEl(String(value), job.timezone));
    else dd.textContent = String(value);
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
      .concat((preview && preview.skipped ? preview.skipped : []).map((s) => [s.at, "skipped (" + s.reason + ")"]))
      .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    for (const [at, note] of entries) {
      const li = document.createElement("li");
      fireEntry(li, at, job.timezone, note);
      fires.appendChild(li);
    }
  } else if (job.nextFireAt) {
    const li = document.createElement("li");
    fireEntry(li, job.nextFireAt, job.timezone, "");
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
  let newestRun = null;
  for (const e of executions.items) {
    const run = job.steps ? await api("GET", "v1/executions/" + encodeURIComponent(e.executionId)).catch(() => e) : e;
    if (run.steps && !newestRun) newestRun = run;
    const row = document.createElement("tr");
    const idCell = cell(row, "");
    const link = document.createElement("a");
    link.href = "#execution/" + encodeURIComponent(e.executionId);
    link.textContent = e.executionId;
    idCell.appendChild(link);
    cell(row, e.status, "state-" + e.status);
    timeCell(row, e.scheduledAt, job.timezone);
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
  // A workflow: its newest run drawn as a DAG (or the steps alone, before the first run).
  $("job-run").hidden = !job.steps;
  if (job.steps) {
    $("job-run-title").textContent = newestRun ? "Latest run: " + newestRun.executionId + " (" + newestRun.status + ")"
      : "Steps (not run yet)";
    drawDag($("job-dag"), job.steps, newestRun ? newestRun.steps : []);
  }
  await loadTimeline(job);
}

// --- the occurrence ledger as a timeline -------------------------------------------------------
const TIMELINE_MAX_PAGES = 5;
const LANES = { FIRED: 0, SKIPPED: 1, PENDING: 2 };

function occurrenceLabel(o) {
  return o.outcome === "SKIPPED" ? o.reason || "SKIPPED"
    : o.expectation ? o.expectation : o.outcome === "FIRED" ? o.status || "FIRED" : o.outcome;
}

async function loadTimeline(job) {
  const hours = Number($("timeline-window").value);
  const now = Date.now(), from = now - hours * HOUR, to = now + hours * HOUR / 6;
  const box = $("timeline"), body = $("occurrences-table").tBodies[0];
  box.replaceChildren();
  body.replaceChildren();
  $("timeline-status").textContent = "loading ...";
  const query = "v1/jobs/" + encodeURIComponent(job.jobId) + "/occurrences?from=" +
    encodeURIComponent(new Date(from).toISOString()) + "&to=" + encodeURIComponent(new Date(to).toISOString());
  let read;
  try {
    read = await pages(query, TIMELINE_MAX_PAGES);
  } catch (error) {
    // A deployment without the occurrence ledger answers 404 for its route (the job exists: it
    // was just read); the rest of the page stands.
    $("timeline-status").textContent = error.httpStatus === 404
      ? "The occurrence ledger is not available on this deployment." : "Occurrences: " + error.message;
    $("timeline-status").className = error.httpStatus === 404 ? "unavailable" : "error";
    $("occurrences-table").hidden = true;
    return;
  }
  const items = read.items;
  const counts = {};
  for (const o of items) { const k = o.outcome + (o.outcome === "FIRED" ? "" : " " + (o.reason || "")); counts[k] = (counts[k] || 0) + 1; }
  $("timeline-status").className = "";
  $("timeline-status").textContent = items.length + " occurrences" +
    (items.length ? ": " + Object.entries(counts).map(([k, n]) => k.trim() + " " + n).join(", ") : "") +
    (read.capped ? " (the oldest " + items.length + "; choose a shorter window for the rest)" : "");
  const width = 1100, height = 132, left = 70, right = 12, top = 8, lane = 24;
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "timeline-svg", role: "img" });
  Object.entries(LANES).forEach(([name, i]) => {
    root.appendChild(svg("text", { x: 4, y: top + i * lane + 16, class: "tick" }, name));
    root.appendChild(svg("line", { x1: left, x2: width - right, y1: top + i * lane + 12, y2: top + i * lane + 12,
      class: "grid" }));
  });
  const x = timeAxis(root, from, to, left, width - left - right, top + 3 * lane + 4, job.timezone, width);
  root.appendChild(svg("text", { x: width - right, y: height - 8, class: "tick", "text-anchor": "end" },
    "times in " + job.timezone));
  root.appendChild(svg("line", { x1: x(now), x2: x(now), y1: top, y2: top + 3 * lane, class: "now" }));
  root.appendChild(svg("text", { x: x(now) + 3, y: top + 3 * lane, class: "tick" }, "now"));
  for (const o of items) {
    const at = Date.parse(o.scheduledAt);
    const cy = top + (LANES[o.outcome] === undefined ? 1 : LANES[o.outcome]) * lane + 12;
    const label = occurrenceLabel(o);
    const cls = "occ occ-" + o.outcome + " occ-" + label;
    const mark = o.outcome === "SKIPPED"
      ? svg("rect", { x: (x(at) - 4).toFixed(1), y: cy - 4, width: 8, height: 8, class: cls })
      : svg("circle", { cx: x(at).toFixed(1), cy, r: 5, class: cls });
    for (const [k, v] of Object.entries({ outcome: o.outcome, reason: o.reason || "", at: o.scheduledAt,
      expectation: o.expectation || "" })) mark.setAttribute("data-" + k, v);
    root.appendChild(titled(mark, o.scheduledAt + " " + o.outcome + (o.reason ? " " + o.reason : "") +
      (o.status ? " " + o.status : "") + (o.expectation ? " " + o.expectation : "") +
      (o.lateMs !== null && o.lateMs !== undefined ? ", " + o.lateMs + " ms late" : "")));
  }
  // A legend of what the marks in view mean: one swatch per outcome, reason or expectation.
  let lx = left;
  for (const o of items.filter((o, i) => items.findIndex((p) => occurrenceLabel(p) === occurrenceLabel(o)) === i)) {
    const label = occurrenceLabel(o), cls = "occ occ-" + o.outcome + " occ-" + label, ly = height - 8;
    root.appendChild(o.outcome === "SKIPPED" ? svg("rect", { x: lx, y: ly - 8, width: 8, height: 8, class: cls })
      : svg("circle", { cx: lx + 4, cy: ly - 4, r: 4.5, class: cls }));
    root.appendChild(svg("text", { x: lx + 12, y: ly, class: "tick legend" }, label));
    lx += 26 + 7.2 * label.length;
  }
  box.appendChild(root);
  // Below the timeline, the past (what ran, what was skipped and why), newest first, a page at
  // a time; then what is still to come. Not the last rows of the window: those are its future.
  const pending = items.filter((o) => o.outcome === "PENDING");
  $("occurrences-upcoming").textContent = !pending.length ? ""
    : pending.length + " pending in the window; the next due " + pending[0].scheduledAt;
  ledgerView = { job, floor: from, now, newer: [] };
  await showLedgerPage(now);
}

// The occurrence table's pages: the newest LEDGER_PAGE past occurrences due before `before`
// (exclusive), not before the window's start. The route answers a window oldest first, in pages
// of at most 100 with its cursor: the console asks for a span just before `before`, narrows it
// when it holds more than a page (by the density the page shows), widens it when it holds too
// few, and follows the cursor through the span it keeps.
const LEDGER_PAGE = 50, LEDGER_TRIES = 6, LEDGER_SPAN_PAGES = 3;
let ledgerView = null;

async function ledgerBefore(jobId, floor, before) {
  const path = (from) => "v1/jobs/" + encodeURIComponent(jobId) + "/occurrences?from=" +
    encodeURIComponent(new Date(from).toISOString()) + "&to=" + encodeURIComponent(new Date(before).toISOString());
  let span = Math.min(before - floor, HOUR), from = Math.max(floor, before - span), items = [];
  for (let tries = 0; tries < LEDGER_TRIES; tries++) {
    from = Math.max(floor, before - span);
    const page = await api("GET", path(from) + "&limit=100");
    items = page.items;
    if (page.nextCursor) {  // more than a page in the span: about LEDGER_PAGE of them, the newest
      const reach = Date.parse(items[items.length - 1].scheduledAt) - from + 1;
      const narrower = Math.floor(reach * LEDGER_PAGE / items.length);
      if (narrower < span && tries < LEDGER_TRIES - 1) { span = Math.max(SECOND, narrower); continue; }
      items = (await pages(path(from), LEDGER_SPAN_PAGES)).items;  // dense to the second: read it through
      break;
    }
    if (items.length >= LEDGER_PAGE || from === floor) break;
    span = Math.min(before - floor, span * (items.length ? Math.ceil(2 * LEDGER_PAGE / items.length) : 8));
  }
  const past = items.filter((o) => o.outcome !== "PENDING");
  return { rows: past.slice(-LEDGER_PAGE).reverse(), older: past.length > LEDGER_PAGE || from > floor };
}

async function showLedgerPage(before) {
  const view = ledgerView, body = $("occurrences-table").tBodies[0];
  let page;
  try {
    page = await ledgerBefore(view.job.jobId, view.floor, before);
  } catch (error) {
    $("timeline-status").textContent = "Occurrences: " + error.message;
    $("timeline-status").className = "error";
    return;
  }
  if (view !== ledgerView) return;  // another job or window was chosen meanwhile
  view.before = before;
  view.oldest = page.rows.length ? Date.parse(page.rows[page.rows.length - 1].scheduledAt) : null;
  body.replaceChildren();
  for (const o of page.rows) {
    const row = document.createElement("tr");
    row.className = "occurrence";
    row.dataset.outcome = o.outcome;
    timeCell(row, o.scheduledAt, view.job.timezone);
    cell(row, o.outcome, "occ-" + o.outcome);
    cell(row, [o.reason, o.expectation, o.status].filter(Boolean).join(" · "), "occurrence-reason");
    cell(row, o.lateMs === null || o.lateMs === undefined ? "" : o.lateMs + " ms");
    const exec = cell(row, "");
    if (o.executionId) {
      const link = document.createElement("a");
      link.href = "#execution/" + encodeURIComponent(o.executionId);
      link.textContent = o.executionId;
      exec.appendChild(link);
    }
    body.appendChild(row);
  }
  $("occurrences-table").hidden = !page.rows.length;
  $("ledger-pager").hidden = !page.rows.length || (!page.older && !view.newer.length);
  $("ledger-newer").disabled = !view.newer.length;
  $("ledger-older").disabled = !page.older || view.oldest === null;
  $("ledger-page").textContent = page.rows.length ? "due " + page.rows[page.rows.length - 1].scheduledAt +
    " to " + page.rows[0].scheduledAt + ", newest first" : "";
}

// --- a workflow run as its DAG -----------------------------------------------------------------
// Columns by depth (a step sits one column right of its deepest upstream step), rows in the job's
// order within a column; edges from each upstream step to its dependant.
function drawDag(container, definition, runSteps) {
  const byName = new Map(definition.map((s) => [s.name, s]));
  const state = new Map((runSteps || []).map((s) => [s.name, s]));
  const depth = new Map();
  const depthOf = (name, seen) => {
    if (depth.has(name)) return depth.get(name);
    if (seen.has(name)) return 0; // the API refuses cycles; never loop on one
    seen.add(name);
    const ups = (byName.get(name) || {}).dependsOn || [];
    const d = ups.length ? 1 + Math.max(...ups.map((u) => depthOf(u, seen))) : 0;
    depth.set(name, d);
    return d;
  };
  const columns = [];
  for (const s of definition) {
    const d = depthOf(s.name, new Set());
    (columns[d] = columns[d] || []).push(s.name);
  }
  const w = 170, h = 46, gapX = 60, gapY = 18, pad = 10;
  const rows = Math.max(...columns.map((c) => c.length));
  const width = pad * 2 + columns.length * w + (columns.length - 1) * gapX;
  const height = pad * 2 + rows * h + (rows - 1) * gapY;
  const place = new Map();
  columns.forEach((names, col) => names.forEach((name, row) => {
    const offset = (rows - names.length) * (h + gapY) / 2;
    place.set(name, { x: pad + col * (w + gapX), y: pad + offset + row * (h + gapY) });
  }));
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "dag-svg", role: "img",
    width, height: height });
  const defs = svg("defs");
  const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7,
    markerHeight: 7, orient: "auto-start-reverse" });
  marker.appendChild(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "edge-head" }));
  defs.appendChild(marker);
  root.appendChild(defs);
  for (const s of definition) {
    for (const up of s.dependsOn || []) {
      const a = place.get(up), b = place.get(s.name);
      if (!a || !b) continue;
      const x1 = a.x + w, y1 = a.y + h / 2, x2 = b.x, y2 = b.y + h / 2, mid = (x1 + x2) / 2;
      root.appendChild(svg("path", { d: `M ${x1} ${y1} C ${mid} ${y1}, ${mid} ${y2}, ${x2} ${y2}`, class: "edge",
        "marker-end": "url(#arrow)", "data-from": up, "data-to": s.name }));
    }
  }
  for (const s of definition) {
    const p = place.get(s.name);
    const st = state.get(s.name);
    const stepStatus = st ? st.status : "NOT_RUN";
    const g = svg("g", { class: "dag-node st-" + stepStatus, "data-step": s.name, "data-status": stepStatus,
      transform: `translate(${p.x},${p.y})` });
    g.appendChild(svg("rect", { width: w, height: h, rx: 6 }));
    g.appendChild(svg("text", { x: 10, y: 19, class: "dag-name" }, s.name.length > 22 ? s.name.slice(0, 21) + "…" : s.name));
    g.appendChild(svg("text", { x: 10, y: 36, class: "dag-status" },
      stepStatus.replace("_", " ") + (st && st.attempt > 1 ? " · attempt " + st.attempt : "")));
    titled(g, s.name + ": " + stepStatus + (st && st.error ? " (" + st.error + ")" : ""));
    if (st && st.executionId) {
      const link = svg("a", { href: "#execution/" + encodeURIComponent(st.executionId) });
      link.appendChild(g);
      root.appendChild(link);
    } else {
      root.appendChild(g);
    }
  }
  container.replaceChildren(root);
}

async function loadExecution(executionId) {
  const e = await api("GET", "v1/executions/" + encodeURIComponent(executionId));
  $("execution-title").textContent = (e.steps ? "Run " : e.step ? "Step " + e.step + ": " : "Execution ") + e.executionId;
  $("execution-job").href = e.runId ? "#execution/" + encodeURIComponent(e.runId) : "#job/" + encodeURIComponent(e.jobId);
  $("execution-job").textContent = e.runId ? "its run" : "its job";
  const details = $("execution-details");
  details.replaceChildren();
  for (const [label, value, isTime] of [["Status", e.status], ["Scheduled", e.scheduledAt, true],
    ["Started", e.startedAt, true], ["Finished", e.finishedAt, true],
    ["Duration", e.durationMs === null ? null : e.durationMs + " ms"],
    ["Late", e.lateMs === null ? null : e.lateMs + " ms"], ["Next attempt", e.nextAttemptAt, true],
    ["Error", e.error], ["Trace id", e.traceId]]) {
    if (value === null || value === undefined) continue;
    const dt = document.createElement("dt");
    dt.textContent = label;
    const dd = document.createElement("dd");
    if (isTime) dd.appendChild(timeEl(value)); else dd.textContent = String(value);
    if (label === "Status") { dd.id = "execution-status"; dd.className = "state-" + value; }
    details.append(dt, dd);
  }
  if (e.task) {
    // A container job: its task, the container's exit code, why it stopped, and its logs.
    for (const [label, value, id] of [["Task", e.task.taskArn, "execution-task"],
      ["Exit code", e.task.exitCode, "execution-exit-code"], ["Stopped", e.task.stoppedReason, "execution-stopped"],
      ["Logs", e.task.logUrl, "execution-logs"]]) {
      if (value === null || value === undefined) continue;
      const dt = document.createElement("dt");
      dt.textContent = label;
      const dd = document.createElement("dd");
      dd.id = id;
      if (label === "Logs" && /^https:\/\//.test(value)) {
        const link = document.createElement("a");
        link.href = value;
        link.rel = "noopener noreferrer";
        link.target = "_blank";
        link.textContent = "open the task's logs";
        dd.appendChild(link);
      } else {
        dd.textContent = String(value);  // a local task's output file: shown, not linked
      }
      details.append(dt, dd);
    }
  }
  const body = $("attempts-table").tBodies[0];
  body.replaceChildren();
  // A run has no attempts of its own: its steps each have theirs.
  $("attempts-title").textContent = e.steps ? "Steps" : "Attempts";
  $("attempts-table").tHead.rows[0].cells[0].textContent = e.steps ? "Step" : "Attempt";
  for (const st of e.steps || []) {
    const row = document.createElement("tr");
    const name = cell(row, "");
    const link = document.createElement("a");
    link.href = "#execution/" + encodeURIComponent(st.executionId);
    link.textContent = st.name + (st.attempt > 1 ? " (attempt " + st.attempt + ")" : "");
    name.appendChild(link);
    cell(row, st.status, "state-" + st.status);
    timeCell(row, st.startedAt);
    timeCell(row, st.finishedAt);
    cell(row, st.error);
    body.appendChild(row);
  }
  for (const a of e.attempts) {
    const row = document.createElement("tr");
    cell(row, "#" + a.attempt);
    cell(row, a.status, "state-" + a.status);
    timeCell(row, a.startedAt);
    timeCell(row, a.finishedAt);
    cell(row, a.error);
    body.appendChild(row);
  }
  $("execution-dag").replaceChildren();
  if (e.steps) {
    const job = await api("GET", "v1/jobs/" + encodeURIComponent(e.jobId));
    drawDag($("execution-dag"), job.steps || e.steps.map((s) => ({ name: s.name })), e.steps);
  }
}

// --- the job form: create and edit, with the next fires previewed as you type -----------------
const FORM_FIELDS = ["name", "type", "schedule", "timezone", "runAt", "delaySeconds", "startAt", "endAt", "maxRuns",
  "excludeCalendars", "target", "payload", "more"];
const FIELD_TYPES = { schedule: ["CRON", "RATE", "ONE_TIME"], runAt: ["ONE_TIME"], delaySeconds: ["DELAYED"],
  startAt: ["CRON", "RATE"], endAt: ["CRON", "RATE"], maxRuns: ["CRON", "RATE"], excludeCalendars: ["CRON", "RATE"] };
// The mutable fields a PUT replaces that have no input of their own: edited as JSON.
const MORE_FIELDS = ["steps", "retryPolicy", "timeoutSec", "priority", "overlapPolicy", "misfirePolicy", "jitterSec",
  "heartbeatTimeoutSec", "retryOn4xx", "onSuccess", "onFailure", "flowControl", "tags", "pauseAfterFailures", "expect"];
let editing = null; // the job being edited (its id and version), or null for a new one
let previewTimer = null, previewSeq = 0;

const input = (name) => $("f-" + name);

function fieldError(name, message) {
  const slot = document.querySelector(`[data-error-for="${name}"]`);
  if (!slot) return false;
  slot.textContent = message;
  input(name).classList.toggle("invalid", Boolean(message));
  return true;
}

function clearErrors() { for (const name of FORM_FIELDS) fieldError(name, ""); }

// The API names a field by its path (target.url, steps[2].dependsOn): shown by the input it is in.
function showApiErrors(error) {
  const unplaced = [];
  for (const d of error.details) {
    const top = String(d.field || "").split(/[.[]/)[0];
    const name = FORM_FIELDS.includes(top) ? top : MORE_FIELDS.includes(top) ? "more" : null;
    if (!name || !fieldError(name, (name === "more" || top !== d.field ? d.field + ": " : "") + d.message)) {
      unplaced.push(d.field + ": " + d.message);
    }
  }
  return unplaced;
}

function showTypeFields() {
  const type = input("type").value;
  for (const [name, types] of Object.entries(FIELD_TYPES)) {
    const hidden = !types.includes(type);
    document.querySelector(`label[for="f-${name}"]`).hidden = hidden;
    input(name).parentElement.hidden = hidden;
  }
  $("schedule-hint").textContent = { CRON: "5-field cron, or cron(...)", RATE: "ISO 8601 duration (PT5M), or rate(...)",
    ONE_TIME: "at(2030-01-31T09:00:00) in the zone, or Run at" }[type] || "";
}

function jsonField(name, fallback) {
  const text = input(name).value.trim();
  if (!text) return fallback;
  try { return JSON.parse(text); } catch (e) { throw Object.assign(new Error("not valid JSON: " + e.message), { field: name }); }
}

function formBody() {
  const v = (name) => input(name).value.trim();
  const type = v("type");
  const body = { name: v("name"), type, timezone: v("timezone") || "UTC" };
  const relevant = (name) => !FIELD_TYPES[name] || FIELD_TYPES[name].includes(type);
  for (const name of ["schedule", "runAt", "startAt", "endAt"]) if (relevant(name) && v(name)) body[name] = v(name);
  for (const name of ["delaySeconds", "maxRuns"]) {
    if (!relevant(name) || !v(name)) continue;
    if (!/^\d+$/.test(v(name))) throw Object.assign(new Error("a whole number"), { field: name });
    body[name] = Number(v(name));
  }
  if (relevant("excludeCalendars") && v("excludeCalendars")) {
    body.excludeCalendars = v("excludeCalendars").split(",").map((s) => s.trim()).filter(Boolean);
  }
  const target = jsonField("target", undefined);
  if (target !== undefined) body.target = target;
  const payload = jsonField("payload", undefined);
  if (payload !== undefined) body.payload = payload;
  const more = jsonField("more", {});
  if (typeof more !== "object" || more === null || Array.isArray(more)) {
    throw Object.assign(new Error("an object of job fields"), { field: "more" });
  }
  return Object.assign(body, more);
}

function previewRows(instants, skipped, zone) {
  const body = $("preview-table").tBodies[0];
  body.replaceChildren();
  const rows = instants.map((at) => [at, ""]).concat(skipped.map((s) => [s.at, "skipped (" + s.reason + ")"]))
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  for (const [at, note] of rows) {
    const ms = Date.parse(at);
    const row = document.createElement("tr");
    row.className = "preview-fire" + (note ? " skipped" : "");
    row.dataset.at = at;
    cell(row, inZone(ms, zone), "zone-job");
    cell(row, inZone(ms, VIEWER_ZONE), "zone-viewer");
    cell(row, relative(ms) + (note ? ", " + note : ""), "relative");
    body.appendChild(row);
  }
  $("preview-zones").textContent = "(" + zone + " and yours, " + VIEWER_ZONE + ")";
}

async function refreshPreview() {
  const seq = ++previewSeq;
  const type = input("type").value, zone = input("timezone").value.trim() || "UTC";
  for (const name of ["schedule", "timezone", "runAt", "delaySeconds", "startAt", "endAt", "maxRuns", "excludeCalendars"]) {
    fieldError(name, "");
  }
  $("preview-status").textContent = "";
  try {
    if (type === "DELAYED" || (type === "ONE_TIME" && !input("schedule").value.trim())) {
      const delay = input("delaySeconds").value.trim(), runAt = input("runAt").value.trim();
      if (type === "DELAYED" && !/^\d+$/.test(delay)) { previewRows([], [], zone); return; }
      const ms = type === "DELAYED" ? Date.now() + Number(delay) * SECOND : Date.parse(runAt);
      if (Number.isNaN(ms)) {
        if (runAt) fieldError("runAt", "an RFC 3339 instant such as 2030-01-31T09:00:00Z");
        previewRows([], [], zone);
        return;
      }
      previewRows([new Date(ms).toISOString()], [], zone);
      return;
    }
    const schedule = input("schedule").value.trim();
    if (!schedule) { previewRows([], [], zone); $("preview-status").textContent = "Type a schedule to see its next fires."; return; }
    const query = new URLSearchParams({ type, schedule, timezone: zone, count: "5" });
    for (const name of ["startAt", "endAt", "maxRuns", "excludeCalendars"]) {
      const value = input(name).value.trim();
      if (value && FIELD_TYPES[name].includes(type)) query.set(name, value.replace(/\s+/g, ""));
    }
    const preview = await api("GET", "v1/schedule-preview?" + query.toString());
    if (seq !== previewSeq) return; // a newer keystroke's answer is on its way
    previewRows(preview.fireTimes, preview.skipped || [], zone);
    if (!preview.fireTimes.length) $("preview-status").textContent = "No fire times ahead.";
  } catch (error) {
    if (seq !== previewSeq) return;
    previewRows([], [], zone);
    const unplaced = error.details ? showApiErrors(error) : [];
    if (!error.details || unplaced.length) $("preview-status").textContent = unplaced.join("; ") || error.message;
  }
}

function schedulePreview() {
  clearTimeout(previewTimer);
  previewTimer = setTimeout(() => refreshPreview(), 250);
}

async function openForm(jobId) {
  clearErrors();
  $("job-form").reset();
  editing = null;
  if (jobId) {
    const job = await api("GET", "v1/jobs/" + encodeURIComponent(jobId));
    editing = { jobId: job.jobId, version: job.version };
    for (const name of ["name", "type", "schedule", "timezone", "runAt", "startAt", "endAt"]) input(name).value = job[name] || "";
    input("delaySeconds").value = job.delaySeconds === null || job.delaySeconds === undefined ? "" : String(job.delaySeconds);
    input("maxRuns").value = job.maxRuns ? String(job.maxRuns) : "";
    input("excludeCalendars").value = (job.excludeCalendars || []).join(", ");
    input("target").value = job.target ? JSON.stringify(job.target, null, 1) : "";
    input("payload").value = job.payload === null || job.payload === undefined ? "" : JSON.stringify(job.payload);
    const more = {};
    for (const name of MORE_FIELDS) if (job[name] !== null && job[name] !== undefined) more[name] = job[name];
    input("more").value = JSON.stringify(more, null, 1);
    $("form-title").textContent = "Edit " + job.name;
    $("save-job").textContent = "Save";
  } else {
    input("timezone").value = "UTC";
    $("form-title").textContent = "New job";
    $("save-job").textContent = "Create";
  }
  showTypeFields();
  await refreshPreview();
}

async function saveJob(event) {
  event.preventDefault();
  clearErrors();
  let body;
  try { body = formBody(); } catch (error) {
    if (error.field) fieldError(error.field, error.message); else status(error.message, true);
    return;
  }
  try {
    const job = editing
      ? await api("PUT", "v1/jobs/" + encodeURIComponent(editing.jobId), body, { "If-Match": String(editing.version) })
      : await api("POST", "v1/jobs", body);
    flash = (editing ? "Saved " : "Created ") + job.name + ".";  // shown once the job's page is open
    location.hash = "job/" + encodeURIComponent(job.jobId);
  } catch (error) {
    const unplaced = error.details ? showApiErrors(error) : [];
    status(unplaced.length ? error.message + " (" + unplaced.join("; ") + ")" : error.message, true);
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
async function loadDead(done) {
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
        await loadDead("Redriven: " + e.executionId + ".");  // kept: the reload does not clear it
      } catch (error) { status(error.message, true); }
    });
    cell(row, "").appendChild(button);
    body.appendChild(row);
  }
  status([done, page.items.length ? "" : "No dead letters."].filter(Boolean).join(" "));
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
    timeCell(row, c.updatedAt);
    body.appendChild(row);
  }
  status(page.items.length ? "" : "No calendars.");
}

// --- routing -------------------------------------------------------------------------------
async function route() {
  if (!key()) { show(null); status("Enter an API key to start."); return; }
  const hash = location.hash.slice(1);
  const after = (prefix) => decodeURIComponent(hash.slice(prefix.length));
  status(flash);
  flash = "";
  try {
    if (hash.startsWith("job/")) { show("job-view"); await loadJob(after("job/")); }
    else if (hash.startsWith("execution/")) { show("execution-view"); await loadExecution(after("execution/")); }
    else if (hash.startsWith("edit/")) { show("form-view"); await openForm(after("edit/")); }
    else if (hash === "new") { show("form-view"); await openForm(null); }
    else if (hash === "jobs") { show("jobs-view"); await loadJobs(false); }
    else if (hash === "dead") { show("dead-view"); await loadDead(); }
    else if (hash === "calendars") { show("calendars-view"); await loadCalendars(); }
    else { show("overview-view"); await loadOverview(); }
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
  $("overview-form").addEventListener("submit", (event) => { event.preventDefault(); loadOverview().catch((e) => status(e.message, true)); });
  $("overview-window").addEventListener("change", () => loadOverview().catch((e) => status(e.message, true)));
  $("ledger-older").addEventListener("click", () => {
    if (!ledgerView || ledgerView.oldest === null) return;
    ledgerView.newer.push(ledgerView.before);
    showLedgerPage(ledgerView.oldest);
  });
  $("ledger-newer").addEventListener("click", () => {
    if (ledgerView && ledgerView.newer.length) showLedgerPage(ledgerView.newer.pop());
  });
  $("timeline-window").addEventListener("change", () => {
    api("GET", "v1/jobs/" + encodeURIComponent($("job-view").dataset.jobId)).then(loadTimeline)
      .catch((e) => status(e.message, true));
  });
  $("run-now").addEventListener("click", () => act("POST", "/trigger", undefined, "Triggered."));
  $("pause").addEventListener("click", () => act("POST", "/pause",
    $("pause-reason").value.trim() ? { reason: $("pause-reason").value.trim() } : {}, "Paused."));
  $("resume").addEventListener("click", () => act("POST", "/resume", undefined, "Resumed."));
  $("cancel").addEventListener("click", () => act("DELETE", "", undefined, "Cancelled."));
  $("job-form").addEventListener("submit", saveJob);
  $("job-form").addEventListener("input", schedulePreview);
  input("type").addEventListener("change", () => { showTypeFields(); schedulePreview(); });
  const zones = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : [];
  $("zones").replaceChildren(...zones.map((z) => { const o = document.createElement("option"); o.value = z; return o; }));
  // Relative times age: repaint them while the page stays open.
  setInterval(() => document.querySelectorAll("time[data-ms]").forEach(paintTime), 15000);
  window.addEventListener("hashchange", route);
  route();
});
