// The nanokube console. Every request is an ordinary API request under the token the user pasted;
// each resource is kept by an informer (list, then watch from the list's resourceVersion, relist on
// 410 Gone), and the page is drawn again from the informers' caches when any of them changes.
"use strict";

const TOKEN_KEY = "nanokube.console.token";
// A browser opens at most six HTTP/1.1 connections to one server and a watch holds one for as long as it
// lasts: five resources are watched, the rest (which seldom change) listed again every POLL_MS.
const POLL_MS = 15000;
const WATCH_SECONDS = 300;
// The most rows a table draws (pending pods first): thousands of nodes or pods would make each redraw slow.
const MAX_ROWS = 500;
const $ = (id) => document.getElementById(id);

let token = sessionStorage.getItem(TOKEN_KEY);
let namespace = "";
let drawTimer = null;

class APIError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
  }
}

async function request(path, signal, init = {}) {
  const headers = {Accept: "application/json", Authorization: `Bearer ${token}`, ...(init.headers || {})};
  const resp = await fetch(path, {...init, headers, signal, credentials: "omit", cache: "no-store"});
  if (!resp.ok) {
    throw new APIError(resp.status, await resp.json().catch(() => null));
  }
  return resp;
}

const sleep = (ms, signal) => new Promise((resolve) => {
  const t = setTimeout(resolve, ms);
  signal.addEventListener("abort", () => { clearTimeout(t); resolve(); }, {once: true});
});

const keyOf = (o) => (o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name);

class Informer {
  constructor(group, version, plural, {namespaced = true, watch = true} = {}) {
    Object.assign(this, {group, version, plural, namespaced, watch});
    this.items = new Map();
    this.error = "";
  }

  path() {
    const base = this.group ? `/apis/${this.group}/${this.version}` : `/api/${this.version}`;
    const ns = this.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : "";
    return `${base}${ns}/${this.plural}`;
  }

  start() {
    this.stop();
    this.items = new Map();
    this.error = "";
    this.abort = new AbortController();
    this.run(this.abort.signal);
  }

  stop() {
    if (this.abort) this.abort.abort();
  }

  async run(signal) {
    let backoff = 1000;
    while (!signal.aborted) {
      try {
        await this.list(signal);
        backoff = 1000;
        if (!this.watch) {
          await sleep(POLL_MS, signal);
          continue;
        }
        while (!signal.aborted && !(await this.watchOnce(signal))) { /* the server ended the watch: resume */ }
      } catch (e) {
        if (signal.aborted) return;
        if (e.status === 401) return signOut("The server no longer accepts this token (401 Unauthorized).");
        const hint = e.status === 403 && this.namespaced && !namespace ? " (pick a namespace)" : "";
        this.error = `${this.plural}: ${e.message}${hint}`;
        changed();
        await sleep(backoff, signal);
        backoff = Math.min(backoff * 2, 30000);
      }
    }
  }

  async list(signal) {
    const items = new Map();
    let cont = "";
    let rv = "";
    do {
      const query = new URLSearchParams({limit: "500"});
      if (cont) query.set("continue", cont);
      const body = await (await request(`${this.path()}?${query}`, signal)).json();
      for (const o of body.items) items.set(keyOf(o), o);
      cont = body.metadata.continue || "";
      rv = body.metadata.resourceVersion;
    } while (cont);
    this.items = items;
    this.resourceVersion = rv;
    this.error = "";
    changed();
  }

  // One watch from the last resourceVersion seen: true when it must relist (410 Gone).
  async watchOnce(signal) {
    const query = new URLSearchParams({watch: "1", allowWatchBookmarks: "true",
                                       resourceVersion: this.resourceVersion, timeoutSeconds: String(WATCH_SECONDS)});
    let resp;
    try {
      resp = await request(`${this.path()}?${query}`, signal);
    } catch (e) {
      if (e.status === 410) return true;
      throw e;
    }
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffered = "";
    for (;;) {
      const {value, done} = await reader.read();
      if (done) return false;
      buffered += value;
      let end;
      while ((end = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, end).trim();
        buffered = buffered.slice(end + 1);
        if (line && this.apply(JSON.parse(line))) {
          reader.cancel().catch(() => {});
          return true;
        }
      }
    }
  }

  apply(event) {
    const o = event.object;
    if (event.type === "ERROR") {
      if (o.code === 410) return true;
      throw new APIError(o.code, o);
    }
    this.resourceVersion = o.metadata.resourceVersion;
    if (event.type === "BOOKMARK") return false;
    if (event.type === "DELETED") this.items.delete(keyOf(o));
    else this.items.set(keyOf(o), o);
    changed();
    return false;
  }
}

const informers = {
  nodes: new Informer("", "v1", "nodes", {namespaced: false}),
  pods: new Informer("", "v1", "pods"),
  events: new Informer("", "v1", "events"),
  resourceclaims: new Informer("resource.k8s.io", "v1", "resourceclaims"),
  podgroups: new Informer("scheduling.k8s.io", "v1beta1", "podgroups"),
  resourceslices: new Informer("resource.k8s.io", "v1", "resourceslices", {namespaced: false, watch: false}),
  workloads: new Informer("scheduling.k8s.io", "v1beta1", "workloads", {watch: false}),
  namespaces: new Informer("", "v1", "namespaces", {namespaced: false, watch: false}),
};

// --- quantities and requests ---------------------------------------------------------------------

const SUFFIXES = {n: 1e-9, u: 1e-6, m: 1e-3, "": 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
                  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60};

function quantity(text) {
  const m = /^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$/.exec(String(text ?? "0").trim());
  return m && m[2] in SUFFIXES ? Number(m[1]) * SUFFIXES[m[2]] : 0;
}

function addTo(total, requests) {
  for (const [name, value] of Object.entries(requests || {})) total[name] = (total[name] || 0) + quantity(value);
}

// What the scheduler counts for a pod: its containers and sidecars, or its largest init container if more.
function podRequests(pod) {
  const total = {};
  for (const c of pod.spec.containers || []) addTo(total, c.resources?.requests);
  const sidecars = {};
  for (const c of pod.spec.initContainers || []) {
    if (c.restartPolicy === "Always") {
      addTo(total, c.resources?.requests);
      addTo(sidecars, c.resources?.requests);
      continue;
    }
    const init = {...sidecars};
    addTo(init, c.resources?.requests);
    for (const [name, value] of Object.entries(init)) total[name] = Math.max(total[name] || 0, value);
  }
  addTo(total, pod.spec.overhead);
  return total;
}

const terminal = (pod) => ["Succeeded", "Failed"].includes(pod.status?.phase);
const cores = (n) => (Math.round(n * 100) / 100).toString();
const gib = (n) => `${(n / 2 ** 30).toFixed(1)}Gi`;

function age(timestamp) {
  const s = Math.max(0, (Date.now() - Date.parse(timestamp)) / 1000);
  if (!Number.isFinite(s)) return "";
  if (s < 120) return `${Math.floor(s)}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  return s < 172800 ? `${Math.floor(s / 3600)}h` : `${Math.floor(s / 86400)}d`;
}

// --- drawing -------------------------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else e.setAttribute(k, v);
  }
  e.append(...children.filter((c) => c !== null && c !== undefined).map((c) => (c instanceof Node ? c : String(c))));
  return e;
}

function usage(used, total, format) {
  if (!total) return "";
  const bar = el("span", {class: "bar"}, el("span"));
  bar.firstChild.style.width = `${Math.min(100, (100 * used) / total)}%`;
  return el("span", {}, bar, `${format(used)} / ${format(total)}`);
}

const items = (name) => [...informers[name].items.values()];

// The row that says how many a table left out, if it left any.
const more = (count, columns) => (count > MAX_ROWS
  ? [el("tr", {}, el("td", {colspan: columns, class: "note"}, `${count - MAX_ROWS} more not shown; pick a namespace`))] : []);

function drawNodes() {
  const requested = {};
  const podCount = {};
  for (const pod of items("pods")) {
    const node = pod.spec.nodeName;
    if (!node || terminal(pod)) continue;
    const used = requested[node] ??= {};
    for (const [name, value] of Object.entries(podRequests(pod))) used[name] = (used[name] || 0) + value;
    podCount[node] = (podCount[node] || 0) + 1;
  }
  const allocated = new Set();
  for (const claim of items("resourceclaims")) {
    for (const r of claim.status?.allocation?.devices?.results || []) allocated.add(`${r.driver}/${r.pool}/${r.device}`);
  }
  const devices = {};
  for (const slice of items("resourceslices")) {
    const node = slice.spec.nodeName;
    if (!node) continue;
    const perDriver = (devices[node] ??= {})[slice.spec.driver] ??= [0, 0];
    for (const d of slice.spec.devices || []) {
      perDriver[1] += 1;
      if (allocated.has(`${slice.spec.driver}/${slice.spec.pool.name}/${d.name}`)) perDriver[0] += 1;
    }
  }
  $("requests-note").textContent = namespace ? `(requests of the pods in ${namespace} only)` : "";
  const nodes = items("nodes").sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  const rows = nodes.slice(0, MAX_ROWS).map((node) => {
    const name = node.metadata.name;
    const alloc = node.status?.allocatable || {};
    const used = requested[name] || {};
    const ready = (node.status?.conditions || []).find((c) => c.type === "Ready")?.status === "True";
    const status = (ready ? "Ready" : "NotReady") + (node.spec.unschedulable ? ", cordoned" : "");
    // GPUs either way a node offers them: as an extended resource (a device plugin's) or as DRA devices
    let [gpusUsed, gpus] = [0, 0];
    for (const r of Object.keys(alloc).filter((r) => r.includes("gpu"))) [gpusUsed, gpus] = [gpusUsed + (used[r] || 0), gpus + quantity(alloc[r])];
    const dra = Object.entries(devices[name] || {});
    for (const [, [inUse, all]] of dra.filter(([driver]) => driver.includes("gpu"))) [gpusUsed, gpus] = [gpusUsed + inUse, gpus + all];
    return el("tr", {"data-node": name, "data-ready": String(ready)},
      el("td", {}, name), el("td", {class: ready && !node.spec.unschedulable ? "ok" : "warn"}, status),
      el("td", {}, usage(used.cpu || 0, quantity(alloc.cpu), cores)),
      el("td", {}, usage(used.memory || 0, quantity(alloc.memory), gib)),
      el("td", {}, usage(gpusUsed, gpus, String)),
      el("td", {}, dra.map(([driver, [inUse, all]]) => `${driver} ${inUse}/${all}`).join(", ")),
      el("td", {}, `${podCount[name] || 0} / ${alloc.pods || "?"}`));
  });
  $("nodes").replaceChildren(...rows, ...more(nodes.length, 7));
}

// Why a pod is not running: the scheduler's PodScheduled condition (else its latest FailedScheduling
// event, its scheduling gates or its gang), or the first container's waiting or terminated reason.
function podReason(pod, failedScheduling) {
  const scheduled = (pod.status?.conditions || []).find((c) => c.type === "PodScheduled");
  if (scheduled?.status === "False") return `${scheduled.reason}: ${scheduled.message || ""}`;
  if (!pod.spec.nodeName && failedScheduling.has(keyOf(pod))) return failedScheduling.get(keyOf(pod));
  if (pod.spec.schedulingGates?.length) return `SchedulingGated: ${pod.spec.schedulingGates.map((g) => g.name).join(", ")}`;
  const group = pod.spec.schedulingGroup?.podGroupName;
  if (!pod.spec.nodeName && group) return `waiting for the rest of PodGroup ${group}`;
  for (const s of [...(pod.status?.initContainerStatuses || []), ...(pod.status?.containerStatuses || [])]) {
    const state = s.state?.waiting || s.state?.terminated;
    if (state?.reason && state.reason !== "Completed") return state.message ? `${state.reason}: ${state.message}` : state.reason;
  }
  return pod.status?.reason || "";
}

function drawPods() {
  const failedScheduling = new Map();
  for (const e of items("events").sort((a, b) => eventTime(a) - eventTime(b))) {
    if (e.reason === "FailedScheduling" && e.involvedObject?.kind === "Pod") {
      failedScheduling.set(`${e.involvedObject.namespace}/${e.involvedObject.name}`, `FailedScheduling: ${e.message}`);
    }
  }
  const pending = (pod) => (pod.spec.nodeName ? 1 : 0);
  const pods = items("pods").sort((a, b) => pending(a) - pending(b) || keyOf(a).localeCompare(keyOf(b)));
  const rows = pods.slice(0, MAX_ROWS).map((pod) => {
    const phase = pod.metadata.deletionTimestamp ? "Terminating" : pod.status?.phase || "Pending";
    const restarts = (pod.status?.containerStatuses || []).reduce((n, s) => n + (s.restartCount || 0), 0);
    return el("tr", {"data-pod": keyOf(pod), "data-phase": phase},
      el("td", {}, pod.metadata.namespace), el("td", {}, pod.metadata.name),
      el("td", {class: `phase-${phase}`}, phase), el("td", {}, pod.spec.nodeName || ""), el("td", {}, restarts),
      el("td", {class: "reason"}, phase === "Running" ? "" : podReason(pod, failedScheduling)),
      el("td", {}, age(pod.metadata.creationTimestamp)));
  });
  $("pod-rows").replaceChildren(...rows, ...more(pods.length, 7));
}

function drawGroups() {
  const members = {};
  for (const pod of items("pods")) {
    const group = pod.spec.schedulingGroup?.podGroupName;
    if (group) (members[`${pod.metadata.namespace}/${group}`] ??= []).push(pod);
  }
  const rows = items("podgroups").sort((a, b) => keyOf(a).localeCompare(keyOf(b))).map((group) => {
    const pods = (members[keyOf(group)] || []).filter((p) => !terminal(p));
    const ref = group.spec.workloadRef;
    const gang = group.spec.schedulingPolicy?.gang;
    const condition = (group.status?.conditions || []).find((c) => c.type === "PodGroupInitiallyScheduled");
    const scheduled = pods.filter((p) => p.spec.nodeName).length;
    let status = "waiting for pods";
    if (condition?.status === "True") status = "scheduled";
    else if (condition) status = `${condition.reason}: ${condition.message || ""}`;
    else if (gang && pods.length < gang.minCount) status = `waiting for ${gang.minCount - pods.length} more pod(s)`;
    const workload = ref ? `${ref.workloadName} / ${ref.templateName}` : "standalone";
    const known = ref && informers.workloads.items.has(`${group.metadata.namespace}/${ref.workloadName}`);
    return el("tr", {"data-podgroup": keyOf(group), "data-gang": status},
      el("td", {}, group.metadata.namespace), el("td", {}, group.metadata.name),
      el("td", {}, workload + (ref && !known ? " (not found)" : "")),
      el("td", {}, gang ? `gang, min ${gang.minCount}` : "basic"), el("td", {}, pods.length),
      el("td", {}, scheduled), el("td", {}, pods.filter((p) => p.status?.phase === "Running").length),
      el("td", {class: condition?.status === "True" ? "ok" : "warn"}, status));
  });
  $("group-rows").replaceChildren(...rows);
}

const eventTime = (e) => Date.parse(e.lastTimestamp || e.eventTime || e.metadata.creationTimestamp) || 0;

function drawEvents() {
  const rows = items("events").sort((a, b) => eventTime(b) - eventTime(a)).slice(0, 50).map((e) => {
    const count = e.count || e.series?.count;
    return el("tr", {"data-reason": e.reason || ""},
      el("td", {}, age(new Date(eventTime(e)).toISOString())), el("td", {class: e.type === "Warning" ? "warn" : ""}, e.type),
      el("td", {}, e.reason), el("td", {}, `${e.involvedObject?.kind}/${e.involvedObject?.name}`),
      el("td", {}, e.message + (count > 1 ? ` (x${count})` : "")));
  });
  $("event-rows").replaceChildren(...rows);
}

function draw() {
  drawTimer = null;
  drawNodes();
  drawPods();
  drawGroups();
  drawEvents();
  $("namespaces").replaceChildren(...items("namespaces").map((n) => el("option", {value: n.metadata.name})));
  for (const p of document.querySelectorAll("[data-errors-of]")) {
    p.textContent = p.dataset.errorsOf.split(" ").map((name) => informers[name].error).filter(Boolean).join("; ");
  }
}

function changed() {
  drawTimer ??= setTimeout(draw, 100);
}

// --- signing in and out --------------------------------------------------------------------------

function show(signedIn) {
  $("login").hidden = signedIn;
  for (const e of document.querySelectorAll(".view, nav, #sign-out, #namespace-filter")) e.hidden = !signedIn;
}

async function signIn(candidate) {
  token = candidate;
  const review = {apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview"};
  const resp = await request("/apis/authentication.k8s.io/v1/selfsubjectreviews", undefined,
                             {method: "POST", body: JSON.stringify(review), headers: {"Content-Type": "application/json"}});
  const user = (await resp.json()).status.userInfo;
  sessionStorage.setItem(TOKEN_KEY, token);
  $("who").textContent = user.username;
  $("login-error").textContent = "";
  show(true);
  for (const informer of Object.values(informers)) informer.start();
}

function signOut(message = "") {
  for (const informer of Object.values(informers)) informer.stop();
  sessionStorage.removeItem(TOKEN_KEY);
  token = null;
  $("who").textContent = "";
  $("login-error").textContent = message;
  show(false);
}

$("login-form").addEventListener("submit", (e) => {
  e.preventDefault();
  signIn($("token").value.trim()).catch((err) => signOut(
    err.status === 401 ? "The server does not accept this token (401 Unauthorized)." : `Signing in failed: ${err.message}`));
  $("token").value = "";
});
$("sign-out").addEventListener("click", () => signOut());
$("namespace").addEventListener("change", () => {
  namespace = $("namespace").value.trim();
  for (const informer of Object.values(informers)) if (informer.namespaced) informer.start();
  changed();
});

if (token) signIn(token).catch(() => signOut());
else show(false);
