"""Concurrent writers and watchers against `nanokube up`: nothing lost, nothing reordered (race57).

Starts `nanokube up` (a fresh temporary data dir, --port 0) on SQLite (or --store etcd: an etcd of its
own, as the tests start it; scripts/etcd.sh installs it), optionally with --api-workers N, and drives
concurrent clients for --seconds, each on a keep-alive connection of its own (so that several workers'
SO_REUSEPORT spreads them), in the namespace `race`:

- counters: ConfigMaps incremented by GET + PUT with the read resourceVersion, again on 409; and by
  JSON patches `test` + `replace` without a resourceVersion, again on 422: each final value equals
  the increments acknowledged (no silent overwrite, a patch applied to the latest object);
- merge, strategic-merge and JSON patches, and server-side applies by many field managers, of
  disjoint keys of one ConfigMap each, plus applies of one contested key, forced or not: every key
  holds its newest acknowledged value, the contested key's owner in managedFields is its writer;
- creates with generateName (names distinct, each readable through a list at once) and deletes with
  uid and resourceVersion preconditions, two clients racing for one delete;
- objects with a finalizer deleted while other clients patch them, then released; pods deleted with
  a grace period while other clients patch their status, then deleted at once;
- a custom resource with /status and /scale, each counter incremented through one of the main
  resource, /status and /scale (GET + PUT, 409 again): none overwrites another's field, and each
  answer shows the write it made;
- watchers of the ConfigMaps, pods and custom resources: from a list's resourceVersion without end,
  resuming from their last resourceVersion every few seconds (server-side timeouts), relisting every
  few seconds, streaming lists (sendInitialEvents) every few seconds, some with a label selector
  that objects enter and leave, and each unending one replayed from a past revision on another
  connection (and listed exactly at its revision) now and then; each checks the order
  (revisions strictly increasing, ADDED/MODIFIED/DELETED as its view allows), and at the end its view
  must equal a final LIST, and the unending unfiltered ones must have seen every acknowledged write's
  resourceVersion.

Every client also checks that its own acknowledged writes' resourceVersions increase, and reads on a
second connection (another worker, likely) see them. Prints what ran and every violation; exits 1 if
there was one. Not part of the suite (a minute of two cores per run); its runs are in
benchmarks/README.md ("Fuzz: concurrent writers and watchers").

    .venv/bin/python scripts/race.py --seconds 60 --clients 24
    .venv/bin/python scripts/race.py --api-workers 3
    .venv/bin/python scripts/race.py --store etcd
    .venv/bin/python scripts/race.py --kubeconfig KUBECONFIG   # a running server instead
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import contextlib
import json
import random
import re
import shutil
import ssl
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

NS = "race"
CM = f"/api/v1/namespaces/{NS}/configmaps"
GROUP = "race.nanokube.test"
TALLIES = f"/apis/{GROUP}/v1/namespaces/{NS}/tallies"
PODS = f"/api/v1/namespaces/{NS}/pods"
FINALIZER = "race.nanokube.test/hold"
JSON, MERGE, SMP, APPLY, JSONPATCH = ("application/json", "application/merge-patch+json",
                                      "application/strategic-merge-patch+json", "application/apply-patch+yaml",
                                      "application/json-patch+json")
#: what the final checks wait for a watcher to reach before calling it stalled
SETTLE = 30.0


class Run:
    """What every client shares: the server, the violations found, the counts and acknowledged writes."""

    def __init__(self, kubeconfig: str, seconds: float) -> None:
        cfg = yaml.safe_load(open(kubeconfig))
        cluster, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
        self.url = cluster["server"]
        d = tempfile.mkdtemp(prefix="nanokube-race-")
        for k in ("client-certificate-data", "client-key-data"):
            Path(d, k).write_bytes(base64.b64decode(user[k]))
        self.ssl = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        self.ssl.load_cert_chain(f"{d}/client-certificate-data", f"{d}/client-key-data")
        shutil.rmtree(d)
        self.seconds = seconds
        self.deadline = float("inf")  # set once the set-up is made
        self.violations: list[str] = []
        self.counts: collections.Counter = collections.Counter()
        self.statuses: collections.Counter = collections.Counter()
        #: (path of the collection, name) -> resourceVersions of the acknowledged writes that left the object
        self.acked: dict[tuple[str, str], list[int]] = collections.defaultdict(list)
        #: (collection, name) deleted for good by an acknowledged request
        self.deleted: set[tuple[str, str]] = set()

    def violation(self, what: str) -> None:
        if len(self.violations) < 200:
            print(f"VIOLATION {what}", flush=True)
        self.violations.append(what)

    def going(self) -> bool:
        return time.monotonic() < self.deadline

    def client(self, name: str) -> Client:
        return Client(self, name)


class Client:
    """One keep-alive connection; checks that its acknowledged writes' resourceVersions increase."""

    def __init__(self, run: Run, name: str) -> None:
        self.run, self.name = run, name
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=run.ssl, limit=1),
            timeout=aiohttp.ClientTimeout(total=None, sock_read=120))
        self.last_ack = 0
        #: (collection, name) -> the revision of this client's last acknowledged write of it
        self.mine: dict[tuple[str, str], int] = {}

    async def close(self) -> None:
        await self.session.close()

    async def req(self, method: str, path: str, body=None, ctype: str = JSON, **params) -> tuple[int, dict]:
        """(status, JSON body); a 429 or a connection error is tried again (and counted)."""
        data = body if body is None or isinstance(body, (bytes, str)) else json.dumps(body)
        for _ in range(20):
            try:
                async with self.session.request(method, self.run.url + path, data=data, params=params or None,
                                                headers={"Content-Type": ctype, "Accept": JSON}) as r:
                    status, raw = r.status, await r.read()
            except (aiohttp.ClientError, asyncio.TimeoutError) as e:
                self.run.counts[f"connection error {type(e).__name__}"] += 1
                await asyncio.sleep(0.2)
                continue
            self.run.statuses[status] += 1
            if status == 429:
                await asyncio.sleep(0.2)
                continue
            if status >= 500:
                self.run.violation(f"{self.name}: {method} {path} -> {status} {raw[:300]!r}")
            return status, json.loads(raw) if raw else {}
        raise RuntimeError(f"{method} {path}: no answer after 20 tries")

    def acked(self, coll: str, obj: dict, what: str) -> int:
        """An acknowledged write that left `obj`: its revision, checked against this client's last."""
        rv = int(obj["metadata"]["resourceVersion"])
        if rv <= self.last_ack:
            self.run.violation(f"{self.name}: {what} acknowledged at rv {rv}, after its write at rv {self.last_ack}")
        self.last_ack = max(self.last_ack, rv)
        self.run.acked[(coll, obj["metadata"]["name"])].append(rv)
        self.mine[(coll, obj["metadata"]["name"])] = rv
        return rv

    def read(self, coll: str, obj: dict, by: Client) -> None:
        """`by` read `obj` after this client's last write of it (read-your-writes, through any worker)."""
        rv, name = int(obj["metadata"]["resourceVersion"]), obj["metadata"]["name"]
        if rv < self.mine.get((coll, name), 0):
            self.run.violation(f"{by.name}: read {name} at rv {rv}, older than {self.name}'s write at {self.mine[(coll, name)]}")


def cm(name: str, data: dict | None = None, **meta) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}, "data": data or {}}


# --- writers ----------------------------------------------------------------------------------


async def counter_put(c: Client, reader: Client, name: str, done: collections.Counter) -> None:
    """GET (on another connection) + PUT with the read resourceVersion, again on 409."""
    while c.run.going():
        status, obj = await reader.req("GET", f"{CM}/{name}")
        c.read(CM, obj, reader)
        rv = int(obj["metadata"]["resourceVersion"])
        n = int(obj["data"]["n"])
        obj["data"]["n"] = str(n + 1)
        status, out = await c.req("PUT", f"{CM}/{name}", obj)
        if status == 200:
            done[name] += 1
            c.acked(CM, out, f"PUT {name}")
            if out["data"]["n"] != str(n + 1) or int(out["metadata"]["resourceVersion"]) <= rv:
                c.run.violation(f"{c.name}: PUT {name} n={n + 1} at rv>{rv} answered {out['metadata']}")
        elif status != 409:
            c.run.violation(f"{c.name}: PUT {name} -> {status} {out}")
        else:
            c.run.counts["counter PUT 409"] += 1


async def counter_test_patch(c: Client, name: str, done: collections.Counter) -> None:
    """A JSON patch that tests the value read and replaces it, without a resourceVersion: applied to the
    latest object (422 when the value moved), never to a stale one."""
    while c.run.going():
        status, obj = await c.req("GET", f"{CM}/{name}")
        n = int(obj["data"]["n"])
        patch = [{"op": "test", "path": "/data/n", "value": str(n)},
                 {"op": "replace", "path": "/data/n", "value": str(n + 1)}]
        status, out = await c.req("PATCH", f"{CM}/{name}", patch, JSONPATCH)
        if status == 200:
            done[name] += 1
            c.acked(CM, out, f"test-patch {name}")
        elif status == 422:
            c.run.counts["test-patch 422"] += 1
        else:
            c.run.violation(f"{c.name}: test-patch {name} -> {status} {out}")


async def disjoint_patches(c: Client, i: int, last: dict) -> None:
    """Merge, strategic and JSON patches of this client's own keys of `patched`, no resourceVersion."""
    seq = 0
    kinds = [(MERGE, lambda k, v: {"data": {k: v}}), (SMP, lambda k, v: {"data": {k: v}}),
             (JSONPATCH, lambda k, v: [{"op": "add", "path": f"/data/{k}", "value": v}])]
    while c.run.going():
        seq += 1
        ctype, body = kinds[seq % 3]
        key = f"p{i}-{seq % 3}"
        status, out = await c.req("PATCH", f"{CM}/patched", body(key, str(seq)), ctype)
        if status != 200:
            c.run.violation(f"{c.name}: patch {ctype} {key} -> {status} {out}")
            continue
        rv = c.acked(CM, out, f"patch {key}")
        last[key] = max(last.get(key, (0, "")), (rv, str(seq)))
        if out["data"].get(key) != str(seq):
            c.run.violation(f"{c.name}: patch {key}={seq} answered {out['data'].get(key)}")


async def applies(c: Client, i: int, last: dict, contested: list) -> None:
    """Server-side applies by manager a<i> of its own key of `applied`, and every fourth time by manager
    c<i> of the contested key (forced every other time): disjoint applies never conflict, an unforced one
    only over the key another manager holds."""
    seq = 0
    while c.run.going():
        seq += 1
        contest = seq % 4 == 0
        force = seq % 8 == 0
        manager = f"c{i}" if contest else f"a{i}"
        data = {"contested": f"{manager}-{seq}"} if contest else {f"{manager}-k": str(seq)}
        body = json.dumps(cm("applied", data))
        status, out = await c.req("PATCH", f"{CM}/applied", body, APPLY, fieldManager=manager,
                                  **({"force": "true"} if force else {}))
        if status == 409 and contest and not force:
            c.run.counts["apply conflict 409"] += 1
            continue
        if status != 200:
            c.run.violation(f"{c.name}: apply {data} force={force} -> {status} {out}")
            continue
        rv = c.acked(CM, out, f"apply {manager}")
        if contest:
            contested.append((rv, manager, data["contested"]))
        else:
            last[f"{manager}-k"] = max(last.get(f"{manager}-k", (0, "")), (rv, str(seq)))


async def generated(c: Client, other: Client, names: dict, gone: set) -> None:
    """Creates with generateName, each then listed at once (read-your-writes through any worker), and
    deletes with uid or resourceVersion preconditions, a stale one refused."""
    mine: list[dict] = []
    while c.run.going():
        status, out = await c.req("POST", CM, cm("", {"by": c.name}, generateName="gen-", labels={"race": "gen"}))
        if status != 201:
            c.run.violation(f"{c.name}: create gen- -> {status} {out}")
            continue
        name = out["metadata"]["name"]
        if name in names:
            c.run.violation(f"{c.name}: generateName gave {name} twice")
        names[name] = out["metadata"]["uid"]
        rv = c.acked(CM, out, "create gen")
        status, listed = await other.req("GET", CM, fieldSelector=f"metadata.name={name}")
        if int(listed["metadata"]["resourceVersion"]) < rv or [o["metadata"]["name"] for o in listed["items"]] != [name]:
            c.run.violation(f"{c.name}: list after create {name}@{rv}: rv {listed['metadata']['resourceVersion']}, "
                            f"{[o['metadata']['name'] for o in listed['items']]}")
        mine.append(out)
        if len(mine) < 3:
            continue
        victim = mine.pop(0)
        vm = victim["metadata"]
        # a stale precondition first: another client's label moves the object on
        status, moved = await c.req("PATCH", f"{CM}/{vm['name']}", {"metadata": {"labels": {"touched": "1"}}}, MERGE)
        if status != 200:
            c.run.violation(f"{c.name}: label {vm['name']} -> {status} {moved}")
            continue
        c.acked(CM, moved, "label gen")
        status, out = await c.req("DELETE", f"{CM}/{vm['name']}",
                                  {"preconditions": {"resourceVersion": vm["resourceVersion"]}})
        if status != 409:
            c.run.violation(f"{c.name}: delete {vm['name']} with stale rv {vm['resourceVersion']} -> {status} {out}")
        pre = {"uid": vm["uid"]} if random.random() < 0.5 else {"resourceVersion": moved["metadata"]["resourceVersion"]}
        body = {"preconditions": pre}
        (s1, o1), (s2, o2) = await asyncio.gather(c.req("DELETE", f"{CM}/{vm['name']}", body),
                                                  other.req("DELETE", f"{CM}/{vm['name']}", body))
        if sorted((s1, s2)) not in ([200, 404], [200, 409]):
            c.run.violation(f"{c.name}: two deletes of {vm['name']} {pre} -> {s1} {s2} {o1} {o2}")
        else:
            gone.add(vm["name"])
            c.run.deleted.add((CM, vm["name"]))


async def finalized(c: Client, helpers: list[Client], n: int, stats: collections.Counter) -> None:
    """An object with a finalizer, deleted while `helpers` patch its labels; then released. A patch after
    the deletion keeps its deletionTimestamp, one adding a finalizer is refused, and the release removes
    the object."""
    while c.run.going():
        n += 1
        name = f"fin-{c.name}-{n}"
        status, out = await c.req("POST", CM, cm(name, {"x": "0"}, finalizers=[FINALIZER]))
        if status != 201:
            c.run.violation(f"{c.name}: create {name} -> {status} {out}")
            continue
        c.acked(CM, out, "create fin")
        stop = asyncio.Event()

        async def patcher(h: Client, j: int) -> None:
            k = 0
            while not stop.is_set():
                k += 1
                status, out = await h.req("PATCH", f"{CM}/{name}", {"metadata": {"labels": {f"h{j}": str(k)}}}, MERGE)
                if status == 404:
                    return
                if status != 200:
                    c.run.violation(f"{h.name}: label {name} -> {status} {out}")
                    return
                h.run.acked[(CM, name)].append(int(out["metadata"]["resourceVersion"]))
                stats["patched while finalized"] += 1

        tasks = [asyncio.create_task(patcher(h, j)) for j, h in enumerate(helpers)]
        await asyncio.sleep(0.05)
        status, out = await c.req("DELETE", f"{CM}/{name}")
        deleting = status == 200 and out.get("metadata", {}).get("deletionTimestamp")
        if not deleting:  # (the checks below would only repeat it)
            c.run.violation(f"{c.name}: delete {name} with a finalizer -> {status} {out}")
            await c.req("DELETE", f"{CM}/{name}")
        await asyncio.sleep(0.1)
        status, out = await c.req("PATCH", f"{CM}/{name}", {"metadata": {"finalizers": [FINALIZER, "race/more"]}}, MERGE)
        if status != 422 and deleting:
            c.run.violation(f"{c.name}: adding a finalizer to deleted {name} -> {status} {out.get('metadata')}")
        status, out = await c.req("GET", f"{CM}/{name}")
        if (status != 200 or not out["metadata"].get("deletionTimestamp")) and deleting:
            c.run.violation(f"{c.name}: {name} lost its deletionTimestamp: {status} {out.get('metadata')}")
        status, out = await c.req("PATCH", f"{CM}/{name}", {"metadata": {"finalizers": None}}, MERGE)
        if status != 200:
            c.run.violation(f"{c.name}: release {name} -> {status} {out}")
        stop.set()
        await asyncio.gather(*tasks)
        status, out = await c.req("GET", f"{CM}/{name}")
        if status != 404:
            c.run.violation(f"{c.name}: released {name} still there: {status} {out.get('metadata')}")
        c.run.deleted.add((CM, name))
        stats["finalized"] += 1


#: the field each way of writing a Tally increments
TALLY_FIELDS = {"main": ("spec", "other"), "status": ("status", "n"), "scale": ("spec", "replicas")}


async def graceful(c: Client, helpers: list[Client], stats: collections.Counter) -> None:
    """A pod bound to a node nobody runs, deleted with a grace period while `helpers` patch its status;
    then deleted at once. The status patches keep its deletionTimestamp and grace period."""
    n = 0
    while c.run.going():
        n += 1
        name = f"pod-{c.name}-{n}"
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
               "spec": {"nodeName": "race-nowhere", "containers": [{"name": "c", "image": "race"}]}}
        status, out = await c.req("POST", PODS, pod)
        if status != 201:
            c.run.violation(f"{c.name}: create {name} -> {status} {out}")
            await asyncio.sleep(1)
            continue
        c.acked(PODS, out, "create pod")
        stop = asyncio.Event()

        async def patcher(h: Client, j: int) -> None:
            k = 0
            while not stop.is_set():
                k += 1
                body = {"status": {"message": f"h{j}-{k}"}, "spec": {"nodeName": "elsewhere"}}
                status, out = await h.req("PATCH", f"{PODS}/{name}/status", body, MERGE)
                if status == 404:
                    return
                if status != 200 or out["spec"]["nodeName"] != "race-nowhere":
                    c.run.violation(f"{h.name}: status patch {name} -> {status} {out.get('spec', out)}")
                    return
                h.run.acked[(PODS, name)].append(int(out["metadata"]["resourceVersion"]))
                stats["pod status patched"] += 1

        tasks = [asyncio.create_task(patcher(h, j)) for j, h in enumerate(helpers)]
        await asyncio.sleep(0.05)
        status, out = await c.req("DELETE", f"{PODS}/{name}", {"gracePeriodSeconds": 30})
        md = out.get("metadata", {})
        if status != 200 or not md.get("deletionTimestamp") or md.get("deletionGracePeriodSeconds") != 30:
            c.run.violation(f"{c.name}: graceful delete {name} -> {status} {md or out}")
        await asyncio.sleep(0.1)
        status, out = await c.req("GET", f"{PODS}/{name}")
        md = out.get("metadata", {})
        if status != 200 or not md.get("deletionTimestamp") or md.get("deletionGracePeriodSeconds") != 30:
            c.run.violation(f"{c.name}: {name} after status patches: {status} {md or out}")
        status, out = await c.req("DELETE", f"{PODS}/{name}", {"gracePeriodSeconds": 0})
        if status != 200:
            c.run.violation(f"{c.name}: delete {name} at once -> {status} {out}")
        stop.set()
        await asyncio.gather(*tasks)
        status, out = await c.req("GET", f"{PODS}/{name}")
        if status != 404:
            c.run.violation(f"{c.name}: {name} deleted at once still there: {status} {out.get('metadata')}")
        c.run.deleted.add((PODS, name))
        stats["pods deleted gracefully"] += 1


async def tally_rmw(c: Client, reader: Client, part: str, done: collections.Counter) -> None:
    """GET (on another connection) + PUT through the main resource (spec.other), /status (status.n) or
    /scale (spec.replicas)."""
    sub = {"main": "", "status": "/status", "scale": "/scale"}[part]
    path = f"{TALLIES}/tally{sub}"
    while c.run.going():
        status, obj = await reader.req("GET", path)
        c.read(TALLIES, obj, reader)
        if status != 200:
            c.run.violation(f"{c.name}: GET {path} -> {status} {obj}")
            return
        top, field = TALLY_FIELDS[part]
        sent = obj[top].get(field, 0) + 1
        if part == "main":
            obj["status"] = {"n": -1, "replicas": -1}  # ignored by the main resource
        elif part == "status":
            obj["spec"] = {"replicas": -1, "other": -1}  # ignored by /status
        obj[top][field] = sent
        status, out = await c.req("PUT", path, obj)
        if status == 200:
            done[part] += 1
            rv = c.acked(TALLIES, out, f"PUT tally{sub}")
            if out[top].get(field) != sent or rv <= int(obj["metadata"]["resourceVersion"]):
                c.run.violation(f"{c.name}: PUT tally{sub} {top}.{field}={sent} over rv {obj['metadata']['resourceVersion']} "
                                f"answered {top}.{field}={out[top].get(field)} at rv {rv}")
        elif status != 409:
            c.run.violation(f"{c.name}: PUT {path} -> {status} {out}")
        else:
            c.run.counts[f"tally {part} 409"] += 1


# --- watchers ---------------------------------------------------------------------------------


class Watcher:
    """A view of one collection kept from a list and a watch; `mode`: "steady" (resumes from its last
    revision only when the server ends the watch), "resume" (the server ends it every few seconds),
    "relist" (a fresh list and watch every few seconds), "watchlist" (a streaming list every few
    seconds). With a label `selector`, objects that start (stop) matching it arrive as ADDED (DELETED)."""

    def __init__(self, run: Run, coll: str, mode: str, n: int, selector: str = "") -> None:
        self.run, self.coll, self.mode, self.selector = run, coll, mode, selector
        self.name = f"watch-{mode}-{n}-{coll.rsplit('/', 1)[1]}" + (f"-{selector}" if selector else "")
        self.params = {"labelSelector": selector} if selector else {}
        self.client = run.client(self.name)
        self.view: dict[str, int] = {}
        self.rv = 0
        self.seen: set[int] = set()
        self.since = 0  # the revision this watcher's unbroken record starts at
        self.events = self.relists = self.gone = 0
        self.stopping = self.initial = False
        self.last_list = 0  # a watch-list's: the revision its previous one listed at
        #: every event applied: (revision, type, name)
        self.log: list[tuple[int, str, str]] = []

    async def relist(self) -> None:
        status, out = await self.client.req("GET", self.coll, **self.params)
        self.view = {o["metadata"]["name"]: int(o["metadata"]["resourceVersion"]) for o in out["items"]}
        rv = int(out["metadata"]["resourceVersion"])
        if rv < self.rv:
            self.run.violation(f"{self.name}: list at rv {rv}, older than events seen to {self.rv}")
        self.rv = self.since = rv
        self.relists += 1

    async def run_(self) -> None:
        if self.mode == "watchlist":
            return await self.watch_lists()
        await self.relist()
        while not self.stopping:
            timeout = random.randint(2, 6) if self.mode == "resume" else 3600
            try:
                async with asyncio.timeout(random.uniform(3, 8) if self.mode == "relist" else None):
                    ended = await self.stream(timeout)
            except TimeoutError:
                ended = "relist"
            if ended == "gone":
                self.gone += 1
            if ended in ("gone", "relist"):
                await self.relist()

    async def watch_lists(self) -> None:
        """Streaming lists (sendInitialEvents, as client-go's WatchList), each served a few seconds: the
        initial ADDED events in any revision order, then the initial-events-end bookmark at the list's
        revision (not older than the last one's), then events after it."""
        while not self.stopping:
            self.initial, self.view, self.last_list = True, {}, self.rv
            params = {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"}
            ended = await self.stream(random.randint(3, 8), params)
            if self.initial and ended == "ended":
                self.run.violation(f"{self.name}: a watch-list ended before its initial-events-end bookmark")
            self.relists += 1

    async def stream(self, timeout: int, first: dict | None = None) -> str:
        params = {"watch": "1", **(first or {"resourceVersion": str(self.rv)}), "allowWatchBookmarks": "true",
                  "timeoutSeconds": str(timeout), **self.params}
        async with self.client.session.get(self.run.url + self.coll, params=params) as r:
            if r.status != 200:
                body = await r.read()
                if r.status == 410:
                    return "gone"
                self.run.violation(f"{self.name}: watch from {self.rv} -> {r.status} {body[:300]!r}")
                await asyncio.sleep(1)
                return "error"
            async for line in r.content:
                if not line.strip():
                    continue
                ev = json.loads(line)
                if ev["type"] == "ERROR":
                    if ev["object"].get("code") == 410:
                        return "gone"
                    self.run.violation(f"{self.name}: watch error {ev['object']}")
                    return "error"
                self.apply(ev["type"], ev["object"])
        return "ended"

    def apply(self, typ: str, obj: dict) -> None:
        rv, name = int(obj["metadata"]["resourceVersion"]), obj["metadata"].get("name")
        if self.initial:  # a watch-list's initial state
            if typ == "ADDED" and name not in self.view:
                self.view[name] = rv
            elif typ == "BOOKMARK" and (obj["metadata"].get("annotations") or {}).get("k8s.io/initial-events-end") == "true":
                if rv < max(self.view.values(), default=0) or rv < self.last_list:
                    self.run.violation(f"{self.name}: initial-events-end at {rv}, before its objects' "
                                       f"{max(self.view.values(), default=0)} or the last list's {self.last_list}")
                self.initial, self.rv, self.since = False, rv, rv
            elif typ != "BOOKMARK":
                self.run.violation(f"{self.name}: {typ} {name}@{rv} among a watch-list's initial events")
            return
        if typ == "BOOKMARK":
            if rv < self.rv:
                self.run.violation(f"{self.name}: bookmark at {rv} after an event at {self.rv}")
            self.rv = max(self.rv, rv)
            return
        self.events += 1
        if rv <= self.rv:
            self.run.violation(f"{self.name}: {typ} {name} at rv {rv} after rv {self.rv} (out of order or again)")
        self.rv = max(self.rv, rv)
        self.seen.add(rv)
        self.log.append((rv, typ, name))
        had = name in self.view
        if (typ == "ADDED") == had:
            self.run.violation(f"{self.name}: {typ} {name}@{rv} but the view {'has' if had else 'lacks'} it")
        if typ == "DELETED":
            self.view.pop(name, None)
        else:
            self.view[name] = rv


async def replays(run: Run, w: Watcher, stats: collections.Counter) -> None:
    """Every few seconds, on a connection of its own (another worker's, likely): a watch from a revision
    `w` passed a few seconds ago must replay exactly the events `w` had after it, and an exact list at
    `w`'s revision now must hold `w`'s view."""
    c = run.client(f"replay-{w.name}")
    marks: list[int] = []
    try:
        while run.going():
            await asyncio.sleep(random.uniform(2, 4))
            marks.append(w.rv)
            if len(marks) < 2:
                continue
            start, end, view = marks[-2], w.rv, dict(w.view)
            status, out = await c.req("GET", w.coll, resourceVersion=str(end), resourceVersionMatch="Exact")
            listed = {o["metadata"]["name"]: int(o["metadata"]["resourceVersion"]) for o in out.get("items", ())}
            if status == 410:
                stats["replay list 410"] += 1
            elif status != 200 or listed != view:
                diff = {n: (view.get(n), listed.get(n)) for n in {*view, *listed} if view.get(n) != listed.get(n)}
                run.violation(f"{c.name}: exact list at {end}: {status}, differs from the watcher's view in {diff}")
            want = [e for e in w.log if start < e[0] <= end]
            got: list[tuple[int, str, str]] = []
            params = {"watch": "1", "resourceVersion": str(start), "timeoutSeconds": "20"}
            async with c.session.get(run.url + w.coll, params=params) as r:
                if r.status != 200:
                    run.violation(f"{c.name}: watch from {start} -> {r.status} {(await r.read())[:300]!r}")
                    continue
                async for line in r.content:
                    ev = json.loads(line)
                    if ev["type"] == "ERROR":
                        stats["replay 410"] += 1
                        break
                    rv = int(ev["object"]["metadata"]["resourceVersion"])
                    if rv > end:
                        break
                    got.append((rv, ev["type"], ev["object"]["metadata"]["name"]))
                    if rv == end:
                        break
            if got != want:
                first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
                run.violation(f"{c.name}: replay of ({start}, {end}] differs at event {first}: "
                              f"{got[first:first + 3]} against {want[first:first + 3]} ({len(got)}/{len(want)})")
            stats["replays"] += 1
    finally:
        await c.close()


# --- set-up and checks ------------------------------------------------------------------------

TALLY_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"tallies.{GROUP}"},
    "spec": {"group": GROUP, "scope": "Namespaced",
             "names": {"plural": "tallies", "singular": "tally", "kind": "Tally", "listKind": "TallyList"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                                                    "statusReplicasPath": ".status.replicas"}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                               "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]},
}


async def setup(c: Client, counters: list[str]) -> None:
    await c.req("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    # the pods' node: without it the pod garbage collector deletes them as orphans 40 s on
    await c.req("POST", "/api/v1/nodes", {"metadata": {"name": "race-nowhere"}})
    status, out = await c.req("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", TALLY_CRD)
    if status != 201:
        raise RuntimeError(f"CRD: {status} {out}")
    for name in counters:
        await c.req("POST", CM, cm(name, {"n": "0"}))
    for name in ("patched", "applied"):
        await c.req("POST", CM, cm(name))
    for _ in range(100):
        status, out = await c.req("POST", TALLIES, {"apiVersion": f"{GROUP}/v1", "kind": "Tally",
                                                    "metadata": {"name": "tally"}, "spec": {"replicas": 0, "other": 0}})
        if status == 201:
            break
        await asyncio.sleep(0.2)
    else:
        raise RuntimeError(f"tally: {status} {out}")
    status, out = await c.req("PUT", f"{TALLIES}/tally/status", {**out, "status": {"n": 0, "replicas": 0}})
    if status != 200:
        raise RuntimeError(f"tally status: {status} {out}")


async def drive(run: Run, clients: int) -> dict:
    admin = run.client("admin")
    counters = [f"counter-{i}" for i in range(2)]
    tested = ["tested-0"]
    await setup(admin, counters + tested)
    watchers = [Watcher(run, coll, mode, i) for coll in (CM, TALLIES) for i, mode in
                enumerate(("steady", "steady", "resume", "relist") if coll == CM else ("steady", "resume"))]
    # objects enter these as other clients label them (`touched`, h0), and leave as they are deleted
    watchers += [Watcher(run, PODS, "steady", 7), Watcher(run, PODS, "resume", 8), Watcher(run, CM, "watchlist", 9),
                 Watcher(run, PODS, "watchlist", 10)]
    watchers += [Watcher(run, CM, "steady", 4, "touched"), Watcher(run, CM, "resume", 5, "h0"),
                 Watcher(run, CM, "relist", 6, "touched")]
    wtasks = [asyncio.create_task(w.run_()) for w in watchers]
    stats: collections.Counter = collections.Counter()
    replayed = [w for w in watchers if w.mode == "steady" and not w.selector and w.name.startswith("watch-steady-0")]
    rtasks = [asyncio.create_task(replays(run, w, stats)) for w in replayed]
    await asyncio.sleep(1)
    done: collections.Counter = collections.Counter()
    patched_last: dict = {}
    applied_last: dict = {}
    contested: list = []
    gen_names: dict = {}
    gen_gone: set = set()
    made: list[Client] = []

    def cl(kind: str, i: int) -> Client:
        made.append(c := run.client(f"{kind}{i}"))
        return c

    share = max(1, clients // 8)
    jobs = []
    jobs += [counter_put(cl("put", i), cl("get", i), counters[i % len(counters)], done) for i in range(3 * share)]
    jobs += [counter_test_patch(cl("test", i), tested[i % len(tested)], done) for i in range(2 * share)]
    jobs += [disjoint_patches(cl("patch", i), i, patched_last) for i in range(share)]
    jobs += [applies(cl("apply", i), i, applied_last, contested) for i in range(share)]
    jobs += [generated(cl("gen", i), cl("gen-other", i), gen_names, gen_gone) for i in range(share)]
    jobs += [finalized(cl("fin", i), [cl(f"fin{i}h", j) for j in range(2)], 0, stats) for i in range(max(1, share // 2))]
    jobs += [graceful(cl("pod", i), [cl(f"pod{i}h", j) for j in range(2)], stats) for i in range(max(1, share // 2))]
    jobs += [tally_rmw(cl(f"tally-{p}", i), cl(f"tally-{p}-get", i), p, done)
             for p in ("main", "status", "scale") for i in range(max(1, share // 2))]
    start = time.monotonic()
    run.deadline = start + run.seconds
    results = await asyncio.gather(*jobs, *rtasks, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            run.violation(f"a client failed: {r!r}")
    took = time.monotonic() - start
    # the end: a last write each watcher must reach, then its view against a final list
    end_rv = {}
    ends = ((CM, "POST", cm("sentinel", labels={"touched": "1", "h0": "end"})),
            (TALLIES, "PATCH", {"metadata": {"labels": {"end": "1"}}}),
            (PODS, "POST", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sentinel"},
                            "spec": {"nodeName": "race-nowhere", "containers": [{"name": "c", "image": "race"}]}}))
    for coll, method, body in ends:
        path = f"{coll}/tally" if method == "PATCH" else coll
        status, out = await admin.req(method, path, body, MERGE if method == "PATCH" else JSON)
        end_rv[coll] = admin.acked(coll, out, "sentinel")
    settle = time.monotonic() + SETTLE
    while any(w.rv < end_rv[w.coll] or w.initial for w in watchers) and time.monotonic() < settle:
        await asyncio.sleep(0.2)
    for w in watchers:  # none starts over now (a watch-list's view would be empty)
        w.stopping = True
    finals = {}
    for coll, selector in {(w.coll, w.selector) for w in watchers}:
        status, out = await admin.req("GET", coll, **({"labelSelector": selector} if selector else {}))
        finals[(coll, selector)] = out
    await asyncio.sleep(0.5)
    for t in wtasks:
        t.cancel()
    await asyncio.gather(*wtasks, return_exceptions=True)
    check(run, watchers, finals, end_rv, done, patched_last, applied_last, contested, gen_names, gen_gone)
    for c in [*made, *(w.client for w in watchers), admin]:
        await c.close()
    return {"seconds": round(took), "done": dict(done), "watchers": {w.name: (w.events, w.relists, w.gone) for w in watchers},
            "generated": len(gen_names), "deleted generated": len(gen_gone), "contested applies": len(contested),
            **stats}


def check(run: Run, watchers: list[Watcher], finals: dict, end_rv: dict, done, patched_last, applied_last,
          contested, gen_names, gen_gone) -> None:
    items = {key: {o["metadata"]["name"]: o for o in out["items"]} for key, out in finals.items()}
    items.update({coll: items[(coll, "")] for coll in (CM, TALLIES, PODS)})
    cms, tally = items[CM], items[TALLIES]["tally"]
    for name, n in done.items():
        if name in cms and int(cms[name]["data"]["n"]) != n:
            run.violation(f"{name}: {cms[name]['data']['n']} after {n} acknowledged increments")
    for part, (top, field) in TALLY_FIELDS.items():
        if tally[top].get(field) != done[part]:
            run.violation(f"tally {top}.{field}: {tally[top].get(field)} after {done[part]} acknowledged increments")
    for name, last in (("patched", patched_last), ("applied", applied_last)):
        data = cms[name]["data"]
        for key, (rv, value) in last.items():
            if data.get(key) != value:
                run.violation(f"{name}.data.{key}: {data.get(key)!r}, the newest acknowledged ({rv}) wrote {value!r}")
    if contested:
        rv, manager, value = max(contested)
        data = cms["applied"]["data"]
        if data.get("contested") != value:
            run.violation(f"applied.data.contested: {data.get('contested')!r}, the newest acknowledged ({rv}) wrote {value!r}")
        owners = [e["manager"] for e in cms["applied"]["metadata"].get("managedFields", [])
                  if "f:contested" in e.get("fieldsV1", {}).get("f:data", {})]
        if owners != [manager]:
            run.violation(f"applied.data.contested owned by {owners}, written last by {manager}")
        for e in cms["applied"]["metadata"].get("managedFields", []):
            m = e["manager"]
            if re.fullmatch(r"a[0-9]+", m) and f"f:{m}-k" not in e.get("fieldsV1", {}).get("f:data", {}):
                run.violation(f"applied: manager {m} does not own its key: {e}")
    for name in gen_names:
        if (name in cms) == (name in gen_gone):
            run.violation(f"generated {name}: {'still there' if name in cms else 'missing'}")
    for (coll, name) in run.deleted:
        if name in items[coll]:
            run.violation(f"{name}: deleted, still listed")
    for w in watchers:
        final = {n: int(o["metadata"]["resourceVersion"]) for n, o in items[(w.coll, w.selector)].items()}
        if w.rv < end_rv[w.coll]:
            run.violation(f"{w.name}: stalled at rv {w.rv}, the last write was at {end_rv[w.coll]}")
        if w.view != final:
            diff = {n: (w.view.get(n), final.get(n)) for n in {*w.view, *final} if w.view.get(n) != final.get(n)}
            run.violation(f"{w.name}: view differs from the final list in {len(diff)}: {dict(list(diff.items())[:5])}")
        if w.mode in ("steady", "resume") and not w.gone and not w.selector:
            missed = sorted(rv for (coll, _), rvs in run.acked.items() if coll == w.coll for rv in rvs
                            if rv > w.since and rv not in w.seen)
            if missed:
                run.violation(f"{w.name}: {len(missed)} acknowledged writes never seen, e.g. {missed[:5]}")


async def amain(args, kubeconfig: str) -> Run:
    run = Run(kubeconfig, args.seconds)
    summary = await drive(run, args.clients)
    print(json.dumps(summary, indent=None), flush=True)
    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", default="sqlite", choices=("sqlite", "etcd"))
    ap.add_argument("--api-workers", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--clients", type=int, default=24, help="writers (a share each to every kind of writer)")
    ap.add_argument("--kubeconfig", help="a running server instead of `nanokube up`")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()
    random.seed(args.seed)
    from tests.e2e.conftest import start_cluster
    from tests.e2e.logscan import component_failures, read_from

    with contextlib.ExitStack() as stack:
        server = None
        if args.kubeconfig is None:
            d = Path(tempfile.mkdtemp(prefix="nanokube-race-"))
            stack.callback(shutil.rmtree, d, True)
            store = "sqlite"
            if args.store == "etcd":
                from tests.conftest import EtcdServer

                etcd = EtcdServer(shutil.which("etcd") or "/usr/bin/etcd", d)
                etcd.start()
                stack.callback(etcd.stop)
                store = f"etcd://{etcd.endpoint}"
            extra = ("--api-workers", str(args.api_workers)) if args.api_workers > 1 else ()
            server = start_cluster(d, store, extra)
            stack.callback(server.stop)
            print(f"nanokube up --store {args.store} --api-workers {args.api_workers} (pid {server.proc.pid})", flush=True)
            args.kubeconfig = server.kubeconfig
        run = asyncio.run(amain(args, args.kubeconfig))
        if server is not None:
            server.log_read = True
            for f in component_failures(read_from(server.log_path, server.log_start)):
                print(f"{f.count:6d}  server log: {f.signature}")
    print(f"requests by status: {dict(sorted(run.statuses.items()))}; counts: {dict(run.counts)}")
    print(f"{len(run.violations)} violations")
    return 1 if run.violations else 0


if __name__ == "__main__":
    sys.exit(main())
