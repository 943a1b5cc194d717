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
  // optional: an API a cluster may not serve (a CRD's): read only while discovery lists its group version
  constructor(group, version, plural, {namespaced = true, watch = true, optional = false} = {}) {
    Object.assign(this, {group, version, plural, namespaced, watch, optional});
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
    this.running = true;
    this.items = new Map();
    this.error = "";
    this.abort = new AbortController();
    this.run(this.abort.signal);
  }

  stop() {
    this.running = false;
    if (this.abort) this.abort.abort();
  }

  async run(signal) {
    let backoff = 1000;
    while (!signal.aborted) {
      try {
        if (this.optional && !(await this.served(signal))) {
          this.items = new Map();
          await sleep(POLL_MS, signal);
          continue;
        }
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

  async served(signal) {
    const groups = (await (await request("/apis", signal)).json()).groups || [];
    return groups.some((g) => g.name === this.group && g.versions.some((v) => v.version === this.version));
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
  deployments: new Informer("apps", "v1", "deployments", {watch: false}),
  statefulsets: new Informer("apps", "v1", "statefulsets", {watch: false}),
  daemonsets: new Informer("apps", "v1", "daemonsets", {watch: false}),
  jobs: new Informer("batch", "v1", "jobs", {watch: false}),
  jobsets: new Informer("jobset.x-k8s.io", "v1alpha2", "jobsets", {watch: false, optional: true}),
  leaderworkersets: new Informer("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", {watch: false, optional: true}),
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
const enc = encodeURIComponent;
const condition = (o, type) => (o.status?.conditions || []).find((c) => c.type === type);

// Each view has a URL fragment, so a link to it can be shared: #/object/GROUP/VERSION/PLURAL/NAMESPACE/NAME
// ("core" for the core group, "_" for the namespace of a cluster-scoped object) and #/logs/NAMESPACE/POD/CONTAINER.
function objectHash(apiVersion, plural, namespace, name) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["core", apiVersion];
  return "#/" + ["object", group, version, plural, namespace || "_", name].map(enc).join("/");
}

function logsHash(namespace, pod, container = "", options = {}) {
  const query = new URLSearchParams(Object.entries(options).filter(([, on]) => on !== undefined).map(([k, on]) => [k, String(on)]));
  const path = ["logs", namespace, pod, ...(container ? [container] : [])];
  return "#/" + path.map(enc).join("/") + (query.size ? `?${query}` : "");
}

const link = (hash, text) => el("a", {href: hash}, text);
// A reference (an owner, an event's object) names a kind, the URL needs its resource: its link is a
// #/ref/GROUP/VERSION/KIND/NAMESPACE/NAME view, which resolves the kind when it opens (`openRef`).
const refLink = (ref, namespace) => {
  const [group, version] = (ref.apiVersion || "v1").includes("/") ? ref.apiVersion.split("/") : ["core", ref.apiVersion || "v1"];
  return link("#/" + ["ref", group, version, ref.kind, namespace || "_", ref.name].map(enc).join("/"), `${ref.kind}/${ref.name}`);
};
const podLink = (pod) => link(objectHash("v1", "pods", pod.metadata.namespace, pod.metadata.name), pod.metadata.name);

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
      el("td", {}, link(objectHash("v1", "nodes", "", name), name)),
      el("td", {class: ready && !node.spec.unschedulable ? "ok" : "warn"}, status),
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

const podPhase = (pod) => (pod.metadata.deletionTimestamp ? "Terminating" : pod.status?.phase || "Pending");
const restarts = (pod) => (pod.status?.containerStatuses || []).reduce((n, s) => n + (s.restartCount || 0), 0);

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
    const phase = podPhase(pod);
    return el("tr", {"data-pod": keyOf(pod), "data-phase": phase},
      el("td", {}, pod.metadata.namespace), el("td", {}, podLink(pod)),
      el("td", {class: `phase-${phase}`}, phase), el("td", {}, pod.spec.nodeName || ""), el("td", {}, restarts(pod)),
      el("td", {class: "reason"}, phase === "Running" ? "" : podReason(pod, failedScheduling)),
      el("td", {}, age(pod.metadata.creationTimestamp)),
      el("td", {}, link(logsHash(pod.metadata.namespace, pod.metadata.name), "logs")));
  });
  $("pod-rows").replaceChildren(...rows, ...more(pods.length, 8));
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
      el("td", {}, group.metadata.namespace),
      el("td", {}, link(objectHash("scheduling.k8s.io/v1beta1", "podgroups", group.metadata.namespace, group.metadata.name),
                        group.metadata.name)),
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
      el("td", {}, e.reason), el("td", {}, e.involvedObject ? refLink(e.involvedObject, e.involvedObject.namespace) : ""),
      el("td", {}, e.message + (count > 1 ? ` (x${count})` : "")));
  });
  $("event-rows").replaceChildren(...rows);
}

// Each workload controller's ready pods against those it wants (a Job: against its parallelism while it
// runs), what else its status counts, and the condition that says it is stuck, if one does.
const WORKLOADS = {
  deployments: ["Deployment", (o) => [o.status?.readyReplicas || 0, o.spec.replicas ?? 1],
                (o) => `${o.status?.updatedReplicas || 0} up-to-date, ${o.status?.availableReplicas || 0} available`],
  statefulsets: ["StatefulSet", (o) => [o.status?.readyReplicas || 0, o.spec.replicas ?? 1],
                 (o) => `${o.status?.updatedReplicas || 0} up-to-date, ${o.status?.availableReplicas || 0} available`],
  daemonsets: ["DaemonSet", (o) => [o.status?.numberReady || 0, o.status?.desiredNumberScheduled || 0],
               (o) => `${o.status?.updatedNumberScheduled || 0} up-to-date, ${o.status?.numberAvailable || 0} available` +
                      (o.status?.numberMisscheduled ? `, ${o.status.numberMisscheduled} misscheduled` : "")],
  jobs: ["Job", (o) => [o.status?.ready || 0, finished(o) || o.spec.suspend ? 0 : o.spec.parallelism ?? 1],
         (o) => `${o.status?.succeeded || 0}/${o.spec.completions ?? "-"} succeeded` +
                (o.status?.failed ? `, ${o.status.failed} failed` : "") + (o.spec.suspend ? ", suspended" : "")],
  // a JobSet counts its Jobs (one is ready when its pods are), a LeaderWorkerSet its groups (a leader and its workers)
  jobsets: ["JobSet", (o) => [sum(o.status?.replicatedJobsStatus, "ready"),
                              finished(o) ? 0 : sum(o.spec.replicatedJobs, "replicas", 1)],
            (o) => `${sum(o.status?.replicatedJobsStatus, "succeeded")} jobs succeeded` +
                   `, ${sum(o.status?.replicatedJobsStatus, "failed")} failed`],
  leaderworkersets: ["LeaderWorkerSet", (o) => [o.status?.readyReplicas || 0, o.spec.replicas ?? 1],
                     (o) => `${o.status?.updatedReplicas || 0} up-to-date, ${o.spec.leaderWorkerTemplate?.size ?? 1} pods a group`],
};
const sum = (list, field, missing = 0) => (list || []).reduce((n, x) => n + (x[field] ?? missing), 0);
const finished = (job) => ["Complete", "Completed", "Failed"].find((type) => condition(job, type)?.status === "True");
const STUCK = [["ReplicaFailure", "True"], ["Failed", "True"], ["Progressing", "False"], ["Available", "False"]];

function workloadState(plural, o) {
  const [, readiness, counts] = WORKLOADS[plural];
  const [ready, desired] = readiness(o);
  const stuck = STUCK.map(([type, status]) => condition(o, type)?.status === status && condition(o, type)).find(Boolean);
  return {ready, desired, counts: counts(o), problem: stuck ? `${stuck.reason}: ${stuck.message || ""}` : finished(o) || ""};
}

function drawWorkloads() {
  const all = Object.keys(WORKLOADS).flatMap((plural) => items(plural).map((o) => [plural, o]))
    .sort(([, a], [, b]) => keyOf(a).localeCompare(keyOf(b)));
  const rows = all.slice(0, MAX_ROWS).map(([plural, o]) => {
    const {ready, desired, counts, problem} = workloadState(plural, o);
    const {namespace: ns, name} = o.metadata;
    return el("tr", {"data-workload": `${plural}/${ns}/${name}`},
      el("td", {}, WORKLOADS[plural][0]), el("td", {}, ns),
      el("td", {}, link(objectHash(`${informers[plural].group}/${informers[plural].version}`, plural, ns, name), name)),
      el("td", {class: ready < desired ? "warn" : "ok"}, `${ready}/${desired}`), el("td", {}, counts),
      el("td", {class: ["Complete", "Completed"].includes(problem) ? "ok" : "reason"}, problem), el("td", {}, age(o.metadata.creationTimestamp)));
  });
  $("workload-rows").replaceChildren(...rows, ...more(all.length, 7));
}

function draw() {
  drawTimer = null;
  drawNodes();
  drawPods();
  drawWorkloads();
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

// --- detail views: an object's conditions, pods, events and YAML; a pod's logs -------------------

// The most lines a log view asks for (kubectl logs --tail) and the most characters it keeps as it follows.
const LOG_TAIL = 1000;
const LOG_KEEP = 1 << 20;
// The resources whose detail view lists pods: a node's, a PodGroup's members and a workload's own.
const WITH_PODS = new Set(["nodes", "podgroups", "deployments", "replicasets", "statefulsets", "daemonsets", "jobs",
                           "jobsets", "leaderworkersets"]);
// Where a workload's pods may hang below it: Deployment, ReplicaSet, Pod; JobSet, Job, Pod; LeaderWorkerSet,
// StatefulSet, leader Pod, StatefulSet, Pod.
const OWNERS = ["/apis/apps/v1/namespaces/NS/replicasets", "/apis/apps/v1/namespaces/NS/statefulsets",
                "/apis/batch/v1/namespaces/NS/jobs"];
let detail = null;

async function readList(path, signal) {
  const query = new URLSearchParams({limit: String(MAX_ROWS)});
  return (await (await request(`${path}${path.includes("?") ? "&" : "?"}${query}`, signal)).json()).items;
}

// A part of a view that may fail on its own (RBAC may allow the object but not its events): its items, or why not.
const settled = (promise) => promise.then((items) => ({items}), (e) => {
  if (e.status === 401 || e.name === "AbortError") throw e;
  return {error: e.message};
});

async function podsOf(obj, plural, signal) {
  const {name, namespace: ns, uid} = obj.metadata;
  if (plural === "nodes") return readList(`/api/v1/pods?fieldSelector=${enc(`spec.nodeName=${name}`)}`, signal);
  const pods = await readList(`/api/v1/namespaces/${enc(ns)}/pods`, signal);
  if (plural === "podgroups") return pods.filter((p) => p.spec.schedulingGroup?.podGroupName === name);
  const owners = await Promise.all(OWNERS.map((path) => readList(path.replace("NS", enc(ns)), signal).catch(() => [])));
  const candidates = [...owners.flat(), ...pods];
  const owned = new Set([uid]);
  for (let grew = true; grew;) {
    grew = false;
    for (const o of candidates) {
      if (!owned.has(o.metadata.uid) && (o.metadata.ownerReferences || []).some((r) => owned.has(r.uid))) {
        owned.add(o.metadata.uid);
        grew = true;
      }
    }
  }
  return pods.filter((p) => owned.has(p.metadata.uid));
}

function eventsOf(obj, signal) {
  const ns = obj.metadata.namespace;
  const selector = enc(`involvedObject.uid=${obj.metadata.uid}`);
  return readList(`/api/v1${ns ? `/namespaces/${enc(ns)}` : ""}/events?fieldSelector=${selector}`, signal);
}

// A JSON value as `kubectl get -o yaml` prints it: block style, strings quoted only where YAML would misread them.
const block = (v) => v !== null && typeof v === "object" && Object.keys(v).length > 0;
const plain = (s) => /^[\w./@][\w./@:()-]*( [\w./@:()-]+)*$/.test(s) && !/:( |$)/.test(s)
  && !/^(true|false|yes|no|on|off|null|y|n)$/i.test(s) && (!/^[\d.]/.test(s) || /^\d+(\.\d+)?[a-zA-Z]+$/.test(s));

function scalar(v) {
  if (v !== null && typeof v === "object") return Array.isArray(v) ? "[]" : "{}";
  return typeof v === "string" && !plain(v) ? JSON.stringify(v) : String(v);
}

function yamlLines(value, indent = "") {
  if (Array.isArray(value)) {
    return value.flatMap((v) => {
      if (!block(v)) return [`${indent}- ${scalar(v)}`];
      const [first, ...rest] = yamlLines(v, `${indent}  `);
      return [`${indent}- ${first.trimStart()}`, ...rest];
    });
  }
  return Object.entries(value).flatMap(([k, v]) => (block(v)
    ? [`${indent}${scalar(k)}:`, ...yamlLines(v, Array.isArray(v) ? indent : `${indent}  `)]
    : [`${indent}${scalar(k)}: ${scalar(v)}`]));
}

function table(headings, rows, attrs = {}) {
  return el("table", attrs, el("thead", {}, el("tr", {}, ...headings.map((h) => el("th", {}, h)))),
            el("tbody", {}, ...rows));
}

// One part of a detail view: its heading, then its table, or the error that kept it from being read.
function part(title, result, draw) {
  const body = result.error ? el("p", {class: "error"}, result.error)
    : result.items.length ? draw(result.items) : el("p", {class: "note"}, "none");
  return el("div", {class: "part", "data-part": title.toLowerCase()}, el("h3", {}, title), body);
}

function podRows(pods) {
  return table(["Pod", "Phase", "Node", "Ready", "Restarts", "Reason", ""], pods.map((pod) => {
    const statuses = pod.status?.containerStatuses || [];
    const phase = podPhase(pod);
    return el("tr", {"data-pod": keyOf(pod)}, el("td", {}, podLink(pod)), el("td", {class: `phase-${phase}`}, phase),
      el("td", {}, pod.spec.nodeName || ""), el("td", {}, `${statuses.filter((s) => s.ready).length}/${pod.spec.containers.length}`),
      el("td", {}, restarts(pod)),
      el("td", {class: "reason"}, phase === "Running" ? "" : podReason(pod, new Map())),
      el("td", {}, link(logsHash(pod.metadata.namespace, pod.metadata.name), "logs")));
  }));
}

function summary(obj, plural) {
  const facts = [["Created", `${age(obj.metadata.creationTimestamp)} ago`]];
  for (const ref of obj.metadata.ownerReferences || []) facts.push([ref.controller ? "Controlled by" : "Owned by", refLink(ref, obj.metadata.namespace)]);
  if (plural === "pods") {
    facts.push(["Phase", obj.status?.phase || "Pending"], ["Node", obj.spec.nodeName || "(not scheduled)"]);
    const reason = podReason(obj, new Map());
    if (reason) facts.push(["Reason", reason]);
    facts.push(["Logs", link(logsHash(obj.metadata.namespace, obj.metadata.name), "logs")]);
  }
  if (WORKLOADS[plural]) {
    const {ready, desired, counts, problem} = workloadState(plural, obj);
    facts.push(["Ready", `${ready}/${desired}`], ["Pods", counts]);
    if (problem) facts.push(["Status", problem]);
  }
  return el("dl", {class: "facts"}, ...facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {"data-fact": k}, v)]));
}

function drawObject(obj, plural, pods, events) {
  const {namespace: ns, name} = obj.metadata;
  $("detail-title").textContent = `${obj.kind} ${ns ? `${ns}/` : ""}${name}`;
  const conditions = obj.status?.conditions || [];
  const {managedFields, ...metadata} = obj.metadata;  // hidden, as kubectl get -o yaml hides them
  $("detail-body").replaceChildren(summary(obj, plural),
    conditions.length ? part("Conditions", {items: conditions}, (cs) => table(
      ["Type", "Status", "Reason", "Message", "Last transition"], cs.map((c) => el("tr", {"data-condition": c.type},
        el("td", {}, c.type), el("td", {class: c.status === "True" ? "ok" : "warn"}, c.status), el("td", {}, c.reason || ""),
        el("td", {}, c.message || ""), el("td", {}, c.lastTransitionTime ? age(c.lastTransitionTime) : ""))))) : null,
    pods && part("Pods", pods, podRows),
    part("Events", events, (es) => table(["Last seen", "Type", "Reason", "From", "Message"],
      es.sort((a, b) => eventTime(b) - eventTime(a)).map((e) => el("tr", {"data-reason": e.reason || ""},
        el("td", {}, age(new Date(eventTime(e)).toISOString())), el("td", {class: e.type === "Warning" ? "warn" : ""}, e.type),
        el("td", {}, e.reason), el("td", {}, e.reportingComponent || e.source?.component || ""),
        el("td", {}, e.message + ((e.count || e.series?.count) > 1 ? ` (x${e.count || e.series.count})` : "")))))),
    el("div", {class: "part"}, el("h3", {}, "YAML"),
       el("pre", {class: "yaml", id: "yaml"}, yamlLines({...obj, metadata}).join("\n"))));
}

// Each group version's kinds and their resources, from its discovery (an APIResourceList), read once: a kind's
// resource is no English plural (Endpoints is "endpoints", a CRD names its own).
const resourcesOf = new Map();

function resourceOf(group, version, kind, signal) {
  const key = `${group}/${version}`;
  if (!resourcesOf.has(key)) {
    const path = group === "core" ? `/api/${enc(version)}` : `/apis/${enc(group)}/${enc(version)}`;
    resourcesOf.set(key, request(path, signal).then((resp) => resp.json()).then((list) => new Map(
      list.resources.filter((r) => !r.name.includes("/")).map((r) => [r.kind, r.name]))));
    resourcesOf.get(key).catch(() => resourcesOf.delete(key));  // (a failed read is tried again next time)
  }
  return resourcesOf.get(key).then((kinds) => {
    if (!kinds.has(kind)) throw new Error(`${group}/${version} serves no kind ${kind}`);
    return kinds.get(kind);
  });
}

async function openRef([group, version, kind, ns, name], query, signal) {
  const plural = await resourceOf(group, version, kind, signal);
  if (!signal.aborted) history.replaceState(null, "", "#/" + ["object", group, version, plural, ns, name].map(enc).join("/"));
  return openObject([group, version, plural, ns, name], query, signal);
}

async function openObject([group, version, plural, ns, name], query, signal) {
  const base = group === "core" ? `/api/${enc(version)}` : `/apis/${enc(group)}/${enc(version)}`;
  const path = `${base}${ns === "_" ? "" : `/namespaces/${enc(ns)}`}/${enc(plural)}/${enc(name)}`;
  while (!signal.aborted) {
    const obj = await (await request(path, signal)).json();
    const [pods, events] = await Promise.all([WITH_PODS.has(plural) ? settled(podsOf(obj, plural, signal)) : null,
                                              settled(eventsOf(obj, signal))]);
    if (signal.aborted) return;
    drawObject(obj, plural, pods, events);
    await sleep(POLL_MS, signal);
  }
}

// A container's log as `kubectl logs` reads it (the default container first, its last LOG_TAIL lines), followed
// until the view closes: leaving the view aborts the request, which ends the stream at the server.
async function openLogs([ns, name, chosen], query, signal) {
  const pod = await (await request(`/api/v1/namespaces/${enc(ns)}/pods/${enc(name)}`, signal)).json();
  const names = ["initContainers", "containers", "ephemeralContainers"].flatMap((k) => (pod.spec[k] || []).map((c) => c.name));
  const container = chosen || pod.metadata.annotations?.["kubectl.kubernetes.io/default-container"] || pod.spec.containers[0].name;
  const options = {previous: query.get("previous") === "true", follow: query.get("follow") !== "false"};
  const select = el("select", {id: "log-container"}, ...names.map((n) => el("option", {value: n}, n)));
  select.value = container;
  const box = (key, label) => {
    const input = el("input", {type: "checkbox", id: `log-${key}`});
    input.checked = options[key];
    return el("label", {}, input, ` ${label}`);
  };
  const controls = el("form", {class: "controls"}, el("label", {}, "Container ", select), box("follow", "follow"),
                      box("previous", "previous instance"), " ", link(objectHash("v1", "pods", ns, name), "pod details"));
  controls.addEventListener("change", () => {
    location.hash = logsHash(ns, name, select.value, {previous: $("log-previous").checked || undefined,
                                                      follow: $("log-follow").checked ? undefined : false});
  });
  const log = el("pre", {class: "log", id: "log"});
  const state = el("p", {class: "note", id: "log-state"}, "reading...");
  $("detail-title").textContent = `Logs of ${ns}/${name}`;
  $("detail-body").replaceChildren(controls, log, state);
  const params = new URLSearchParams({container, tailLines: String(LOG_TAIL)});
  if (options.follow) params.set("follow", "true");
  if (options.previous) params.set("previous", "true");
  const resp = await request(`/api/v1/namespaces/${enc(ns)}/pods/${enc(name)}/log?${params}`, signal);
  state.textContent = options.follow ? "following" : "";
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let kept = 0;
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    const bottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    log.append(value);
    kept += value.length;
    if (kept > LOG_KEEP) {
      log.textContent = log.textContent.slice(-LOG_KEEP / 2);
      kept = log.textContent.length;
    }
    if (bottom) log.scrollTop = log.scrollHeight;
  }
  state.textContent = options.follow ? "the container's log ended" : "";
}

const VIEWS = {object: openObject, ref: openRef, logs: openLogs};

// Draws what the URL fragment names: a detail view, or (any other fragment) the overview's sections.
function route() {
  if (detail) detail.abort();
  detail = null;
  const [path, query] = location.hash.slice(1).split("?");
  const parts = path.startsWith("/") ? path.slice(1).split("/").map(decodeURIComponent) : [];
  const open = token && VIEWS[parts[0]];
  $("detail").hidden = !open;
  for (const e of document.querySelectorAll(".view, #namespace-filter")) e.hidden = !token || !!open;
  if (!token) return;
  if (!open) {
    for (const informer of Object.values(informers)) if (!informer.running) informer.start();
    return;
  }
  // a detail view needs none of the overview's watches: closing them leaves it the browser's connections
  for (const informer of Object.values(informers)) informer.stop();
  detail = new AbortController();
  const signal = detail.signal;
  $("detail-title").textContent = "";
  $("detail-error").textContent = "";
  $("detail-body").replaceChildren();
  open(parts.slice(1), new URLSearchParams(query || ""), signal).catch((e) => {
    if (signal.aborted) return;
    if (e.status === 401) signOut("The server no longer accepts this token (401 Unauthorized).");
    else $("detail-error").textContent = e.status ? `${e.status}: ${e.message}` : e.message;
  });
}

// --- signing in and out --------------------------------------------------------------------------

function show(signedIn) {
  $("login").hidden = signedIn;
  for (const e of document.querySelectorAll("nav, #sign-out")) e.hidden = !signedIn;
  route();
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
window.addEventListener("hashchange", route);
$("namespace").addEventListener("change", () => {
  namespace = $("namespace").value.trim();
  for (const informer of Object.values(informers)) if (informer.namespaced && informer.running) informer.start();
  changed();
});

if (token) signIn(token).catch(() => signOut());
else show(false);
