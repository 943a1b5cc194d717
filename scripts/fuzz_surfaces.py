"""Seeded, time-bounded fuzzing of the surfaces fuzz59 probed by hand (session 41) and of every built-in
kind's create, against `nanokube up` (a temporary data dir, `--port 0`, started and stopped here):

- `shaped`: every resource discovery lists with `create` (seeded or not), bodies drawn from its kind's
  OpenAPI v3 schema: the fuzz seed (tests/e2e/fuzz_seeds.py) with 1-3 subtrees replaced by drawn ones, or
  a body drawn whole; strings from the schema's enum, values of the field's name (names, images, ports,
  quantities, CIDRs, times) and odd ones; an accepted dry run is sent again as the server answered it
  (the round trip, not for reviews: their answers hold no spec), which must be accepted;
- `status`: each seeded kind with a status subresource created, its /status written with drawn statuses
  (which the controllers then read: their tracebacks show in up's log);
- `psa`: namespaces labelled for PodSecurity with odd levels and versions, pods and workload templates
  with securityContext fields of every odd form (most valid, for PodSecurity to judge them); every
  warning must be a 299;
- `policies`: ValidatingAdmissionPolicies and MutatingAdmissionPolicies of CEL drawn from a small
  grammar (odd types, macros, libraries, variables, params, messageExpressions), bound and then hit by a
  ConfigMap create;
- `crds`: CRDs of drawn schemas (x-kubernetes-* extensions, deep nesting, a huge enum, CEL rules near
  their cost limit), each established and then written with drawn custom resources;
- `dra`: ResourceSlices with odd shared counters, counter consumption and device taints,
  DeviceTaintRules, ResourceClaims whose selectors, requests and allocation modes are malformed;
- `workloads`: Workloads and PodGroups of drawn shape, with pods naming them;
- `metrics`: external.metrics.k8s.io's APIService pointed at an adapter this script serves, which
  answers each request as the fuzzer picks: garbage, a Status 500 or a raw one, a redirect, 418, 8 MB,
  2 s late, a reset, another kind, HTML, no length; paths that climb out of the group;
- `ui`: the console's paths (traversal, encodings, odd methods, huge headers);
- `restart`: objects of the gated groups created under up's default gates, then up restarted on the same
  data with every alpha gate off, then every beta one: each object read, written back and labelled;
- `gates`: `up` started with each feature gate on and off (and --runtime-config keys off), the flag's odd
  spellings first (empty parts, spaces, case, values ParseBool refuses, repeats): it must start or stop
  with one line and no traceback; once started, every listable resource is listed and a few creates
  sent, none a 5xx;

fuzz61 (session 43) added:

- `auth`: `up` with --authentication-config (two JWT issuers of the tests' jwt_issuer: claim and CEL
  mappings, claim and user validation rules) and --authorization-config (a webhook answering each review
  as drawn: slow, a byte a second, garbage, 8 MB, not HTTP, cut short, 500, 429, reset, then Node, RBAC);
  drawn JWTs (odd claims, headers, signatures, segments) on requests and in TokenReviews; odd
  SubjectAccessReview, SelfSubjectAccessReview, LocalSubjectAccessReview and SelfSubjectRulesReview
  bodies; both files rewritten while it runs (good, broken, nested, huge, cut, not UTF-8, removed), and a
  good token must authenticate once the good files are back;
- `quota`: ResourceQuotas of drawn scopes, scopeSelectors and hard names, LimitRanges of drawn types and
  bounds, then pods, PVCs and Services under them; `eviction`: pods under PodDisruptionBudgets of drawn
  shape evicted with odd Eviction bodies and deleteOptions; `storage`: CSIDrivers, CSINodes,
  VolumeAttachments (and their statuses), PVs, PVCs and pods naming the drivers; `bootstrap`: bootstrap
  token Secrets of drawn fields and requests (CSRs of drawn PEMs among them) by tokens that match them or
  nearly; `watch`: watches with drawn timeoutSeconds, bookmarks, sendInitialEvents, resourceVersion(Match),
  selectors, limits and continues; `encryption`: `up` with --encryption-provider-config and its automatic
  reload, Secrets and ConfigMaps written, read, listed and watched while the file is rewritten (keys
  rotated, providers reordered, broken, nested, huge, an absent KMS plugin, removed), every object read
  back at the end with every key.

fuzz62 (session 44) added:

- `kubelet`: `nanokube kubelet --bootstrap-kubeconfig` joined to up's server by a bootstrap token, running
  a pod; its HTTPS port hit with drawn paths (/pods, /logs, /containerLogs, /exec, /attach, /portForward,
  /run, /metrics, /configz, /healthz, /flagz, /debug/flags/v, traversals, encodings, 3,000 segments),
  queries, methods, upgrade headers and credentials (none, the admin's client certificate, one of a CA
  nobody trusts (which must not be answered 2xx), the bootstrap token, ServiceAccount tokens with and
  without system:kubelet-api-admin, garbage and non-UTF-8 tokens); the same paths through nodes/proxy;
  and the joined node's own certificate at the API server (its Node, Lease, CSRs, pods, another node's
  objects, which it must not write); the kubelet must stop on SIGTERM with no traceback in its log;
- `configs`: `up` started with a drawn file of each kind it reads (--tracing-config-file,
  --authentication-config, --authorization-config, --encryption-provider-config, --audit-policy-file,
  --admission-control-config-file, --scheduler-config, --audit-webhook-config-file), `nanokube
  scheduler --config` and `nanokube proxy --config` (with --write-config-to): a value at a drawn path
  replaced (odd types, nulls, huge numbers) or gone, unknown fields, or text of odd form (cut, repeated keys, aliases, deep, tags, other encodings), with odd -v,
  --vmodule and --logging-format now and then: each must start or stop within 60 s with its error and
  no traceback, a started `up` answer a few requests and stop on SIGTERM;
- `tracing`: `up` with --tracing-config-file sampling every request: drawn traceparent, tracestate and
  baggage headers on reads, writes and watches by the admin and a ServiceAccount; PUT /debug/flags/v with
  drawn bodies; /flagz and /statusz asked for in each form; `bootstrap`'s CSRs drawn with SANs, key types,
  extensions and attributes of every kind, and PEMs cut, doubled or wrapped in junk; `watch`'s
  resourceVersions older, odder and longer.

Oracle: no 5xx (a webhook's, an adapter's, and a mutating policy's patch of the kind, upstream's too,
aside), an answer within --slow seconds, every 4xx a Status of its code, /readyz after a broken
request, and no traceback in up's log. Broken requests are printed and written, one JSON line each, to
--out; --show 403,422 prints the first answer of each shape of those codes. --minutes bounds each
family (gates: all its starts together); the families run in the order given, on one `up`.

    .venv/bin/python scripts/fuzz_surfaces.py --seed 60 --minutes 2 shaped status psa policies crds dra \
        workloads metrics ui quota eviction storage bootstrap watch kubelet configs restart auth encryption \
        tracing gates
"""

from __future__ import annotations

import argparse
import copy
import http.client
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e.conftest import start_cluster  # noqa: E402
from tests.e2e.fuzz_seeds import CLUSTER_SCOPED, CREATE_ONLY, KINDS  # noqa: E402
from tests.e2e.fuzzing import Schemas  # noqa: E402
from tests.e2e.test_hardening import Raw  # noqa: E402

NS = "fuzz60"
ODD_STRINGS = ["", " ", "-1", "x" * 300, "é", "\x00", "0", "a/b", "::", "*", "..", "1Gi", "-1Gi", "NaN", "A", "1.5",
               "2026-13-45T99:99:99Z", "[", "100%", "9" * 40, "0x10", "1e-999", "a=b", "${x}", "\u202e", "\ud7ff"]
ODD_INTS = [-1, 0, 1, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63), 2**53 + 1, 65536, 3]
#: plausible strings by the field's name (matched in order against the lower-cased key)
BY_NAME = [
    ("image", ["busybox", "x", "", "a:b@sha256:0", "UPPER"]),
    ("name", ["a", "x-1", "c", "default", "A_b", "a." * 40, ""]),
    ("namespace", [NS, "default", "nope", ""]),
    ("port", ["http", "80", "x-y", ""]),
    ("cidr", ["10.0.0.0/8", "10.0.0.1/33", "::/0", "x"]),
    ("ip", ["10.1.2.3", "::1", "256.0.0.1", "010.1.1.1"]),
    ("time", ["2026-01-01T00:00:00Z", "2026-01-01", "x"]),
    ("timestamp", ["2026-01-01T00:00:00Z", "x"]),
    ("key", ["a", "example.com/a", "kubernetes.io/x", "-a", ""]),
    ("operator", ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Equal", "bogus"]),
    ("driver", ["gpu.example.com", "x", "-bad-", "a" * 70]),
    ("path", ["/a", "a", "/", "../x", ""]),
    ("expression", ["true", "device.driver == 'x'", "1 +", "object.spec", "self.size() < 5", "'a'.matches('[')"]),
    ("quantity", ["1", "1Gi", "-1", "1.5", "x"]),
    ("selector", ["a=b", "a in (", "!a"]),
]
QUANTITIES = ["1", "100m", "1Gi", "0", "-1", "1.5Ki", "1e3", "x", "9" * 30 + "Ei"]


class Probe:
    """Requests to one server, judged by the oracle; broken ones recorded."""

    def __init__(self, kubeconfig: str, args, family: str):
        self.raw = Raw(kubeconfig, timeout=args.slow + 30)
        self.home = self.raw  # (the API server's, where p.raw is swapped for another server's)
        self.kubeconfig, self.args, self.family = kubeconfig, args, family
        self.requests = self.broken = 0
        self.slowest = (0.0, "")
        self.codes: dict[int, int] = {}
        self.seen: dict[str, int] = {}
        self.shown: set = set()

    def send(self, method: str, path: str, body=None, ctype="application/json", headers=None, expect=None,
             cut: bool = False, slow: float | None = None):
        """One request, judged; `cut`: a body cut short is what the server must pass on (its backend's);
        `slow`: the seconds this one may take, where upstream's too takes longer than --slow."""
        self.requests += 1
        t0 = time.monotonic()
        try:
            code, hdrs, answer = self.raw.request(method, path, body, ctype=ctype, headers=headers)
        except Exception as e:  # a dropped connection or no answer in time
            if not (cut and isinstance(e, http.client.IncompleteRead)):
                self.report(method, path, body, f"no answer: {e!r}")
            return 0, {}, None
        took = time.monotonic() - t0
        self.codes[code] = self.codes.get(code, 0) + 1
        if took > self.slowest[0]:
            self.slowest = (took, f"{method} {path}")
        if took > (slow or self.args.slow):
            self.report(method, path, body, f"answered {code} after {took:.1f} s")
        if code >= 500 and not _external(answer) and not (  # (auth: WithAuthorization's plain 500 for a webhook's error)
                self.family == "auth" and isinstance(answer, bytes) and answer.startswith(b"Internal Server Error: ")):
            self.report(method, path, body, f"{code}: {str(answer)[:600]}")
        elif 400 <= code < 500 and path.startswith(("/api", "/apis")) and not _PROXIED.search(path) \
                and not _status(answer, code):
            self.report(method, path, body, f"{code} not a Status: {str(answer)[:300]}")
        if code in self.args.show:
            sig = (method, re.sub(r"/[^/]*[0-9][^/]*(?=/|$|\?)", "/N", path.split("?")[0]), code,
                   str(answer.get("message") if isinstance(answer, dict) else answer)[:60])
            if sig not in self.shown:
                self.shown.add(sig)
                print(f"  {code} {method} {path[:120]}: {str(answer.get('message') if isinstance(answer, dict) else answer)[:300]}")
        if expect and code != expect:
            self.report(method, path, body, f"{code} where {expect} was expected: {str(answer)[:600]}")
        return code, hdrs, answer

    def report(self, method: str, path: str, body, why: str) -> None:
        self.broken += 1
        line = {"family": self.family, "method": method, "path": path[:300], "why": why,
                "body": body if isinstance(body, (dict, list)) else str(body)[:2000]}
        sig = re.sub(r"[0-9]+", "N", f"{method} {path.split('?')[0]} {why[:120]}")
        self.seen[sig] = self.seen.get(sig, 0) + 1
        if self.seen[sig] <= 2:  # (each one is in --out)
            print(f"BROKEN {self.family}: {method} {path[:160]} -> {why[:400]}", flush=True)
        with open(self.args.out, "a") as f:
            f.write(json.dumps(line, default=str) + "\n")
        try:
            ready = self.home.request("GET", "/readyz")[0]
        except (OSError, http.client.HTTPException):  # (a keep-alive connection the server closed while idle)
            ready = self.home.request("GET", "/readyz")[0]
        if ready != 200:
            print("  /readyz is not ok after it", flush=True)


#: a path whose answer is the backend's (a kubelet's plain text through nodes/proxy)
_PROXIED = re.compile(r"/proxy(/|\?|$)")


def _external(answer) -> bool:
    """A 5xx whose words say another server failed (a webhook, an aggregated API's backend)."""
    text = json.dumps(answer) if isinstance(answer, (dict, list)) else str(answer)
    # (a mutating policy's patch of the kind: upstream's decoding of the patched object fails, fuzz48)
    # (an authorization webhook's failure: upstream's WithAuthorization answers its error as a 500; the
    # eviction's Status 500 for two budgets and its propagateDryRun's error; a list's too-large version, a 504)
    return bool(re.search(r"failed calling webhook|webhook \S+ failed: |more than one PodDisruptionBudget|"
                          r"Non-matching dry-run options|Too large resource version|service unavailable|error trying to reach service|"
                          r"the server is currently unable|timeout|Timeout|unknown conversion|is registered for|adapter-said|^b'EOF|"
                          # (the kubelet's: a stream request that does not upgrade, a /run command that failed)
                          r"^b'Upgrade request required|^b'command '.*' exited with|^b'container not found|"
                          r"^b'failed to exec in container|invalid upgrade response: status code",
                          text))


def tracebacks(log: str) -> list[str]:
    """Each traceback in a log: the line before it, its last frames and the exception's line."""
    out = []
    for m in re.finditer(r"Traceback \(most recent call last\):\n((?:[ \t].*\n)*)(.*)", log):
        before = log[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        frames = [ln for ln in m.group(1).splitlines() if ln.strip() and not set(ln.strip()) <= {"^", "~"}]
        out.append("\n".join([before, *frames[-8:], m.group(2)]))
    return out


def _status(answer, code: int) -> bool:
    return isinstance(answer, dict) and answer.get("kind") == "Status" and answer.get("code") == code or (
        code == 418)  # (the metrics adapter's own answer, passed through)


def draw(rng: random.Random, schemas: Schemas, s: dict, key: str = "", depth: int = 0):
    """A value of schema `s` (the field `key`'s): mostly plausible, sometimes odd, depth-limited."""
    s = schemas.resolve(s)
    odd = rng.random() < 0.1
    if s.get("x-kubernetes-int-or-string"):
        return rng.choice([1, 80, "http", "50%", "101%", -1, "x", 0])
    if "quantity" in (s.get("format") or "") or s.get("$ref", "").endswith("Quantity") or (
            not s.get("type") and "Quantity" in json.dumps(s)[:200]):
        return rng.choice(QUANTITIES)
    t = s.get("type")
    if t == "string" or (t is None and not s.get("properties") and s.get("format")):
        if s.get("enum") and not odd:
            return rng.choice(s["enum"])
        if odd:
            return rng.choice(ODD_STRINGS)
        if s.get("format") == "date-time":
            return rng.choice(["2026-01-01T00:00:00Z", "2026-01-01T00:00:00.123456Z", "x"])
        if s.get("format") == "byte":
            return rng.choice(["AAEC", "", "!"])
        lower = key.lower()
        for part, values in BY_NAME:
            if part in lower:
                return rng.choice(values)
        return rng.choice(["a", "x", "example.com/a", "1", "true", "a-b.c"])
    if t == "integer":
        return rng.choice(ODD_INTS) if odd else rng.choice([0, 1, 2, 3, 10, 80, 8080])
    if t == "number":
        return rng.choice([0.5, 1.0, -1.5, 1e308])
    if t == "boolean":
        return rng.random() < 0.5
    if depth > 7:
        return {} if t == "object" else []
    if t == "array":
        n = rng.choice([0, 1, 1, 2, 3]) if not odd else rng.choice([0, 40])
        return [draw(rng, schemas, s.get("items") or {}, key, depth + 1) for _ in range(n)]
    props = s.get("properties")
    if props:
        out = {}
        required = set(s.get("required") or ())
        for k, sub in props.items():
            if k in ("apiVersion", "kind", "metadata", "status") or sub.get("readOnly"):
                continue
            if k in required or rng.random() < 0.35:
                out[k] = draw(rng, schemas, sub, k, depth + 1)
        return out
    extra = s.get("additionalProperties")
    if isinstance(extra, dict):
        n = rng.choice([0, 1, 2])
        return {rng.choice(["a", "cpu", "memory", "example.com/x", "k" + str(i)]): draw(rng, schemas, extra, key, depth + 1)
                for i in range(n)}
    return {} if t == "object" else rng.choice(["x", 1, {}, [], None])


def _paths(obj, prefix=()) -> list[tuple]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k not in ("apiVersion", "kind", "metadata"):
                out += _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, prefix + (i,))
    return out


def _schema_at(schemas: Schemas, s: dict, path: tuple) -> dict | None:
    for seg in path:
        s = schemas.resolve(s)
        if isinstance(seg, int):
            s = s.get("items")
        else:
            s = (s.get("properties") or {}).get(seg) or (s.get("additionalProperties") if isinstance(
                s.get("additionalProperties"), dict) else None)
        if s is None:
            return None
    return s


def _put(obj, path: tuple, value):
    for seg in path[:-1]:
        obj = obj[seg]
    obj[path[-1]] = value


def resources(raw: Raw, subresources: bool = False) -> list[dict]:
    """Every resource discovery lists (subresources only when asked), with its group/version path."""
    out = []
    gvs = ["api/v1"] + [f"apis/{v['groupVersion']}" for g in raw.request("GET", "/apis")[2]["groups"]
                        for v in g["versions"]]
    for gv in gvs:
        code, _, doc = raw.request("GET", f"/{gv}")
        if code != 200:
            continue
        for r in doc["resources"]:
            if "/" not in r["name"] or subresources:
                out.append({**r, "gv": gv})
    return out


def _url(r: dict, name: str | None = None, ns: str = NS) -> str:
    base = f"/{r['gv']}/namespaces/{ns}/{r['name']}" if r["namespaced"] else f"/{r['gv']}/{r['name']}"
    return f"{base}/{name}" if name else base


def family_shaped(p: Probe, rng: random.Random, until: float, dry_share: float = 0.7,
                  groups: tuple[str, ...] = ()) -> None:
    schemas = Schemas(p.raw)
    seeds = {plural: (gv, kind, spec) for gv, plural, kind, spec in KINDS}
    rs = [r for r in resources(p.raw) if "create" in r.get("verbs", ()) and (not groups or r["gv"].startswith(groups))]
    n = 0
    while time.monotonic() < until:
        r = rng.choice(rs)
        gv = r["gv"]
        group, version = ("", "v1") if gv == "api/v1" else tuple(gv[5:].split("/"))
        s = schemas.by_kind.get((group, version, r["kind"]))
        if s is None:
            continue
        n += 1
        name = f"s{n}"
        api_version = gv[5:] if gv.startswith("apis/") else "v1"
        seed = seeds.get(r["name"])
        if seed and seed[0] == gv and rng.random() < 0.7:
            body = {"apiVersion": api_version, "kind": r["kind"], "metadata": {"name": name}, **copy.deepcopy(seed[2])}
            for _ in range(rng.choice([1, 1, 2, 3])):
                path = rng.choice(_paths(body))
                sub = _schema_at(schemas, s, path) if path else None
                if sub is not None:
                    _put(body, path, draw(rng, schemas, sub, str(path[-1]), len(path)))
        else:
            body = {"apiVersion": api_version, "kind": r["kind"], "metadata": {"name": name}, **draw(rng, schemas, s)}
        if r["name"] == "namespaces":
            body["metadata"]["name"] = f"fz-{n}"
        dry = r["name"] in CLUSTER_SCOPED and not groups or not r["namespaced"] and not groups or rng.random() < dry_share
        url = _url(r) + ("?dryRun=All" if dry else "")
        code, _, answer = p.send("POST", url, body)
        if code == 201 and isinstance(answer, dict) and dry and r["name"] not in CREATE_ONLY:
            again = copy.deepcopy(answer)
            for k in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"):
                again.get("metadata", {}).pop(k, None)
            code2, _, answer2 = p.send("POST", url, again)
            if code2 not in (201, 200) and not (code2 == 422 and "selector" in json.dumps(answer2)):
                p.report("POST", url, again, f"round trip: accepted, then {code2}: {str(answer2)[:500]}")


def family_status(p: Probe, rng: random.Random, until: float) -> None:
    """Each seeded kind with a status subresource created, then its /status written with drawn statuses
    (and a third of them as a merge patch), each on the object as last answered."""
    schemas = Schemas(p.raw)
    by_name = {(r["gv"], r["name"]): r for r in resources(p.raw, subresources=True)}
    targets = []
    for gv, plural, kind, spec in KINDS:
        r = by_name.get((gv, plural))
        status = by_name.get((gv, plural + "/status"))
        if r is None or plural in CREATE_ONLY:
            continue
        group, version = ("", "v1") if gv == "api/v1" else tuple(gv[5:].split("/"))
        s = schemas.resolve(schemas.by_kind.get((group, version, kind)))
        sub = (s.get("properties") or {}).get("status")
        if sub is None or status is None:
            continue
        body = {"apiVersion": gv[5:] if gv.startswith("apis/") else "v1", "kind": kind, "metadata": {"name": "st"},
                **copy.deepcopy(spec)}
        if plural == "namespaces":
            body["metadata"]["name"] = "fz-status"
        code, _, answer = p.send("POST", _url(r), body)
        if code in (201, 409):
            targets.append((r, sub, body["metadata"]["name"]))
    while targets and time.monotonic() < until:
        r, sub, name = rng.choice(targets)
        code, _, current = p.send("GET", _url(r, name))
        if code != 200:
            continue
        status = draw(rng, schemas, sub, "status")
        if rng.random() < 0.33:
            p.send("PATCH", _url(r, name) + "/status", {"status": status}, ctype="application/merge-patch+json")
        else:
            p.send("PUT", _url(r, name) + "/status", {**current, "status": status})


PSA_LEVELS = ["privileged", "baseline", "restricted", "", "Restricted", "bogus", " restricted", "restricted\n"]
PSA_VERSIONS = ["latest", "v1.37", "v1.0", "v1.999", "", "v1.-1", "v2.0", "1.30", "v1.30.1", "latest ", "v1.",
                "v1.99999999999999999999", "v0.1", "v1.24"]
SC_VALUES = {
    "privileged": [True, False, None, "yes"], "allowPrivilegeEscalation": [True, False, None],
    "runAsNonRoot": [True, False, None], "runAsUser": [0, 1000, -1, 2**31, None], "runAsGroup": [0, 1, -1, None],
    "readOnlyRootFilesystem": [True, None], "procMount": ["Default", "Unmasked", "", "x"],
    "capabilities": [{"add": ["NET_RAW"]}, {"add": ["net_raw", "CAP_SYS_ADMIN"]}, {"drop": ["ALL"]}, {"drop": ["all"]},
                     {"add": [""], "drop": []}, {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}, {}],
    "seccompProfile": [{"type": "RuntimeDefault"}, {"type": "Unconfined"}, {"type": "Localhost"},
                       {"type": "Localhost", "localhostProfile": "p.json"}, {"type": "x"}, {}],
    "appArmorProfile": [{"type": "RuntimeDefault"}, {"type": "Unconfined"}, {"type": "Localhost"},
                        {"type": "Localhost", "localhostProfile": "p"}, {"type": ""}],
    "seLinuxOptions": [{"type": "spc_t"}, {"type": "container_t"}, {"user": "root", "role": "x"}, {"level": "s0"}],
    "windowsOptions": [{"hostProcess": True}, {"hostProcess": False}, {"gmsaCredentialSpecName": "x"}],
    "sysctls": [[{"name": "net.ipv4.ip_local_port_range", "value": "1 2"}, {"name": "kernel.shm_rmid_forced", "value": "1"}],
                [{"name": "net/ipv4/ping_group_range", "value": "0 1"}], [{"name": "kernel.msgmax", "value": "1"}],
                [{"name": "", "value": ""}], [{"name": "net.ipv4.tcp_keepalive_time", "value": "x"}]],
    "supplementalGroups": [[0], [-1], [2**40]], "fsGroup": [0, -1], "supplementalGroupsPolicy": ["Strict", "x"],
    "seLinuxChangePolicy": ["Recursive", "MountOption", "x"], "fsGroupChangePolicy": ["Always", "x"],
}
POD_LEVEL = {"sysctls", "supplementalGroups", "fsGroup", "supplementalGroupsPolicy", "seLinuxChangePolicy",
             "fsGroupChangePolicy"}
CONTAINER_LEVEL = {"privileged", "allowPrivilegeEscalation", "capabilities", "readOnlyRootFilesystem", "procMount"}
VOLUMES = [{"hostPath": {"path": "/"}}, {"emptyDir": {}}, {"configMap": {"name": "x"}}, {"nfs": {"server": "a", "path": "/"}},
           {"ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"],
                                                           "resources": {"requests": {"storage": "1Gi"}}}}}},
           {"csi": {"driver": "x"}}, {"projected": {"sources": []}}, {"image": {"reference": "x"}}, {"iscsi": {}}]


#: the values of SC_VALUES pod validation refuses (so PodSecurity never judges them), as JSON
SC_INVALID = {'"yes"', '"x"', '""', "-1", str(2**31), '{"type": "Localhost"}', '{"type": "x"}', "{}",
              '{"type": ""}', '[{"name": "", "value": ""}]', '[{"name": "net.ipv4.tcp_keepalive_time", "value": "x"}]',
              "[-1]", f"[{2**40}]", '{"add": [""], "drop": []}', '{"hostProcess": true}'}


def _valid(k: str, v) -> bool:
    return json.dumps(v) not in SC_INVALID


def _security_context(rng: random.Random, level: set, valid: bool) -> dict:
    keys = rng.sample(sorted(level), rng.randint(0, min(5, len(level))))
    return {k: rng.choice([v for v in SC_VALUES[k] if not valid or _valid(k, v)] or [None]) for k in keys}


def _psa_pod(rng: random.Random, name: str) -> dict:
    container_keys = set(SC_VALUES) - POD_LEVEL
    pod_keys = set(SC_VALUES) - CONTAINER_LEVEL
    valid = rng.random() < 0.7  # most pods valid, for PodSecurity to judge them
    c = {"name": "c", "image": "busybox", "securityContext": _security_context(rng, container_keys, valid)}
    if rng.random() < 0.3:
        c["ports"] = [{"containerPort": 80, "hostPort": rng.choice([0, 80, 65535])}]
    spec = {"containers": [c], "securityContext": _security_context(rng, pod_keys, valid)}
    if rng.random() < 0.3:
        spec["initContainers"] = [{**c, "name": "i"}]
    if rng.random() < 0.3:
        spec["ephemeralContainers"] = [{**c, "name": "e"}]
    for k in ("hostNetwork", "hostPID", "hostIPC", "hostUsers"):
        if rng.random() < 0.15:
            spec[k] = rng.choice([True, False])
    if rng.random() < 0.4:
        spec["volumes"] = [{"name": f"v{i}", **v} for i, v in enumerate(rng.sample(VOLUMES, rng.randint(1, 3)))]
    if rng.random() < 0.2:
        spec["os"] = {"name": rng.choice(["linux", "windows", "x"])}
    meta = {"name": name}
    if rng.random() < 0.2:
        meta["annotations"] = {"container.apparmor.security.beta.kubernetes.io/c": rng.choice(
            ["runtime/default", "unconfined", "localhost/p", "x"])}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def family_psa(p: Probe, rng: random.Random, until: float) -> None:
    n = 0
    while time.monotonic() < until:
        n += 1
        ns = f"psa-{n}"
        labels = {}
        for mode in ("enforce", "audit", "warn"):
            if rng.random() < 0.7:
                labels[f"pod-security.kubernetes.io/{mode}"] = rng.choice(PSA_LEVELS[:3] if rng.random() < 0.8
                                                                          else PSA_LEVELS)
            if rng.random() < 0.4:
                labels[f"pod-security.kubernetes.io/{mode}-version"] = rng.choice(PSA_VERSIONS[:4] if rng.random() < 0.8
                                                                                  else PSA_VERSIONS)
        code, _, _ = p.send("POST", "/api/v1/namespaces", {"metadata": {"name": ns, "labels": labels}})
        if code != 201:
            continue
        for i in range(6):
            pod = _psa_pod(rng, f"p{i}")
            how = rng.random()
            if how < 0.5:
                code, hdrs, _ = p.send("POST", f"/api/v1/namespaces/{ns}/pods?dryRun=All", pod)
            elif how < 0.8:
                kind, plural, path = rng.choice([("Deployment", "deployments", ("spec", "template")),
                                                 ("Job", "jobs", ("spec", "template")),
                                                 ("CronJob", "cronjobs", ("spec", "jobTemplate", "spec", "template"))])
                body = {"apiVersion": "batch/v1" if plural != "deployments" else "apps/v1", "kind": kind,
                        "metadata": {"name": f"w{i}"}, "spec": {}}
                tmpl = {"metadata": {"labels": {"a": "b"}}, "spec": {**pod["spec"], "restartPolicy": "Never"}}
                if plural == "deployments":
                    tmpl["spec"]["restartPolicy"] = "Always"
                    body["spec"] = {"selector": {"matchLabels": {"a": "b"}}, "template": tmpl}
                elif plural == "jobs":
                    body["spec"] = {"template": tmpl}
                else:
                    body["spec"] = {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": tmpl}}}
                group = "apps/v1" if plural == "deployments" else "batch/v1"
                code, hdrs, _ = p.send("POST", f"/apis/{group}/namespaces/{ns}/{plural}?dryRun=All", body)
            else:
                new = {f"pod-security.kubernetes.io/{m}": rng.choice(PSA_LEVELS) for m in ("enforce", "warn")}
                new["pod-security.kubernetes.io/enforce-version"] = rng.choice(PSA_VERSIONS)
                code, hdrs, _ = p.send("PATCH", f"/api/v1/namespaces/{ns}?dryRun=All", {"metadata": {"labels": new}},
                                       ctype="application/merge-patch+json")
            warn = hdrs.get_all("Warning") if hasattr(hdrs, "get_all") else None
            for w in warn or ():
                if not w.startswith("299 "):
                    p.report("POST", ns, pod, f"a warning not of code 299: {w[:200]}")
        p.send("DELETE", f"/api/v1/namespaces/{ns}")


CEL_ATOMS = ["object", "oldObject", "object.metadata.name", "object.data", "request.operation", "params", "variables.v",
             "request.userInfo.username", "object.metadata.labels", "authorizer", "namespaceObject", "1", "'a'",
             "[1, 2]", "{'a': 1}", "null", "true", "2.5", "b'x'", "duration('1s')", "timestamp('2026-01-01T00:00:00Z')",
             "object.data['x']", "object.nope", "9223372036854775807", "-9223372036854775808", "1u", "'%s'"]
CEL_FORMS = ["{a} == {b}", "{a} + {b}", "size({a})", "has({a}.x)", "{a}.all(x, x == {b})", "{a}.exists(x, {b})",
             "{a}.map(x, {b})", "{a}.filter(x, x)", "{a} ? {b} : {a}", "!{a}", "int({a})", "string({a})", "{a}[{b}]",
             "{a}.matches({b})", "{a} in {b}", "{a}.startsWith({b})", "type({a}) == string", "{a} / {b}", "{a} % {b}",
             "{a}.split(',')", "quantity({a})", "ip({a})", "cidr({a})", "url({a}).getHost()", "{a}.size() > {b}",
             "dyn({a})", "{a}.all(x, {a}.all(y, {a}.all(z, true)))", "authorizer.group('').resource('pods').check('get').allowed()",
             "{a}.format([{b}])", "sets.contains({a}, {b})", "{a}.lowerAscii()", "optional.of({a}).orValue({b})",
             "{a}.?x.orValue(1)", "math.greatest({a}, {b})", "{a}.indexOf({b})", "base64.encode({a})"]


def cel(rng: random.Random, depth: int = 0) -> str:
    if depth > 2 or rng.random() < 0.3:
        return rng.choice(CEL_ATOMS)
    return rng.choice(CEL_FORMS).format(a=cel(rng, depth + 1), b=cel(rng, depth + 1))


def family_policies(p: Probe, rng: random.Random, until: float) -> None:
    p.send("POST", "/api/v1/namespaces", {"metadata": {"name": "pol"}})
    p.send("POST", "/api/v1/namespaces/pol/configmaps", {"metadata": {"name": "params"}, "data": {"a": "1"}})
    n = 0
    match = {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                                "resources": ["configmaps"]}], "namespaceSelector": {"matchLabels": {
                                    "kubernetes.io/metadata.name": "pol"}}}
    while time.monotonic() < until:
        n += 1
        params = rng.random() < 0.3
        spec = {"matchConstraints": match, "failurePolicy": rng.choice(["Fail", "Ignore", "Bogus"]),
                "variables": [{"name": "v", "expression": cel(rng)}] if rng.random() < 0.5 else []}
        if params:
            spec["paramKind"] = {"apiVersion": "v1", "kind": "ConfigMap"}
        if rng.random() < 0.3:
            spec["matchConditions"] = [{"name": "m", "expression": cel(rng)}]
        mutating = rng.random() < 0.4
        if mutating:
            group, kind, plural = "admissionregistration.k8s.io/v1beta1", "MutatingAdmissionPolicy", "mutatingadmissionpolicies"
            patch = rng.choice(["apply", "json"])
            if patch == "apply":
                m = {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": rng.choice([
                    "Object{metadata: Object.metadata{labels: {'a': 'b'}}}", "Object{data: {'x': " + cel(rng) + "}}",
                    cel(rng), "Object{}", "Object{spec: Object.spec{x: 1}}"])}}
            else:
                m = {"patchType": "JSONPatch", "jsonPatch": {"expression": rng.choice([
                    "[JSONPatch{op: 'add', path: '/data/x', value: " + cel(rng) + "}]",
                    "[JSONPatch{op: 'remove', path: '/metadata/name'}]", "[JSONPatch{op: 'x', path: ''}]", cel(rng),
                    "[JSONPatch{op: 'replace', path: '/kind', value: 'Secret'}]",
                    "[JSONPatch{op: 'add', path: '/metadata/labels', value: {'a': " + cel(rng) + "}}]"])}}
            spec.update(mutations=[m], reinvocationPolicy=rng.choice(["Never", "IfNeeded", "x"]))
        else:
            group, kind, plural = "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies"
            v = {"expression": cel(rng)}
            if rng.random() < 0.4:
                v["messageExpression"] = cel(rng)
            if rng.random() < 0.2:
                v["reason"] = rng.choice(["Invalid", "Forbidden", "x"])
            spec["validations"] = [v]
            if rng.random() < 0.2:
                spec["auditAnnotations"] = [{"key": "k", "valueExpression": cel(rng)}]
        name = f"pol-{n}"
        code, _, _ = p.send("POST", f"/apis/{group}/{plural}", {"apiVersion": group, "kind": kind, "metadata": {"name": name},
                                                               "spec": spec})
        if code != 201:
            continue
        binding = {"policyName": name, "validationActions": rng.choice([["Deny"], ["Warn", "Audit"], ["Deny", "Warn"]])}
        if mutating:
            binding.pop("validationActions")
        if params:
            binding["paramRef"] = rng.choice([{"name": "params", "namespace": "pol", "parameterNotFoundAction": "Deny"},
                                              {"name": "nope", "parameterNotFoundAction": "Allow"},
                                              {"selector": {}, "parameterNotFoundAction": "Deny"}])
        bplural = plural.replace("policies", "policybindings")
        code, _, _ = p.send("POST", f"/apis/{group}/{bplural}", {"apiVersion": group, "kind": kind + "Binding",
                                                                "metadata": {"name": name}, "spec": binding})
        time.sleep(0.3)  # the policy and its binding reach the admission plugin through an informer
        for i in range(3):
            p.send("POST", "/api/v1/namespaces/pol/configmaps" + ("?dryRun=All" if i else ""),
                   {"metadata": {"name": f"c{n}-{i}", "labels": {"a": "b"}}, "data": {"x": "1", "y": ""}})
        p.send("DELETE", f"/apis/{group}/{bplural}/{name}")
        p.send("DELETE", f"/apis/{group}/{plural}/{name}")


def _crd_schema(rng: random.Random, depth: int = 0) -> dict:
    t = rng.choice(["object", "object", "array", "string", "integer", "number", "boolean"] if depth < 12 else ["string"])
    s: dict = {"type": t}
    if t == "object":
        how = rng.random()
        if how < 0.15:
            s["x-kubernetes-preserve-unknown-fields"] = True
        elif how < 0.3:
            s["additionalProperties"] = _crd_schema(rng, depth + 1)
        else:
            s["properties"] = {f"f{i}": _crd_schema(rng, depth + 1) for i in range(rng.randint(1, 3))}
            if rng.random() < 0.2:
                s["required"] = [rng.choice(list(s["properties"]))]
        if rng.random() < 0.15:
            s["x-kubernetes-map-type"] = rng.choice(["atomic", "granular"])
        if rng.random() < 0.1:
            s["x-kubernetes-embedded-resource"] = True
            s["x-kubernetes-preserve-unknown-fields"] = True
        if rng.random() < 0.2:
            s["x-kubernetes-validations"] = [{"rule": rng.choice([
                "self.size() < 10", "has(self.f0)", "self == oldSelf", "self.all(k, k.size() < 5)",
                "!has(self.f0) || self.f0 != 'x'", cel(rng).replace("object", "self")]),
                "message": "m", **({"messageExpression": "'x' + string(self)"} if rng.random() < 0.3 else {}),
                **({"optionalOldSelf": True} if rng.random() < 0.2 else {})}]
    elif t == "array":
        s["items"] = _crd_schema(rng, depth + 1)
        if rng.random() < 0.4:
            s["maxItems"] = rng.choice([1, 10, 10**6])
        lt = rng.choice([None, "atomic", "set", "map"])
        if lt:
            s["x-kubernetes-list-type"] = lt
            if lt == "map":
                s["items"] = {"type": "object", "properties": {"k": {"type": rng.choice(["string", "integer"])},
                                                               "v": {"type": "string"}}, "required": ["k"]}
                s["x-kubernetes-list-map-keys"] = ["k"]
        if rng.random() < 0.15:
            s["x-kubernetes-validations"] = [{"rule": rng.choice([
                "self.all(x, self.all(y, self.all(z, true)))", "self.size() <= 3", "self.exists(x, x == self[0])"])}]
    elif t == "string":
        r = rng.random()
        if r < 0.15:
            s["enum"] = [f"v{i}" for i in range(rng.choice([1, 3, 5000]))]
        elif r < 0.3:
            s["format"] = rng.choice(["date-time", "byte", "int-or-string", "quantity", "cidr", "ipv4", "uuid", "x"])
        elif r < 0.4:
            s["pattern"] = rng.choice(["^a+$", "[", "(a+)+$", "^\\d{1,3}$"])
        elif r < 0.5:
            s["maxLength"] = rng.choice([0, 5, 10**9])
            s["x-kubernetes-validations"] = [{"rule": rng.choice([
                "self.matches('^[a-z]+$')", "self.size() > 0", "self.split('').size() < 100",
                "self.find('a') == 'a'", "isQuantity(self)", "isURL(self)", "self.lowerAscii() == self"])}]
        if rng.random() < 0.1:
            s["default"] = rng.choice(["a", 1, None, "v0"])
    elif t in ("integer", "number"):
        if rng.random() < 0.3:
            s["format"] = rng.choice(["int32", "int64", "float", "double", "x"])
        if rng.random() < 0.3:
            s["minimum"], s["maximum"] = rng.choice([(0, 10), (10, 0), (-1e308, 1e308)])
        if rng.random() < 0.1:
            s["x-kubernetes-int-or-string"] = True
            s.pop("type")
    if rng.random() < 0.05:
        s["nullable"] = True
    return s


def _cr_value(rng: random.Random, s: dict, depth: int = 0):
    t = s.get("type")
    if s.get("x-kubernetes-int-or-string"):
        return rng.choice([1, "x", "50%"])
    if t == "object":
        if s.get("x-kubernetes-embedded-resource"):
            return rng.choice([{"apiVersion": "v1", "kind": "X", "metadata": {"name": "a"}}, {}, {"kind": ""}])
        if "properties" in s:
            return {k: _cr_value(rng, v, depth + 1) for k, v in s["properties"].items() if rng.random() < 0.8}
        if isinstance(s.get("additionalProperties"), dict):
            return {f"k{i}": _cr_value(rng, s["additionalProperties"], depth + 1) for i in range(rng.randint(0, 3))}
        return {"a": rng.choice([1, "x", None, [1]])}
    if t == "array":
        return [_cr_value(rng, s.get("items", {}), depth + 1) for _ in range(rng.choice([0, 1, 2, 5]))]
    if t == "string":
        return rng.choice((s.get("enum") or [])[:3] + ["a", "", "x" * 20, "2026-01-01T00:00:00Z", "10.0.0.0/8", "1Gi"])
    if t == "integer":
        return rng.choice([0, 1, -1, 2**31, 2**63 - 1, 5])
    if t == "number":
        return rng.choice([0.5, 1, -1e308])
    if t == "boolean":
        return rng.choice([True, False])
    return rng.choice([None, 1, "x"])


def family_crds(p: Probe, rng: random.Random, until: float) -> None:
    n = 0
    while time.monotonic() < until:
        n += 1
        spec_schema = _crd_schema(rng)
        schema = {"type": "object", "properties": {"spec": spec_schema, "status": {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
        plural = f"odd{n}s"
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": f"{plural}.fuzz60.example.com"},
               "spec": {"group": "fuzz60.example.com", "scope": "Namespaced",
                        "names": {"plural": plural, "singular": f"odd{n}", "kind": f"Odd{n}"},
                        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema},
                                      "subresources": {"status": {}}}]}}
        code, _, _ = p.send("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        if code != 201:
            continue
        url = f"/apis/fuzz60.example.com/v1/namespaces/{NS}/{plural}"
        for _ in range(30):
            if p.raw.request("GET", url)[0] == 200:
                break
            time.sleep(0.1)
        for i in range(8):
            body = {"apiVersion": "fuzz60.example.com/v1", "kind": f"Odd{n}", "metadata": {"name": f"o{i}"},
                    "spec": _cr_value(rng, spec_schema)}
            code, _, answer = p.send("POST", url, body)
            if code == 201:
                p.send("PATCH", f"{url}/o{i}", {"spec": _cr_value(rng, spec_schema)}, ctype="application/merge-patch+json")
                p.send("PATCH", f"{url}/o{i}?fieldManager=f&force=true", json.dumps(
                    {"apiVersion": "fuzz60.example.com/v1", "kind": f"Odd{n}", "metadata": {"name": f"o{i}"},
                     "spec": _cr_value(rng, spec_schema)}), ctype="application/apply-patch+yaml")
                code, _, answer = p.send("GET", f"{url}/o{i}")
                if code == 200:
                    p.send("PUT", f"{url}/o{i}/status", {**answer, "status": {"x": [1]}})
        p.send("GET", url + "?limit=2")
        p.send("DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.fuzz60.example.com")


def _odd(rng: random.Random, good):
    return good if rng.random() < 0.75 else rng.choice([None, "", -1, 2**63, "x" * 300, [], {}, "1e999", "-1Gi", "Gi"])


def _odd_key(rng: random.Random, good: str) -> str:
    return good if rng.random() < 0.75 else rng.choice(["", "x" * 300, "A_B", "a/b/c", "-", "é", "1"])


def family_dra(p: Probe, rng: random.Random, until: float) -> None:
    base = "/apis/resource.k8s.io/v1"
    p.send("POST", f"{base}/deviceclasses", {"metadata": {"name": "fz-gpu"}, "spec": {"selectors": [
        {"cel": {"expression": "device.driver == 'gpu.fuzz60.example.com'"}}]}})
    n = 0
    while time.monotonic() < until:
        n += 1
        counters = [{"name": _odd(rng, f"cs{i}"), "counters": {_odd_key(rng, "mem"): {"value": _odd(rng, rng.choice(
            ["8Gi", "1", "0", "1.5"]))} for _ in range(rng.randint(0, 2))}} for i in range(rng.randint(0, 2))]
        devices = []
        for d in range(rng.randint(0, 4)):
            dev = {"name": _odd(rng, f"d{d}")}
            if rng.random() < 0.5:
                dev["attributes"] = {_odd_key(rng, "model"): rng.choice([{"string": "a"}, {"int": 2**63}, {"bool": True},
                                                                     {"version": "1.2.3"}, {"version": "x"}, {},
                                                                     {"string": "a", "int": 1}])}
            if rng.random() < 0.5:
                dev["capacity"] = {_odd_key(rng, "memory"): {"value": _odd(rng, "8Gi"), **({"requestPolicy": {
                    "default": _odd(rng, "1Gi"), "validRange": {"min": _odd(rng, "1Gi"), "step": _odd(rng, "0")}}}
                    if rng.random() < 0.3 else {})}}
            if rng.random() < 0.4:
                dev["consumesCounters"] = [{"counterSet": _odd(rng, "cs0"), "counters": {_odd_key(rng, "mem"): {
                    "value": _odd(rng, "4Gi")}}}]
            if rng.random() < 0.4:
                dev["taints"] = [{"key": _odd(rng, "example.com/t"), "value": _odd(rng, "v"),
                                  "effect": _odd(rng, rng.choice(["NoSchedule", "NoExecute", "None", "PreferNoSchedule"])),
                                  **({"timeAdded": _odd(rng, "2026-01-01T00:00:00Z")} if rng.random() < 0.3 else {})}]
            if rng.random() < 0.2:
                dev["bindsToNode"] = rng.choice([True, False])
                dev["bindingConditions"] = [_odd(rng, "c")]
            if rng.random() < 0.2:
                dev["allowMultipleAllocations"] = _odd(rng, True)
            devices.append(dev)
        spec = {"driver": _odd(rng, "gpu.fuzz60.example.com"), "pool": {"name": _odd(rng, "p"), "generation": _odd(rng, 1),
                                                                       "resourceSliceCount": _odd(rng, 1)},
                rng.choice(["nodeName", "allNodes", "nodeSelector"]): rng.choice(["node-0", True, {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]}]}])}
        if counters and rng.random() < 0.6:
            spec["sharedCounters"] = counters
        if devices:
            spec["devices"] = devices
        p.send("POST", f"{base}/resourceslices" + ("?dryRun=All" if rng.random() < 0.5 else ""),
               {"metadata": {"name": f"sl-{n}"}, "spec": spec})
        if rng.random() < 0.3:
            p.send("POST", f"{base}/devicetaintrules?dryRun=All", {"metadata": {"name": f"r{n}"}, "spec": {
                "deviceSelector": {k: _odd(rng, v) for k, v in {"driver": "gpu.fuzz60.example.com", "pool": "p",
                                                                "device": "d0"}.items() if rng.random() < 0.6},
                "taint": {"key": _odd(rng, "k"), "effect": _odd(rng, rng.choice(["NoExecute", "NoSchedule", "None"]))}}})
        req = {"name": _odd(rng, "r")}
        exact = {"deviceClassName": _odd(rng, "fz-gpu"), "allocationMode": _odd(rng, rng.choice(["All", "ExactCount", "x"])),
                 "count": _odd(rng, rng.choice([1, 0, 2**31])),
                 "selectors": [{"cel": {"expression": _odd(rng, cel(rng).replace("object", "device"))}}] if rng.random() < 0.5
                 else [], "tolerations": [{"key": _odd(rng, "k"), "operator": _odd(rng, "Exists"),
                                           "effect": _odd(rng, "NoSchedule")}] if rng.random() < 0.3 else []}
        if rng.random() < 0.2:
            exact["capacity"] = {"requests": {_odd_key(rng, "memory"): _odd(rng, "1Gi")}}
        if rng.random() < 0.2:
            exact["adminAccess"] = _odd(rng, True)
        if rng.random() < 0.3:
            req["firstAvailable"] = [{"name": _odd(rng, "a"), **exact}, {"name": "b", "deviceClassName": "fz-gpu"}]
        else:
            req["exactly"] = exact
        devices = {"requests": [req]}
        if rng.random() < 0.3:
            devices["constraints"] = [{"requests": [_odd(rng, "r")], rng.choice(["matchAttribute", "distinctAttribute"]):
                                       _odd(rng, "gpu.fuzz60.example.com/model")}]
        if rng.random() < 0.2:
            devices["config"] = [{"requests": [_odd(rng, "r")], "opaque": {"driver": _odd(rng, "gpu.fuzz60.example.com"),
                                                                            "parameters": _odd(rng, {"a": 1})}}]
        code, _, answer = p.send("POST", f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims",
                                 {"metadata": {"name": f"c{n}"}, "spec": {"devices": devices}})
        if code == 201 and rng.random() < 0.5:
            answer["status"] = {"allocation": {"devices": {"results": [{"request": _odd(rng, "r"), "driver": _odd(
                rng, "gpu.fuzz60.example.com"), "pool": _odd(rng, "p"), "device": _odd(rng, "d0"),
                **({"consumedCapacity": {"memory": _odd(rng, "1Gi")}} if rng.random() < 0.3 else {})}]}},
                "devices": [{"driver": _odd(rng, "gpu.fuzz60.example.com"), "pool": "p", "device": _odd(rng, "d0"),
                             "conditions": [{"type": _odd(rng, "Ready"), "status": _odd(rng, "True"),
                                             "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "R",
                                             "message": ""}]}] if rng.random() < 0.5 else []}
            p.send("PUT", f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims/c{n}/status", answer)


def family_workloads(p: Probe, rng: random.Random, until: float) -> None:
    base = f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NS}"
    schemas = Schemas(p.raw)
    n = 0
    while time.monotonic() < until:
        n += 1
        for kind, plural in (("Workload", "workloads"), ("PodGroup", "podgroups")):
            s = schemas.by_kind.get(("scheduling.k8s.io", "v1beta1", kind))
            if s is None:
                return
            body = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": kind, "metadata": {"name": f"{plural[0]}{n}"},
                    **draw(rng, schemas, s)}
            code, _, answer = p.send("POST", f"{base}/{plural}", body)
            if code == 201:
                p.send("PUT", f"{base}/{plural}/{plural[0]}{n}/status", {**answer, "status": draw(
                    rng, schemas, (schemas.resolve(s).get("properties") or {}).get("status") or {})})
                pod = {"metadata": {"name": f"pg{n}"}, "spec": {"schedulerName": "fz-nobody", "containers": [
                    {"name": "c", "image": "busybox"}], "schedulingGroup": draw(rng, schemas, {"type": "object", "properties": {
                        "podGroupName": {"type": "string"}}})}}
                p.send("POST", f"/api/v1/namespaces/{NS}/pods?dryRun=All", pod)


#: what the misbehaving metrics adapter does with a request (its mode, the fuzzer's pick before each)
ADAPTER_MODES = ["ok", "garbage", "status500", "raw500", "redirect", "teapot", "huge", "slow", "reset", "wrongkind",
                 "html", "empty", "nolength"]


class _Adapter:
    """An HTTPS external metrics adapter in a thread, answering as `mode` says (fuzz59's adapters, kept)."""

    def __init__(self):
        import http.server
        import socketserver
        import threading

        from nanokube.apiserver.kubernetes_service import host_address
        from tests.apiserver.metrics_adapter import serving_context

        self.mode = "ok"
        adapter = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                mode = adapter.mode if not self.path.rstrip("/").endswith("v1beta1") or adapter.mode != "ok" else "ok"
                gv = "external.metrics.k8s.io/v1beta1"
                if mode == "reset":
                    self.connection.close()
                    return
                if mode == "slow":
                    time.sleep(2)
                body, code, ctype = b"", 200, "application/json"
                if mode in ("ok", "slow"):
                    if self.path.rstrip("/").endswith("v1beta1"):
                        body = json.dumps({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": [
                            {"name": "m", "singularName": "", "namespaced": True, "kind": "ExternalMetricValueList",
                             "verbs": ["get"]}]}).encode()
                    else:
                        body = json.dumps({"kind": "ExternalMetricValueList", "apiVersion": gv, "metadata": {},
                                           "items": [{"metricName": "m", "metricLabels": {}, "timestamp":
                                                      "2026-01-01T00:00:00Z", "value": "1"}]}).encode()
                elif mode == "garbage":
                    body = b"\x00\xff{not json"
                elif mode == "status500":
                    code, body = 500, json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                                  "message": "adapter-said no", "code": 500}).encode()
                elif mode == "raw500":
                    code, body, ctype = 500, b"adapter-said boom", "text/plain"
                elif mode == "redirect":
                    self.send_response(302)
                    self.send_header("Location", "https://127.0.0.1:1/api/v1/secrets")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                elif mode == "teapot":
                    code, body = 418, b"{}"
                elif mode == "huge":
                    body = b'{"kind": "ExternalMetricValueList", "items": [' + b'{"metricName": "m"},' * 400000 + b"{}]}"
                elif mode == "wrongkind":
                    body = json.dumps({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "x"}}).encode()
                elif mode == "html":
                    body, ctype = b"<html>adapter-said</html>", "text/html"
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                if mode != "nolength":
                    self.send_header("Content-Length", str(len(body)))
                else:
                    self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_PUT = do_DELETE = do_PATCH = do_GET

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.ip = host_address() or "127.0.0.1"
        self.server = Server((self.ip, 0), Handler)
        ctx = serving_context("fz60-adapter-ca", "adapter.fuzz60.svc")
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def family_metrics(p: Probe, rng: random.Random, until: float) -> None:
    adapter = _Adapter()
    try:
        p.send("POST", f"/api/v1/namespaces/{NS}/services", {"metadata": {"name": "adapter"}, "spec": {
            "ports": [{"port": 443, "targetPort": adapter.port}]}})
        p.send("POST", f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices", {
            "metadata": {"name": "adapter-1", "labels": {"kubernetes.io/service-name": "adapter"}}, "addressType": "IPv4",
            "endpoints": [{"addresses": [adapter.ip], "conditions": {"ready": True}}],
            "ports": [{"name": "", "port": adapter.port, "protocol": "TCP"}]})
        url = "/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.external.metrics.k8s.io"
        code, _, svc = p.send("GET", url)
        if code == 200:
            svc["spec"] = {**svc["spec"], "service": {"namespace": NS, "name": "adapter", "port": 443},
                           "insecureSkipTLSVerify": True}
            svc["spec"].pop("caBundle", None)
            p.send("PUT", url, svc)
        base = "/apis/external.metrics.k8s.io/v1beta1"
        paths = [base, f"{base}/namespaces/{NS}/m", f"{base}/namespaces/{NS}/m?labelSelector=a%3Db",
                 f"{base}/namespaces/{NS}/m?labelSelector=a%20in%20(", f"{base}/namespaces/{NS}/..%2F..%2Fapi",
                 f"{base}/namespaces/{NS}/m/../../../../api/v1/secrets", f"{base}/namespaces/%00/m", f"{base}/m",
                 f"{base}/namespaces/{NS}/" + "m" * 3000, f"{base}/namespaces/{NS}/m?watch=1"]
        while time.monotonic() < until:
            adapter.mode = rng.choice(ADAPTER_MODES)
            method = rng.choice(["GET", "GET", "GET", "POST", "DELETE", "PUT"])
            p.send(method, rng.choice(paths), None if method in ("GET", "DELETE") else {"a": 1}, cut=adapter.mode == "huge",
                   headers={"Accept": rng.choice(["application/json", "application/vnd.kubernetes.protobuf",
                                                  "application/json;as=Table;v=v1;g=meta.k8s.io", "*/*"])})
    finally:
        adapter.close()


UI_PATHS = ["/ui", "/ui/", "/ui/index.html", "/ui/../api/v1/secrets", "/ui/%2e%2e/%2e%2e/etc/passwd", "/ui/..%2f..%2fapi",
            "/ui/%00", "/ui/" + "a" * 5000, "/ui//", "/ui/./index.html", "/ui/%2F", "/ui/app.js", "/ui/x.js.map",
            "/ui/?x=" + "%" * 300, "/ui/%C3%A9", "/ui/%FF", "/ui/..;/api", "/ui/.git/config", "/ui/%c0%ae%c0%ae/", "/UI/", "/ui/*"]


def family_ui(p: Probe, rng: random.Random, until: float) -> None:
    while time.monotonic() < until:
        path = rng.choice(UI_PATHS)
        method = rng.choice(["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "PROPFIND"])
        headers = {}
        r = rng.random()
        if r < 0.2:
            headers["X-Big"] = "a" * rng.choice([8000, 16000, 100000])
        elif r < 0.3:
            headers["Range"] = rng.choice(["bytes=0-0", "bytes=-1", "bytes=9999999-", "bytes=a"])
        elif r < 0.4:
            headers["If-None-Match"] = rng.choice(["*", '"x"', "W/" * 1000])
        elif r < 0.5:
            headers["Authorization"] = rng.choice(["Bearer ", "Bearer " + "a" * 60000, "Basic x", "Bearer \x7f"])
        body = rng.choice([None, b"", b"x" * 10000])
        try:
            p.send(method, path.encode("utf-8").decode("latin-1") if not path.isascii() else path, body, ctype=None,
                   headers=headers)
        except Exception as e:  # http.client refuses what it cannot send: nothing reached the server
            print(f"(not sent: {e!r})")


def family_gates(args, rng: random.Random, until: float, totals: dict) -> None:
    from nanokube.machinery import featuregates

    flags = []
    for name, spec in featuregates.KNOWN.items():
        flags += [["--feature-gates", f"{name}=true"], ["--feature-gates", f"{name}=false"]]
    flags += [["--feature-gates", "AllAlpha=true,AllBeta=true"], ["--feature-gates", "AllBeta=false"]]
    # (fuzz61: the flag's own syntax: empty parts, spaces, case, values ParseBool refuses, repeats)
    some = next(iter(featuregates.KNOWN))
    odd = [["--feature-gates", v] for v in ("", ",", "=true", f"{some}", f"{some}=", f"{some}=maybe", f" {some}=true",
                                               f"{some}=TRUE", f"{some}=1", f"{some}=t", f"{some.lower()}=true",
                                               f"{some}=true,{some}=false", f"{some}=true,,", "AllAlpha=maybe",
                                               "Bogus=true", "a=b=c", "\u00e9=true", "x" * 5000 + "=true")]
    odd += [["--feature-gates", f"{some}=true", "--feature-gates", f"{some}=false"]]
    for key in ("resource.k8s.io/v1", "scheduling.k8s.io/v1beta1", "admissionregistration.k8s.io/v1beta1",
                "resource.k8s.io/v1beta2", "batch/v1", "apps/v1", "autoscaling/v2", "policy/v1", "storage.k8s.io/v1",
                "api/alpha", "api/beta", "certificates.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3"):
        flags += [["--runtime-config", f"{key}=false"], ["--runtime-config", f"{key}=true"]]
    rng.shuffle(flags)
    flags = odd + flags  # (the syntax first: a short run covers it)
    for flag in flags:
        if time.monotonic() > until:
            break
        totals["starts"] = totals.get("starts", 0) + 1
        d = Path(tempfile.mkdtemp(prefix="fz60-gate-"))
        try:
            try:
                server = start_cluster(d, "sqlite", tuple(flag))
            except RuntimeError as e:
                text = str(e)
                log = (d / "nanokube.log").read_text(errors="replace")
                lines = [ln for ln in log.splitlines() if ln.strip()]
                if "Traceback" in log or len(lines) > 3:
                    print(f"BROKEN gates: {' '.join(flag)} stopped with {len(lines)} lines:\n{log[-1500:]}", flush=True)
                    totals["broken"] = totals.get("broken", 0) + 1
                else:
                    print(f"gates: {' '.join(flag)} refused: {lines[-1][:200] if lines else text[:200]}")
                continue
            p = Probe(server.kubeconfig, args, "gates")
            try:
                p.send("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
                rs = resources(p.raw)
                for r in rs:
                    if "list" in r.get("verbs", ()):
                        p.send("GET", _url(r) + "?limit=5")
                family_dra(p, rng, time.monotonic() + 1.5)
                family_workloads(p, rng, time.monotonic() + 1.0)
                family_shaped(p, rng, time.monotonic() + 2.0)
            finally:
                server.stop()
            log = server.log_path.read_text(errors="replace")
            if "Traceback" in log:
                print(f"BROKEN gates: {' '.join(flag)}: a traceback in up's log:\n"
                      f"{log[log.index('Traceback'):][:1500]}", flush=True)
                p.broken += 1
            totals["requests"] = totals.get("requests", 0) + p.requests
            totals["broken"] = totals.get("broken", 0) + p.broken
            print(f"gates: {' '.join(flag)}: started, {p.requests} requests, {p.broken} broken, {p.codes}", flush=True)
        finally:
            shutil.rmtree(d, ignore_errors=True)


#: the groups whose kinds carry alpha and beta gates' fields (workload-aware scheduling, DRA, jobs, pods)
GATED_GROUPS = ("apis/scheduling.k8s.io", "apis/resource.k8s.io", "apis/batch", "api/v1", "apis/autoscaling")


def family_restart(args, rng: random.Random, until: float, totals: dict) -> None:
    """`up` with its default gates (nanokube's alpha ones on), objects of the gated groups created for a
    third of the time, then `up` again on the same data with every alpha gate off (and then every beta
    one): each stored object read, written back unchanged and labelled, every resource listed."""
    from nanokube.machinery import featuregates

    d = Path(tempfile.mkdtemp(prefix="fz60-restart-"))
    offs = [",".join(f"{n}=false" for n, sp in featuregates.KNOWN.items() if sp.stage == stage and not sp.locked
                     and n not in (featuregates.ALL_ALPHA, featuregates.ALL_BETA)) for stage in ("ALPHA", "BETA")]
    try:
        server = start_cluster(d, args.store)
        p = Probe(server.kubeconfig, args, "restart")
        try:
            p.send("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
            family_shaped(p, rng, time.monotonic() + (until - time.monotonic()) / 3, dry_share=0.0, groups=GATED_GROUPS)
        finally:
            server.stop()
        for off in offs:
            try:
                server = start_cluster(d, args.store, ("--feature-gates", off))
            except RuntimeError as e:
                print(f"BROKEN restart: up --feature-gates {off[:80]}... did not start: {str(e)[-600:]}", flush=True)
                p.broken += 1
                continue
            p = Probe(server.kubeconfig, args, "restart")
            try:
                for r in resources(p.raw):
                    if "list" not in r.get("verbs", ()) or not r["gv"].startswith(GATED_GROUPS):
                        continue
                    code, _, items = p.send("GET", f"/{r['gv']}/{r['name']}" if r["namespaced"] else _url(r))
                    for item in (items.get("items") or []) if code == 200 else []:
                        meta = item["metadata"]
                        url = _url(r, meta["name"], meta.get("namespace") or NS)
                        item.setdefault("apiVersion", r["gv"][5:] if r["gv"].startswith("apis/") else "v1")
                        item.setdefault("kind", r["kind"])
                        for method, body, ctype in (("PUT", item, "application/json"), ("PATCH", {"metadata": {
                                "labels": {"fz60": "restarted"}}}, "application/merge-patch+json")):
                            code, _, answer = p.send(method, url + ("?dryRun=All" if method == "PUT" else ""), body,
                                                     ctype=ctype)
                            if code == 422:  # what was stored must stay writable as it is (dropDisabledFields)
                                p.report(method, url, body, f"written back, refused: {str(answer)[:500]}")
                        if time.monotonic() > until:
                            break
            finally:
                server.stop()
                log = server.log_path.read_text(errors="replace")
                if "Traceback" in log:
                    print(f"BROKEN restart: a traceback in up's log:\n{log[log.index('Traceback') - 300:][:1500]}")
                    p.broken += 1
            print(f"restart ({off[:40]}...): {p.requests} requests, {p.broken} broken, {p.codes}", flush=True)
            totals["requests"] = totals.get("requests", 0) + p.requests
            totals["broken"] = totals.get("broken", 0) + p.broken
    finally:
        shutil.rmtree(d, ignore_errors=True)


# --- fuzz61: the authentication and authorization configs, JWTs, the webhook authorizer, reviews -----

#: what the webhook authorizer does with one review (the fuzzer picks per request)
WEBHOOK_MODES = ("allow", "deny", "noopinion", "garbage", "status-string", "huge", "slow", "drip", "500", "429",
                 "reset", "no-length", "empty", "html", "deep", "cut", "not-http")


def _webhook_handler(modes: list[str]):
    """An authorization webhook's handler answering each review as `modes[0]` says."""
    import http.server

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            review = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            mode = modes[0]
            status = {"allowed": mode == "allow", "denied": mode == "deny", "reason": "fz61 " + mode}
            body = json.dumps({**review, "status": status}).encode()
            code, ctype = 200, "application/json"
            if mode == "garbage":
                body = b"\x00{not json"
            elif mode == "status-string":
                body = json.dumps({**review, "status": "allowed"}).encode()
            elif mode == "huge":
                body = json.dumps({**review, "status": {**status, "reason": "x" * 8_000_000}}).encode()
            elif mode == "slow":
                time.sleep(4)  # (past the webhook's 3 s timeout)
            elif mode in ("500", "429"):
                code = int(mode)
            elif mode == "html":
                body, ctype = b"<html>no</html>", "text/html"
            elif mode == "deep":
                body = b'{"status":' + b"[" * 5000 + b"]" * 5000 + b"}"
            elif mode == "empty":
                body = b""
            if mode == "not-http":
                self.wfile.write(b"SSH-2.0-OpenSSH\r\n\r\n")
                self.close_connection = True
                return
            if mode == "not-http":
                self.wfile.write(b"SSH-2.0-OpenSSH\r\n\r\n")
                self.close_connection = True
                return
            if mode == "reset":
                self.connection.setsockopt(__import__("socket").SOL_SOCKET, __import__("socket").SO_LINGER,
                                           b"\x01\x00\x00\x00\x00\x00\x00\x00")
                self.connection.close()
                return
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            if code == 429:
                self.send_header("Retry-After", "1")
            if mode in ("no-length", "cut"):
                self.send_header("Connection", "close")
                if mode == "cut":  # (a length the body never reaches)
                    self.send_header("Content-Length", str(len(body) + 100))
            else:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if mode == "drip":  # a byte a second for 10 s: each read within the timeout, the whole past it
                for b in body[:10]:
                    self.wfile.write(bytes([b]))
                    self.wfile.flush()
                    time.sleep(1)
                body = body[10:]
            self.wfile.write(body)

        def log_message(self, *args):
            pass
    return Handler


class _InThread:
    """An async context manager (the test issuer's server) entered on an event loop of its own thread."""

    def __init__(self, cm):
        import asyncio
        import threading

        self.cm, self.loop = cm, asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.value = asyncio.run_coroutine_threadsafe(cm.__aenter__(), self.loop).result(30)

    def close(self):
        import asyncio

        asyncio.run_coroutine_threadsafe(self.cm.__aexit__(None, None, None), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)


def _b64(data: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwt(rng: random.Random, issuer, other) -> str:
    """A token of a drawn shape: mostly well signed by `issuer` with odd claims, else malformed."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    now = int(time.time())
    kid, key = issuer.keys[-1]
    claims = {"iss": issuer.url, "aud": "nanokube", "sub": "alice", "iat": now, "exp": now + 600,
              "hd": "example.com", "groups": ["dev"], "uid": "u-1", "tenant": "blue", "email": "a@example.com",
              "email_verified": True}
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        k = rng.choice([*claims, "nbf", "x"])
        claims[k] = rng.choice([None, "", 5, -1, 1.5, 2**63 - 1, 1e300, True, [], ["a", 5], {}, {"a": [None]}, "x" * 5000,
                                "system:admin", "\u202e", [now], now - 10_000, now + 10**9, "é" * 300, [""] * 300, [{}],
                                [[1]], [None], {"a": 1}, "nanokube", ["nanokube", {}]])
        if rng.random() < 0.1:
            claims.pop(k, None)
    if rng.random() < 0.1:
        claims["iss"] = rng.choice([other.url, issuer.url + "/", issuer.url.upper(), 5, None])
    header = {"alg": "RS256", "kid": kid, "typ": "JWT"}
    if rng.random() < 0.3:
        header[rng.choice(["alg", "kid", "typ", "crit", "jku"])] = rng.choice(
            ["none", "HS256", "ES256", "PS256", "RS512", "", 5, None, "key-99", [kid], "x" * 3000])
    enc = [_b64(json.dumps(header).encode()), _b64(json.dumps(claims).encode())]
    if rng.random() < 0.05:
        enc[rng.randrange(2)] = rng.choice(["", "!!!", "e30", _b64(b"[1]"), _b64(b"\xff\xfe"), _b64(b"{" * 3000),
                                            _b64(b'{"iss":"%s","exp":1e999}' % issuer.url.encode()), "a" * 200_000])
    signing = ".".join(enc)
    sig = _b64(key.sign(signing.encode(), padding.PKCS1v15(), hashes.SHA256()))
    if header.get("alg") == "PS256":
        sig = _b64(key.sign(signing.encode(), padding.PSS(padding.MGF1(hashes.SHA256()), 32), hashes.SHA256()))
    r = rng.random()
    if r < 0.1:
        sig = rng.choice(["", "AAAA", sig[:-4], sig + "AA", "!" * 10, sig.upper()])
    token = f"{signing}.{sig}"
    if r > 0.95:
        token = rng.choice([token + ".x", token.replace(".", "..", 1), " " + token, token[:40], "a.b.c", "..", ".",
                            token + "\u00e9", token * 3])
    return token


def _tally(family: str, server, p: Probe, totals: dict) -> None:
    """A family run on its own `up`: the tracebacks in its log count as broken, its counts are printed
    and added to `totals`."""
    for tb in tracebacks(server.log_path.read_text(errors="replace")):
        print(f"BROKEN {family}: a traceback in up's log:\n{tb}", flush=True)
        p.broken += 1
    print(f"{family}: {p.requests} requests, {p.broken} broken, codes {dict(sorted(p.codes.items()))}, "
          f"slowest {p.slowest[0]:.2f} s ({p.slowest[1][:100]})", flush=True)
    totals["requests"] = totals.get("requests", 0) + p.requests
    totals["broken"] = totals.get("broken", 0) + p.broken


def _config_variant(rng: random.Random, good: list[str], kind: str) -> str:
    """A file for a reload: one of the good ones, or a broken, huge or cut one."""
    head = f"apiVersion: apiserver.config.k8s.io/v1\nkind: {kind}\n"
    r = rng.random()
    if r < 0.5:
        return rng.choice(good)
    text = rng.choice(good)
    return rng.choice([
        "", head, text[: rng.randrange(len(text))], text + "\nx: 1\n", text.replace("v1\n", "v2\n", 1),
        head + "[" * 2000 + "]" * 2000, "[" * 5000, text + "#" + "x" * 3_000_000 + "\n", head + "jwt: 5\n",
        head + "authorizers: [{type: RBAC, name: rbac}, {type: RBAC, name: rbac2}]\n",
        head + "anonymous: {enabled: false}\n", text.replace("nanokube]", "nanokube, " + ", ".join(f"a{i}" for i in range(5000)) + "]"),
        text.replace("timeout: 3s", rng.choice(["timeout: 0s", "timeout: 31s", "timeout: -1s", "timeout: 1e9h"])),
        text.replace("has(request", "has(request.x.y) && has(request"), text.replace("claim: sub", "expression: 'claims.sub + 1'"),
        text + "\xff", text.replace("\n", "\r\n"), "\ufeff" + text,
    ])


def family_auth(args, rng: random.Random, until: float, totals: dict) -> None:
    """`up` with --authentication-config (two JWT issuers: claim and CEL mappings, validation rules) and
    --authorization-config (a webhook that answers each review as drawn: slow, a byte a second, garbage,
    8 MB, 500, 429, reset..., then Node and RBAC): drawn tokens on requests and in TokenReviews, odd
    SubjectAccessReview, SelfSubjectAccessReview and SelfSubjectRulesReview bodies by admin and by token
    users; both files rewritten while it runs (good, broken, huge, cut, removed)."""
    from tests.apiserver.auth.jwt_issuer import Issuer
    from tests.apiserver.auth.test_authorization_config import Webhook

    d = Path(tempfile.mkdtemp(prefix="fz61-auth-"))
    issuers = [_InThread(Issuer().served()), _InThread(Issuer().served())]
    a, b = issuers[0].value, issuers[1].value
    modes = ["allow"]
    webhook = Webhook(d)
    webhook.httpd.RequestHandlerClass = _webhook_handler(modes)
    webhook.httpd.handle_error = lambda *a: None  # (the server hanging up on a slow answer)
    authn_good = [a.config(), a.config(
        "    username:\n      claim: sub\n      prefix: 'oidc:'\n    groups:\n      expression: 'claims.groups.map(g, \"g:\" + g)'\n"
        "    uid:\n      claim: uid\n    extra:\n    - key: example.com/tenant\n      valueExpression: 'has(claims.tenant) ? claims.tenant : \"\"'\n",
        "  claimValidationRules:\n  - claim: hd\n    requiredValue: example.com\n  - expression: 'claims.exp - claims.iat <= 3600'\n"
        "  userValidationRules:\n  - expression: \"!user.username.startsWith('oidc:system:')\"\n")]
    second = b.config("    username:\n      expression: 'claims.email_verified ? claims.email : \"x\"'\n    groups:\n      expression: 'claims.groups'\n")
    authn_good.append(authn_good[1] + second[second.index("jwt:\n") + 5:])
    authz_good = [f"""apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
- type: Webhook
  name: fuzz
  webhook:
    timeout: 3s
    authorizedTTL: {t}
    unauthorizedTTL: {t}
    subjectAccessReviewVersion: {v}
    matchConditionSubjectAccessReviewVersion: v1
    failurePolicy: {policy}
    connectionInfo:
      type: KubeConfigFile
      kubeConfigFile: {webhook.kubeconfig}
    matchConditions:
    - expression: has(request.resourceAttributes) || request.user.startsWith('oidc:')
- type: Node
  name: node
- type: RBAC
  name: rbac
""" for t, v, policy in (("1s", "v1", "NoOpinion"), ("5m", "v1beta1", "Deny"), ("10ms", "v1", "Deny"))]
    authn, authz = d / "authn.yaml", d / "authz.yaml"
    authn.write_text(authn_good[2])
    authz.write_text(authz_good[0])
    totals["starts"] = totals.get("starts", 0) + 1
    server = start_cluster(d / "up", args.store, ("--authentication-config", str(authn), "--authorization-config", str(authz)))
    p = Probe(server.kubeconfig, args, "auth")
    bearer = _bearer(p)
    try:
        p.send("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
        p.send("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
            "metadata": {"name": "fz61-oidc-view"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                                "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "Group", "name": "g:dev", "apiGroup": "rbac.authorization.k8s.io"}]})
        n = 0
        while time.monotonic() < until:
            n += 1
            modes[0] = rng.choice(WEBHOOK_MODES)
            if n % 40 == 0:
                target, good, kind = rng.choice([(authn, authn_good, "AuthenticationConfiguration"),
                                                 (authz, authz_good, "AuthorizationConfiguration")])
                if rng.random() < 0.1:
                    target.unlink(missing_ok=True)
                else:
                    text = _config_variant(rng, good, kind)
                    target.write_bytes(text.encode("utf-8", "surrogateescape") if "\xff" not in text
                                       else text.replace("\xff", "").encode() + b"\xff")
                if rng.random() < 0.5:  # a file written in two steps, read between them
                    time.sleep(rng.choice([0.0, 0.5, 1.1]))
                    target.write_text(rng.choice(good))
            token = _jwt(rng, rng.choice([a, b]), rng.choice([a, b]))
            what = rng.random()
            ns = rng.choice([NS, "kube-system", "default"])
            if what < 0.5:
                method, path, body = rng.choice([
                    ("GET", f"/api/v1/namespaces/{ns}/pods", None), ("GET", "/api/v1/nodes?limit=1", None),
                    ("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {"apiVersion": "authentication.k8s.io/v1",
                                                                                  "kind": "SelfSubjectReview"}),
                    ("POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", {"spec": {"namespace": ns}}),
                    ("GET", "/version", None), ("GET", "/apis", None), ("GET", "/livez", None)])
                try:
                    _send_as(p, bearer, method, path, body, token)
                except Exception as e:  # http.client refuses what it cannot send: nothing reached the server
                    print(f"(not sent: {e!r:.100})")
            elif what < 0.7:
                body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
                if rng.random() < 0.3:
                    body["spec"]["audiences"] = rng.choice([[], ["nanokube"], ["x"] * 500, [""], None, "nanokube", [5]])
                if rng.random() < 0.1:
                    body["spec"] = rng.choice([None, [], "x", {"token": 5}, {"token": ""}, {"token": "x" * 2_000_000}])
                p.send("POST", "/apis/authentication.k8s.io/v1/tokenreviews", body)
            else:
                kind = rng.choice(["SubjectAccessReview", "SelfSubjectAccessReview", "SelfSubjectRulesReview",
                                   "LocalSubjectAccessReview"])
                plural = kind.lower() + "s"
                spec = _review_spec(rng, kind, ns)
                url = (f"/apis/authorization.k8s.io/v1/namespaces/{ns}/{plural}" if kind.startswith("Local")
                       else f"/apis/authorization.k8s.io/v1/{plural}")
                body = {"apiVersion": "authorization.k8s.io/v1", "kind": kind, "metadata": {"name": "x"}, "spec": spec}
                if rng.random() < 0.3 and kind.startswith("Self"):
                    _send_as(p, bearer, "POST", url, body, _jwt(random.Random(0), a, b))
                else:
                    p.send("POST", url, body)
        for target, good in ((authn, authn_good[2]), (authz, authz_good[0])):
            target.write_text(good)
        time.sleep(2.5)
        modes[0] = "allow"
        code, _, answer = _send_as(p, bearer, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                   {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                                   a.token(hd="example.com", groups=["dev"], uid="u-1", tenant="blue"))
        if code != 201:  # the good files were applied again: the reload loops are alive
            p.report("POST", "selfsubjectreviews", None, f"a good token after the good files: {code} {str(answer)[:300]}")
    finally:
        server.stop()
        webhook.close()
        for i in issuers:
            i.close()
        _tally("auth", server, p, totals)
        shutil.rmtree(d, ignore_errors=True)


def _bearer(p: Probe) -> Raw:
    """A connection to p's server without the admin's client certificate (a bearer token's own)."""
    import ssl

    bearer = Raw(p.kubeconfig, timeout=p.args.slow + 30)
    bearer.ctx = ssl.create_default_context()
    bearer.ctx.check_hostname, bearer.ctx.verify_mode = False, ssl.CERT_NONE
    return bearer


def _send_as(p: Probe, bearer: Raw, method: str, path: str, body, token: str):
    """One request by a bearer token alone (no client certificate), judged as p.send judges."""
    raw, p.raw = p.raw, bearer
    try:
        return p.send(method, path, body, headers={"Authorization": "Bearer " + token})
    finally:
        p.raw = raw


def _review_spec(rng: random.Random, kind: str, ns: str):
    """A review's spec, mostly plausible, sometimes of odd shape."""
    if kind == "SelfSubjectRulesReview":
        return rng.choice([{"namespace": ns}, {}, {"namespace": ""}, {"namespace": 5}, None, {"namespace": "x" * 300}])
    ra = {k: rng.choice(v) for k, v in (("namespace", [ns, "", "*", None]), ("verb", ["get", "list", "*", "", "x" * 300]),
                                         ("group", ["", "apps", "*"]), ("resource", ["pods", "secrets", "*", ""]),
                                         ("subresource", ["", "status", "exec"]), ("name", ["", "a", "*"]),
                                         ("version", ["", "v1", "*"])) if rng.random() < 0.7}
    if rng.random() < 0.2:
        ra["fieldSelector"] = rng.choice([{"rawSelector": "a=b"}, {"requirements": [{"key": "a", "operator": "In",
                                                                                    "values": ["b"]}]},
                                          {"rawSelector": "a=b", "requirements": [{"key": "a", "operator": "Bogus"}]},
                                          {"requirements": [{"operator": "Exists", "values": ["x"]}]}, "a=b", 5])
    if rng.random() < 0.2:
        ra["labelSelector"] = rng.choice([{"rawSelector": "a in ("}, {"requirements": [{"key": "a", "operator": "Gt",
                                                                                       "values": ["x"]}]}, [], {}])
    spec = {"resourceAttributes": ra} if rng.random() < 0.8 else {"nonResourceAttributes": rng.choice([
        {"path": "/healthz", "verb": "get"}, {"path": "", "verb": ""}, {"path": "*"}, {"path": 5}])}
    if rng.random() < 0.1:
        spec["nonResourceAttributes"] = {"path": "/x", "verb": "get"}
    if kind in ("SubjectAccessReview", "LocalSubjectAccessReview"):
        spec.update({k: rng.choice(v) for k, v in (("user", ["alice", "", "system:admin", "oidc:alice", "x" * 500]),
                                                    ("groups", [["g:dev"], [], ["system:masters"], [""], None, "g"]),
                                                    ("uid", ["", "u"]),
                                                    ("extra", [{}, {"a": ["b"]}, {"a": None}, {"": [""]}, {"a": "b"}]))
                     if rng.random() < 0.7})
    return spec if rng.random() < 0.95 else rng.choice([None, [], "x", {"x": 1}])


# --- fuzz61: quota scopes and LimitRanges, evictions, storage objects, bootstrap tokens, watch parameters --

QUOTA_SCOPES = ["Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass",
                "CrossNamespacePodAffinity", "VolumeAttributesClass", "bogus", "", "terminating"]
QUOTA_RESOURCES = ["pods", "count/pods", "requests.cpu", "limits.memory", "cpu", "memory", "requests.storage",
                   "persistentvolumeclaims", "count/deployments.apps", "count/foo.example.com", "requests.nvidia.com/gpu",
                   "services.loadbalancers", "x", "", "hugepages-2Mi", "requests.ephemeral-storage",
                   "gold.storageclass.storage.k8s.io/requests.storage", "count/resourceclaims.resource.k8s.io",
                   "gpu.deviceclass.resource.k8s.io/devices", "attributes"]


def _pod_resources(rng: random.Random) -> dict:
    out = {}
    for part in ("requests", "limits"):
        if rng.random() < 0.6:
            out[part] = {rng.choice(["cpu", "memory", "ephemeral-storage", "nvidia.com/gpu", "hugepages-2Mi"]):
                         rng.choice(QUANTITIES) for _ in range(rng.choice([1, 1, 2]))}
    return out


def family_quota(p: Probe, rng: random.Random, until: float) -> None:
    """Namespaces with ResourceQuotas of drawn scopes, scopeSelectors and hard resources, and LimitRanges of
    drawn types and bounds; then pods, PVCs and claims created there (admission reads both), the quota
    updated and deleted under them."""
    n = 0
    while time.monotonic() < until:
        n += 1
        ns = f"q-{n}"
        p.send("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
        for i in range(rng.choice([1, 1, 2])):
            spec: dict = {"hard": {rng.choice(QUOTA_RESOURCES): rng.choice(QUANTITIES) for _ in range(rng.choice([1, 2, 3]))}}
            if rng.random() < 0.5:
                spec["scopes"] = rng.sample(QUOTA_SCOPES, rng.choice([1, 1, 2]))
            if rng.random() < 0.5:
                spec["scopeSelector"] = {"matchExpressions": [{
                    k: v for k, v in (("scopeName", rng.choice(QUOTA_SCOPES)),
                                      ("operator", rng.choice(["In", "NotIn", "Exists", "DoesNotExist", "Gt", ""])),
                                      ("values", rng.choice([["high"], [], None, ["a", "b"], [""], ["x" * 300]])))
                    if v is not None or rng.random() < 0.2} for _ in range(rng.choice([0, 1, 2]))]}
            p.send("POST", f"/api/v1/namespaces/{ns}/resourcequotas", {"metadata": {"name": f"rq{i}"}, "spec": spec})
        if rng.random() < 0.7:
            limits = []
            for _ in range(rng.choice([1, 2, 3])):
                item: dict = {"type": rng.choice(["Container", "Pod", "PersistentVolumeClaim", "bogus", ""])}
                for field in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
                    if rng.random() < 0.4:
                        item[field] = {rng.choice(["cpu", "memory", "storage", "ephemeral-storage", "nvidia.com/gpu"]):
                                       rng.choice(QUANTITIES)}
                limits.append(item)
            p.send("POST", f"/api/v1/namespaces/{ns}/limitranges", {"metadata": {"name": "lr"}, "spec": {"limits": limits}})
        for i in range(4):
            r = rng.random()
            if r < 0.6:
                spec = {"containers": [{"name": "c", "image": "busybox", "resources": _pod_resources(rng)}]}
                if rng.random() < 0.3:
                    spec["priorityClassName"] = rng.choice(["system-cluster-critical", "high", "x"])
                if rng.random() < 0.3:
                    spec["activeDeadlineSeconds"] = rng.choice([1, 30, 0, -1])
                if rng.random() < 0.2:
                    spec["initContainers"] = [{"name": "i", "image": "busybox", "resources": _pod_resources(rng)}]
                if rng.random() < 0.2:
                    spec["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"topologyKey": "kubernetes.io/hostname", "namespaces": ["x"], "labelSelector": {}}]}}
                if rng.random() < 0.15:
                    spec["resources"] = _pod_resources(rng)
                p.send("POST", f"/api/v1/namespaces/{ns}/pods" + ("?dryRun=All" if rng.random() < 0.3 else ""),
                       {"metadata": {"name": f"p{i}"}, "spec": spec})
            elif r < 0.85:
                p.send("POST", f"/api/v1/namespaces/{ns}/persistentvolumeclaims", {"metadata": {"name": f"c{i}"}, "spec": {
                    "accessModes": ["ReadWriteOnce"], "resources": _pod_resources(rng) or {"requests": {"storage": "1Gi"}},
                    **({"storageClassName": rng.choice(["gold", "", "standard"])} if rng.random() < 0.5 else {}),
                    **({"volumeAttributesClassName": rng.choice(["vac", ""])} if rng.random() < 0.2 else {})}})
            else:
                p.send("POST", f"/api/v1/namespaces/{ns}/services", {"metadata": {"name": f"s{i}"}, "spec": {
                    "type": rng.choice(["LoadBalancer", "NodePort", "ClusterIP"]), "ports": [{"port": 80}]}})
        if rng.random() < 0.5:
            p.send("PATCH", f"/api/v1/namespaces/{ns}/resourcequotas/rq0", {"spec": {"hard": {
                rng.choice(QUOTA_RESOURCES): rng.choice(QUANTITIES)}, "scopes": rng.choice([None, ["BestEffort"], ["x"]])}},
                ctype="application/merge-patch+json")
        if rng.random() < 0.3:
            p.send("PATCH", f"/api/v1/namespaces/{ns}/resourcequotas/rq0/status", {"status": {
                "hard": {"pods": rng.choice(QUANTITIES)}, "used": {rng.choice(QUOTA_RESOURCES): rng.choice(QUANTITIES)}}},
                ctype="application/merge-patch+json")
        if n % 8 == 0:
            p.send("DELETE", f"/api/v1/namespaces/{ns}")


def _delete_options(rng: random.Random):
    """An Eviction's deleteOptions, sometimes odd."""
    opts = {}
    for key, values in (("gracePeriodSeconds", [0, 1, 30, -1, 2**63 - 1, -(2**63), "5", None]),
                        ("preconditions", [{"uid": "x"}, {"resourceVersion": "1"}, {"uid": ""}, {}, None, "x"]),
                        ("propagationPolicy", ["Background", "Foreground", "Orphan", "bogus", "", None]),
                        ("orphanDependents", [True, False, None]),
                        ("dryRun", [["All"], [], ["x"], "All", None, ["All", "All"]]),
                        ("ignoreStoreReadErrorWithClusterBreakingPotential", [True, False, None]),
                        ("kind", ["DeleteOptions", "Eviction", 5]), ("apiVersion", ["v1", "policy/v1", "meta.k8s.io/v1", "x"])):
        if rng.random() < 0.25:
            opts[key] = rng.choice(values)
    return opts if rng.random() < 0.95 else rng.choice([None, [], "x", 5])


def family_eviction(p: Probe, rng: random.Random, until: float) -> None:
    """Pods (Pending, bound to the node, some terminating or with finalizers) under PodDisruptionBudgets of
    drawn shape, evicted with odd Eviction bodies and deleteOptions; the disruption controller and the
    eviction's retries read what is left."""
    code, _, nodes = p.send("GET", "/api/v1/nodes")
    node_names = [n["metadata"]["name"] for n in (nodes.get("items") or [])] if code == 200 else []
    n = 0
    while time.monotonic() < until:
        n += 1
        label = {"app": f"e{n % 5}"}
        if n % 5 == 0 or n < 6:
            spec: dict = {"selector": rng.choice([{"matchLabels": label}, {}, {"matchExpressions": [
                {"key": "app", "operator": rng.choice(["In", "Exists", "Bogus"]), "values": [label["app"]]}]}])}
            key = rng.choice(["minAvailable", "maxUnavailable", "both", None])
            for k in (("minAvailable", "maxUnavailable") if key == "both" else (key,) if key else ()):
                spec[k] = rng.choice([0, 1, 2, "50%", "100%", "0%", "101%", -1, "x", "1.5%"])
            if rng.random() < 0.4:
                spec["unhealthyPodEvictionPolicy"] = rng.choice(["IfHealthyBudget", "AlwaysAllow", "x", ""])
            p.send("POST", f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets",
                   {"metadata": {"name": f"pdb{n % 5}"}, "spec": spec})
        name = f"ev{n}"
        pod: dict = {"metadata": {"name": name, "labels": label}, "spec": {"containers": [{"name": "c", "image": "busybox"}],
                                                                           "terminationGracePeriodSeconds": rng.choice([0, 1, 30])}}
        if node_names and rng.random() < 0.5:
            pod["spec"]["nodeName"] = rng.choice(node_names)
        if rng.random() < 0.2:
            pod["metadata"]["finalizers"] = ["example.com/hold"]
        p.send("POST", f"/api/v1/namespaces/{NS}/pods", pod)
        for _ in range(rng.choice([1, 1, 2, 3])):
            body: dict = {"apiVersion": rng.choice(["policy/v1", "policy/v1beta1", "v1", "policy/v2"]), "kind": "Eviction",
                          "metadata": {"name": rng.choice([name, name, "other", ""]), "namespace": rng.choice([NS, NS, "x"])}}
            opts = _delete_options(rng)
            if opts or rng.random() < 0.3:
                body["deleteOptions"] = opts
            if rng.random() < 0.05:
                body = rng.choice([{}, [], {"kind": "Eviction"}, {"metadata": None}, {"deleteOptions": {"dryRun": 5}}])
            target = rng.choice([name, name, name, "missing"])
            # (a uid precondition that fails is a conflict EvictionsRetry tries 20 times, 0.5 s apart, as upstream's)
            p.send("POST", f"/api/v1/namespaces/{NS}/pods/{target}/eviction" + rng.choice(["", "", "?dryRun=All",
                                                                                          "?gracePeriodSeconds=0"]), body,
                   slow=12 + p.args.slow if "uid" in json.dumps(body) else None)
        if rng.random() < 0.2:
            p.send("PATCH", f"/api/v1/namespaces/{NS}/pods/{name}", {"metadata": {"finalizers": None}},
                   ctype="application/merge-patch+json")


def family_storage(p: Probe, rng: random.Random, until: float) -> None:
    """CSIDrivers, CSINodes and VolumeAttachments of drawn shape, their updates and VolumeAttachment
    statuses, and PVs, PVCs and pods naming the drivers (the attach/detach controller and the
    scheduler's NodeVolumeLimits read them)."""
    code, _, nodes = p.send("GET", "/api/v1/nodes")
    node_names = [n["metadata"]["name"] for n in (nodes.get("items") or [])] if code == 200 else []
    node_names = (node_names or ["n"]) + ["missing-node"]
    drivers = ["csi.example.com", "hostpath.csi.k8s.io", "x", "-bad-", "a" * 70, "ebs.csi.aws.com"]
    n = 0
    base = "/apis/storage.k8s.io/v1"
    while time.monotonic() < until:
        n += 1
        what = rng.random()
        driver = rng.choice(drivers)
        if what < 0.2:
            spec: dict = {}
            for key, values in (("attachRequired", [True, False, None, "yes"]), ("podInfoOnMount", [True, False]),
                                ("volumeLifecycleModes", [["Persistent"], ["Ephemeral"], ["Persistent", "Ephemeral"], ["x"],
                                                          [], ["Persistent", "Persistent"]]),
                                ("storageCapacity", [True, False]), ("fsGroupPolicy", ["File", "None", "ReadWriteOnceWithFSType", "x"]),
                                ("tokenRequests", [[{"audience": "a", "expirationSeconds": 600}], [{"audience": ""}],
                                                   [{"audience": "a"}, {"audience": "a"}], [{"audience": "b", "expirationSeconds": 1}]]),
                                ("requiresRepublish", [True, False]), ("seLinuxMount", [True, False]),
                                ("nodeAllocatableUpdatePeriodSeconds", [10, 9, 0, -1, 2**40]),
                                ("serviceAccountTokenInSecrets", [True, False])):
                if rng.random() < 0.35:
                    spec[key] = rng.choice(values)
            method = rng.choice(["POST", "POST", "PUT", "PATCH"])
            body = {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": driver}, "spec": spec}
            if method == "POST":
                p.send("POST", f"{base}/csidrivers", body)
            elif method == "PATCH":
                p.send("PATCH", f"{base}/csidrivers/{driver}", {"spec": spec}, ctype="application/merge-patch+json")
            else:
                code, _, current = p.send("GET", f"{base}/csidrivers/{driver}")
                if code == 200:
                    current["spec"].update(spec)
                    p.send("PUT", f"{base}/csidrivers/{driver}", current)
        elif what < 0.4:
            node = rng.choice(node_names)
            entries = [{k: v for k, v in (("name", rng.choice(drivers)), ("nodeID", rng.choice(["n1", "", "x" * 300])),
                                          ("topologyKeys", rng.choice([None, ["topology.kubernetes.io/zone"], ["bad key"],
                                                                       ["a", "a"]])),
                                          ("allocatable", rng.choice([None, {"count": rng.choice(ODD_INTS)}, {}])))
                        if v is not None} for _ in range(rng.choice([0, 1, 2]))]
            body = {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": node}, "spec": {"drivers": entries}}
            if rng.random() < 0.3:
                body["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node,
                                                        "uid": rng.choice(["x", "00000000-0000-0000-0000-000000000000"])}]
            code, _, _ = p.send("POST", f"{base}/csinodes", body)
            if code == 409:
                code, _, current = p.send("GET", f"{base}/csinodes/{node}")
                if code == 200:
                    current["spec"] = body["spec"]
                    p.send("PUT", f"{base}/csinodes/{node}", current)
        elif what < 0.7:
            name = f"va{n % 40}"
            source = rng.choice([{"persistentVolumeName": rng.choice(["pv1", "", "x" * 300])}, {},
                                 {"inlineVolumeSpec": {"csi": {"driver": driver, "volumeHandle": "h"}, "accessModes": ["ReadWriteOnce"],
                                                       "capacity": {"storage": "1Gi"}}},
                                 {"persistentVolumeName": "pv1", "inlineVolumeSpec": {"csi": {"driver": driver, "volumeHandle": "h"}}}])
            body = {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": name},
                    "spec": {"attacher": driver, "nodeName": rng.choice(node_names), "source": source}}
            code, _, _ = p.send("POST", f"{base}/volumeattachments", body)
            status = {k: v for k, v in (("attached", rng.choice([True, False, "x"])),
                                        ("attachmentMetadata", rng.choice([None, {"a": "b"}, {"": "x"}, {"a": 5}])),
                                        ("attachError", rng.choice([None, {"message": "m", "time": "2026-01-01T00:00:00Z",
                                                                           "errorCode": rng.choice([0, 5, -1, 17])}])),
                                        ("detachError", rng.choice([None, {"message": "x" * 2000}])))
                      if v is not None}
            p.send("PATCH", f"{base}/volumeattachments/{name}/status", {"status": status}, ctype="application/merge-patch+json")
            if rng.random() < 0.3:
                p.send("PATCH", f"{base}/volumeattachments/{name}", {"spec": {"nodeName": rng.choice(node_names)}},
                       ctype="application/merge-patch+json")
            if rng.random() < 0.2:
                p.send("DELETE", f"{base}/volumeattachments/{name}")
        else:
            pv = f"pv{n % 20}"
            p.send("POST", "/api/v1/persistentvolumes", {"metadata": {"name": pv}, "spec": {
                "capacity": {"storage": rng.choice(["1Gi", "0", "-1"])}, "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": rng.choice(["Delete", "Retain"]),
                "csi": {"driver": driver, "volumeHandle": rng.choice(["h", "", "x" * 300]),
                        **({"volumeAttributes": {"a": "b"}} if rng.random() < 0.3 else {})},
                **({"claimRef": {"namespace": NS, "name": f"pvc{n % 20}"}} if rng.random() < 0.5 else {})}})
            p.send("POST", f"/api/v1/namespaces/{NS}/persistentvolumeclaims", {"metadata": {"name": f"pvc{n % 20}"}, "spec": {
                "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "volumeName": pv,
                "storageClassName": ""}})
            volumes = [rng.choice([{"name": "v", "persistentVolumeClaim": {"claimName": f"pvc{n % 20}"}},
                                   {"name": "v", "csi": {"driver": driver, "volumeAttributes": {"a": "b"}}},
                                   {"name": "v", "ephemeral": {"volumeClaimTemplate": {"spec": {
                                       "accessModes": ["ReadWriteOnce"], "storageClassName": rng.choice(["gold", ""]),
                                       "resources": {"requests": {"storage": "1Gi"}}}}}}])]
            pod = {"metadata": {"name": f"sp{n}"}, "spec": {"containers": [{"name": "c", "image": "busybox",
                                                                          "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
                                                          "volumes": volumes, "terminationGracePeriodSeconds": 0}}
            if rng.random() < 0.5:
                pod["spec"]["nodeName"] = rng.choice(node_names[:-1])
            p.send("POST", f"/api/v1/namespaces/{NS}/pods", pod)
            if n % 7 == 0:
                p.send("DELETE", f"/api/v1/namespaces/{NS}/pods/sp{n - 5}")


def _csr(rng: random.Random, n: int, node: str = "n1") -> dict:
    """A CertificateSigningRequest a joining or serving node might send (its PEM, CN, O, key, SANs,
    extensions, attributes, signer, usages drawn, some malformed)."""
    import base64
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    from cryptography.x509.oid import AttributeOID, ExtendedKeyUsageOID, NameOID

    key = rng.choice([lambda: ec.generate_private_key(ec.SECP256R1())] * 6 + [
        lambda: ec.generate_private_key(ec.SECP384R1()), lambda: rsa.generate_private_key(65537, 2048),
        lambda: rsa.generate_private_key(65537, 1024), ed25519.Ed25519PrivateKey.generate])()
    names = [x509.NameAttribute(NameOID.COMMON_NAME, rng.choice([f"system:node:{node}", "system:node:", "alice",
                                                                  "system:node:" + "a" * 50])),
             x509.NameAttribute(NameOID.ORGANIZATION_NAME, rng.choice(["system:nodes", "system:masters", "x"]))]
    if rng.random() < 0.1:
        names += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                  x509.NameAttribute(NameOID.COUNTRY_NAME, "US")]
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(names[:rng.choice([1, 2, 2, len(names)])]))
    if rng.random() < 0.5:
        builder = builder.add_extension(x509.SubjectAlternativeName(rng.sample([
            x509.DNSName(node), x509.DNSName("*.example.com"), x509.DNSName("a" * 300), x509.RFC822Name("a@b"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.IPAddress(ipaddress.ip_address("::1")),
            x509.UniformResourceIdentifier("spiffe://x/y")], rng.randint(1, 4))), False)
    if rng.random() < 0.2:
        builder = builder.add_extension(x509.BasicConstraints(ca=rng.random() < 0.5, path_length=None), True)
    if rng.random() < 0.2:
        builder = builder.add_extension(x509.ExtendedKeyUsage(rng.sample(
            [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH, ExtendedKeyUsageOID.CODE_SIGNING], 2)), False)
    if rng.random() < 0.1:
        builder = builder.add_attribute(AttributeOID.CHALLENGE_PASSWORD, b"secret")
    pem = builder.sign(key, None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()).public_bytes(
        serialization.Encoding.PEM)
    body = pem.split(b"-----", 3)[2] if pem.count(b"-----") >= 4 else pem
    pem = rng.choice([pem] * 8 + [b"garbage", pem + pem, pem.replace(b"REQUEST", b"REQUESTX"), pem[:100], b"",
                                  pem.replace(b"\n", b"\r\n"), b"junk before\n" + pem + b"junk after\n",
                                  pem.replace(body, body[:-10] + b"AAAAAAAAAA"),
                                  pem.replace(b"CERTIFICATE REQUEST", b"CERTIFICATE"), pem.replace(b"\n", b"")])
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": f"node-csr-{n}-{rng.randrange(1000)}"},
            "spec": {"request": base64.b64encode(pem).decode() if rng.random() < 0.95 else "!!",
                     "signerName": rng.choice(["kubernetes.io/kube-apiserver-client-kubelet", "kubernetes.io/kubelet-serving",
                                               "kubernetes.io/kube-apiserver-client", "example.com/x", "x"]),
                     "usages": rng.choice([["digital signature", "client auth"], ["client auth"], ["key encipherment", "server auth",
                                          "digital signature"], ["digital signature", "server auth"], [], ["bogus"],
                                          ["client auth", "client auth"], ["server auth", "client auth"]]),
                     **({"expirationSeconds": rng.choice([600, 599, 2**31, 0, -1])} if rng.random() < 0.3 else {})}}


def family_bootstrap(p: Probe, rng: random.Random, until: float) -> None:
    """kube-system bootstrap token Secrets of drawn fields (ids, secrets, expirations, usages, extra groups,
    types, names), then requests by tokens that match them or nearly (the authenticator, the signer and the
    cleaner read the Secrets)."""
    import base64

    bearer = _bearer(p)
    n = 0
    while time.monotonic() < until:
        n += 1
        tid = rng.choice(["abcdef", "a1b2c3", f"{n % 1000:06d}", "ABCDEF", "abc", "abcdefg"])
        secret = rng.choice(["0123456789abcdef", "fedcba9876543210", "short", "0123456789ABCDEF"])
        fields = {"token-id": tid, "token-secret": secret, "usage-bootstrap-authentication": "true",
                  "usage-bootstrap-signing": rng.choice(["true", "false", "TRUE"]),
                  "expiration": rng.choice(["2099-01-01T00:00:00Z", "2020-01-01T00:00:00Z", "2099-01-01", "x", "",
                                            "9999-12-31T23:59:59+23:59", "2099-13-01T00:00:00Z", "0000-01-01T00:00:00Z"]),
                  "auth-extra-groups": rng.choice(["", "system:bootstrappers:kubeadm:default-node-token",
                                                   "system:masters", "system:bootstrappers:a,,b", "system:bootstrappers:" + "a" * 300]),
                  "description": rng.choice(["x", "é" * 100])}
        for k in list(fields):
            if rng.random() < 0.1:
                del fields[k]
        data = {k: base64.b64encode(v.encode()).decode() for k, v in fields.items()}
        if rng.random() < 0.1:
            data[rng.choice(list(data) or ["token-id"])] = rng.choice(["!!!", "", "YQ"])
        name = rng.choice([f"bootstrap-token-{tid}"] * 4 + ["bootstrap-token-", "bootstrap-token-zzzzzz"])
        body = {"metadata": {"name": name}, "type": rng.choice(["bootstrap.kubernetes.io/token"] * 4 + ["Opaque"]),
                "data": data}
        code, _, _ = p.send("POST", "/api/v1/namespaces/kube-system/secrets", body)
        if code == 409:
            p.send("PUT", f"/api/v1/namespaces/kube-system/secrets/{name}", body)
        for _ in range(3):
            token = rng.choice([f"{tid}.{secret}", f"{tid}.{secret}x", f"{tid}.{secret.upper()}", f"{tid}:{secret}",
                                f"abcdef.{secret}", f"{tid}.{secret}\u00e9"])
            method, path, body = rng.choice([
                ("GET", "/apis/certificates.k8s.io/v1/certificatesigningrequests", None),
                ("GET", "/api/v1/namespaces/kube-public/configmaps/cluster-info", None),
                ("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                 {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
                ("POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests", _csr(rng, n))])
            try:
                _send_as(p, bearer, method, path, body, token)
            except Exception as e:  # http.client refuses what it cannot send: nothing reached the server
                print(f"(not sent: {e!r:.100})")
        if rng.random() < 0.3:
            p.send("DELETE", f"/api/v1/namespaces/kube-system/secrets/{name}")


WATCHED = ["/api/v1/namespaces/{ns}/pods", "/api/v1/namespaces", "/api/v1/namespaces/{ns}/configmaps", "/api/v1/nodes",
           "/apis/apps/v1/namespaces/{ns}/deployments", "/apis/storage.k8s.io/v1/volumeattachments", "/api/v1/events",
           "/apis/resource.k8s.io/v1/resourceclaims", "/apis/coordination.k8s.io/v1/leases", "/api/v1/secrets"]


def _watch(p: Probe, path: str, read_for: float) -> None:
    """A watch request whose head must come within --slow seconds, read for `read_for` seconds then hung up on."""
    import socket

    p.requests += 1
    conn = http.client.HTTPSConnection(p.raw.host, p.raw.port, context=p.raw.ctx, timeout=p.args.slow)
    t0 = time.monotonic()
    try:
        conn.request("GET", path, headers={"Accept": "application/json"})
        r = conn.getresponse()
        p.codes[r.status] = p.codes.get(r.status, 0) + 1
        if r.status >= 400:
            raw = r.read()
            try:
                answer = json.loads(raw or b"{}")
            except ValueError:
                answer = raw
            if r.status >= 500 and not _external(answer):
                p.report("GET", path, None, f"{r.status}: {str(answer)[:600]}")
            elif not _status(answer, r.status):
                p.report("GET", path, None, f"{r.status} not a Status: {str(answer)[:300]}")
        else:
            conn.sock.settimeout(read_for)
            end = time.monotonic() + read_for
            try:
                while time.monotonic() < end and r.read1(65536):
                    pass
            except (socket.timeout, TimeoutError):
                pass
    except (OSError, http.client.HTTPException) as e:
        p.report("GET", path, None, f"no answer: {e!r} after {time.monotonic() - t0:.1f} s")
    finally:
        conn.close()


def family_watch(p: Probe, rng: random.Random, until: float) -> None:
    """Watches of ten resources with drawn timeoutSeconds, allowWatchBookmarks, sendInitialEvents,
    resourceVersion and resourceVersionMatch, selectors, limits and continues (the head within --slow
    seconds, a few seconds read), writes to the same resources between them."""
    import urllib.parse

    code, _, listed = p.send("GET", f"/api/v1/namespaces/{NS}/configmaps")
    rv = (listed.get("metadata") or {}).get("resourceVersion", "1") if code == 200 else "1"
    n = 0
    while time.monotonic() < until:
        n += 1
        query: dict = {"watch": rng.choice(["1", "true", "1", "false", "x", "0"])}
        for key, values in (("timeoutSeconds", ["1", "2", "0", "-1", "1.5", "x", str(2**40), "", "1e3"]),
                            ("allowWatchBookmarks", ["true", "false", "x", "1", ""]),
                            ("sendInitialEvents", ["true", "false", "x", ""]),
                            ("resourceVersionMatch", ["NotOlderThan", "Exact", "x", "", "notolderthan"]),
                            ("resourceVersion", ["", "0", rv, str(int(rv) + 10**6) if rv.isdigit() else "9", "x", "-1",
                                                 "1", str(2**64), "2", "00", " 1", "1.5", "9" * 5000,
                                                 str(max(int(rv) - 1, 1)) if rv.isdigit() else "1"]),
                            ("labelSelector", ["a=b", "a in (", "!a", "x" * 70 + "=y"]),
                            ("fieldSelector", ["metadata.name=x", "spec.nodeName=", "status.phase!=Running", "x=y", "a==b==c"]),
                            ("limit", ["1", "0", "-1", "x"]), ("continue", ["x", "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"]),
                            ("resourceVersion", ["0"])):
            if rng.random() < (0.9 if key == "timeoutSeconds" else 0.3):
                query[key] = rng.choice(values)
        path = rng.choice(WATCHED).format(ns=NS) + "?" + urllib.parse.urlencode(query)
        _watch(p, path, rng.choice([0.2, 0.5, 1.5]))
        if n % 3 == 0:
            p.send("POST", f"/api/v1/namespaces/{NS}/configmaps", {"metadata": {"name": f"w{n}"}, "data": {"a": "b"}})
        if n % 7 == 0:
            p.send("DELETE", f"/api/v1/namespaces/{NS}/configmaps/w{n - 3}")


KUBELET_PATHS = ["/pods", "/pods/", "/runningpods/", "/configz", "/healthz", "/healthz/ping", "/healthz/syncloop",
                 "/healthz/x", "/metrics", "/metrics/resource", "/metrics/cadvisor", "/metrics/probes", "/metrics/x",
                 "/stats/summary", "/stats/", "/logs/", "/logs/pods/", "/logs/pods", "/logs/../etc/passwd", "/logs/pods/{pod}/",
                 "/logs/pods/{pod}/c/", "/logs/pods/{pod}/c/0.log", "/logs/pods/{pod}/c/0.log/x", "/logs/pods/{pod}/../../x",
                 "/containerLogs/{ns}/{name}/c", "/containerLogs/{ns}/{name}/x", "/containerLogs/{ns}//c", "/containerLogs/{ns}/{name}",
                 "/exec/{ns}/{name}/c", "/exec/{ns}/{name}/{uid}/c", "/exec/{ns}/{name}/x", "/exec/{ns}/{name}",
                 "/attach/{ns}/{name}/c", "/portForward/{ns}/{name}", "/portForward/{ns}/{name}/{uid}", "/portForward/{ns}/x",
                 "/run/{ns}/{name}/c", "/run/{ns}/{name}/{uid}/c", "/flagz", "/statusz", "/debug/flags/v", "/debug/pprof/",
                 "/", "", "//pods", "/%2e%2e/pods", "/pods%00", "/exec/{ns}/{name}/c%2f..", "/x" * 3000, "/%C3%A9", "/%ff"]
KUBELET_QUERIES = ["", "command=echo&command=hi&stdout=1", "stdin=1&stdout=1&stderr=1&tty=1&command=sh", "stdout=true",
                   "command=", "tailLines=-1", "tailLines=x", "limitBytes=0", "sinceSeconds=-5", "sinceTime=x",
                   "follow=true&timestamps=true", "follow=x", "previous=true", "cmd=echo%20hi", "cmd=false", "cmd=",
                   "ports=80", "ports=x", "timeout=1s", "x=" + "y" * 9000, "%zz", "stdout=1&command=" + "a" * 5000]


def _join(p: Probe, d: Path, token: str, node: str) -> tuple[subprocess.Popen, int, Path]:
    """`nanokube kubelet --bootstrap-kubeconfig` (a bootstrap token's) joining p's server as `node` on a
    free local port: its process, its port and its log."""
    import socket

    import yaml

    cfg = yaml.safe_load(open(p.kubeconfig))["clusters"][0]["cluster"]
    (d / "bootstrap.conf").write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "b",
        "clusters": [{"name": "c", "cluster": {"server": cfg["server"],
                                               "certificate-authority-data": cfg["certificate-authority-data"]}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "b", "context": {"cluster": "c", "user": "u"}}]}))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = d / "kubelet.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "nanokube.cli", "kubelet", "--bootstrap-kubeconfig",
                                 str(d / "bootstrap.conf"), "--kubeconfig", str(d / "kubelet.conf"), "--node-name", node,
                                 "--bind-address", "127.0.0.1", "--secure-port", str(port), "--hostname-override",
                                 "127.0.0.1", "--read-only-port", "0", "--healthz-port", "0"], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return proc, port, log


def _node_request(p: Probe, as_node: Raw, rng: random.Random, node: str, n: int) -> None:
    """One request by a node's own credentials (system:node:<node>): its Node, Lease, CSRs (serving
    ones of drawn shape), pods and what they use, another node's objects (which the Node authorizer
    and NodeRestriction refuse: a 2xx for a write to another node's is broken)."""
    other = rng.choice(["node-0", "node-1", "nope"])
    method, path, body, ctype = rng.choice([
        ("GET", f"/api/v1/nodes/{node}", None, None), ("GET", f"/api/v1/nodes/{other}", None, None),
        ("GET", "/api/v1/nodes", None, None), ("GET", f"/api/v1/nodes?fieldSelector=metadata.name%3D{node}", None, None),
        ("PATCH", f"/api/v1/nodes/{node}/status", {"status": {"conditions": [{"type": "Ready", "status": rng.choice(
            ["True", "x", ""])}], "capacity": {"cpu": rng.choice(["4", "-1", "x"])}}}, "application/strategic-merge-patch+json"),
        ("PATCH", f"/api/v1/nodes/{node}", {"metadata": {"labels": {rng.choice(
            ["node-role.kubernetes.io/control-plane", "node-restriction.kubernetes.io/x", "kubernetes.io/hostname",
             "example.com/x"]): "x"}}, "spec": rng.choice([{}, {"taints": []}, {"podCIDR": "10.9.0.0/24"}])},
         "application/merge-patch+json"),
        ("PATCH", f"/api/v1/nodes/{other}", {"metadata": {"labels": {"x": "y"}}}, "application/merge-patch+json"),
        ("DELETE", f"/api/v1/nodes/{other}", None, None),
        ("GET", f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{rng.choice([node, other])}", None, None),
        ("PUT", f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{other}",
         {"metadata": {"name": other}, "spec": {"holderIdentity": node}}, None),
        ("POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests", _csr(rng, n, node), None),
        ("GET", "/apis/certificates.k8s.io/v1/certificatesigningrequests", None, None),
        ("GET", f"/api/v1/pods?fieldSelector=spec.nodeName%3D{rng.choice([node, other, ''])}", None, None),
        ("GET", f"/api/v1/namespaces/{NS}/pods/on-joined", None, None),
        ("GET", f"/api/v1/namespaces/kube-system/secrets/{rng.choice(['x', 'bootstrap-token-fz62ab'])}", None, None),
        ("GET", f"/api/v1/namespaces/{NS}/configmaps/kube-root-ca.crt", None, None),
        ("POST", f"/api/v1/namespaces/{NS}/pods", {"metadata": {"name": f"mirror-{n}", "annotations": {
            "kubernetes.io/config.mirror": "x"}}, "spec": {"nodeName": rng.choice([node, other]), "containers": [
                {"name": "c", "image": "busybox"}]}}, None),
        ("POST", f"/api/v1/namespaces/{NS}/serviceaccounts/default/token", {"spec": {"audiences": [rng.choice(
            ["api", "x"])], "boundObjectRef": {"kind": "Pod", "name": "on-joined", "apiVersion": "v1"}}}, None),
        ("POST", f"/api/v1/namespaces/{NS}/pods/on-joined/eviction", {"metadata": {"name": "on-joined"}}, None),
        ("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {"spec": {"resourceAttributes": {
            "verb": "update", "resource": "nodes", "name": other}}}, None)])
    raw, p.raw = p.raw, as_node
    try:
        code = p.send(method, path, body, ctype=ctype or "application/json")[0]
    finally:
        p.raw = raw
    if 200 <= code < 300 and method in ("PATCH", "PUT", "DELETE") and other in path:
        p.report(method, path, body, f"{code}: node {node} wrote another node's object")


def family_kubelet(p: Probe, rng: random.Random, until: float) -> None:
    """A kubelet joined by a bootstrap token (`nanokube kubelet --bootstrap-kubeconfig`) running a pod, its
    HTTPS port hit with drawn paths (its /pods, /logs, /exec, /portForward, /run, /metrics, /configz,
    /healthz, traversals, encodings), queries, methods, upgrade headers and credentials (none, the admin's
    client certificate, one no CA of its signed, the node's bootstrap token, a ServiceAccount's token with
    and without system:kubelet-api-admin, garbage), and the same paths through the API server's
    nodes/proxy. 5xx allowed: the kubelet's `Upgrade request required` and /run's failed command."""
    import base64
    import ssl

    from nanokube.pki.ca import issue, new_ca

    d = Path(tempfile.mkdtemp(prefix="fz62-kubelet-"))
    tid, secret, node = "fz62ab", "".join(rng.choice("abcdefghij0123456789") for _ in range(16)), "fz62-joined"
    p.send("POST", "/api/v1/namespaces/kube-system/secrets", {
        "metadata": {"name": f"bootstrap-token-{tid}"}, "type": "bootstrap.kubernetes.io/token",
        "stringData": {"token-id": tid, "token-secret": secret, "usage-bootstrap-authentication": "true",
                       "auth-extra-groups": "system:bootstrappers:kubeadm:default-node-token"}})
    proc, port, log = _join(p, d, f"{tid}.{secret}", node)
    kubelet = Raw(p.kubeconfig, timeout=p.args.slow + 30)
    kubelet.host, kubelet.port = "127.0.0.1", port
    kubelet.ctx.check_hostname, kubelet.ctx.verify_mode = False, ssl.CERT_NONE  # (its certificate is self-signed)
    admin = kubelet.ctx
    anonymous = ssl.create_default_context()
    anonymous.check_hostname, anonymous.verify_mode = False, ssl.CERT_NONE
    stranger = ssl.create_default_context()  # a client certificate of a CA nobody trusts, for system:masters
    stranger.check_hostname, stranger.verify_mode = False, ssl.CERT_NONE
    pair = issue(new_ca("fz62-stranger"), "admin", organizations=("system:masters",))
    (d / "s.crt").write_bytes(pair.cert_pem)
    (d / "s.key").write_bytes(pair.key_pem)
    stranger.load_cert_chain(d / "s.crt", d / "s.key")
    pod = {"metadata": {"name": "on-joined"}, "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                                                       "tolerations": [{"operator": "Exists"}],
                                                       "containers": [{"name": "c", "image": "busybox", "command": [
                                                           "sh", "-c", "echo hi; sleep 3600"]}]}}
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and p.raw.request("GET", f"/api/v1/nodes/{node}")[0] != 200:
            time.sleep(0.5)
        p.send("POST", f"/api/v1/namespaces/{NS}/pods", pod)
        uid = ""
        while time.monotonic() < deadline:
            code, _, got = p.raw.request("GET", f"/api/v1/namespaces/{NS}/pods/on-joined")
            if code == 200 and got.get("status", {}).get("phase") == "Running":
                uid = got["metadata"]["uid"]
                break
            time.sleep(0.5)
        if not uid:
            p.report("GET", "pods/on-joined", None, f"the joined node's pod not Running in 60 s: {log.read_text()[-2000:]}")
        p.send("POST", f"/api/v1/namespaces/{NS}/serviceaccounts", {"metadata": {"name": "fz62-viewer"}})
        p.send("POST", f"/api/v1/namespaces/{NS}/serviceaccounts", {"metadata": {"name": "fz62-kubelet-admin"}})
        p.send("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
            "metadata": {"name": "fz62-kubelet-admin"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                                    "kind": "ClusterRole", "name": "system:kubelet-api-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "fz62-kubelet-admin", "namespace": NS}]})
        tokens = {}
        for sa in ("fz62-viewer", "fz62-kubelet-admin"):
            got = p.send("POST", f"/api/v1/namespaces/{NS}/serviceaccounts/{sa}/token", {"spec": {}})[2]
            tokens[sa] = (got.get("status") or {}).get("token", "x") if isinstance(got, dict) else "x"
        pod_dir = f"{NS}_on-joined_{uid}"
        as_node = Raw(p.kubeconfig, timeout=p.args.slow + 30)
        as_node.ctx = ssl.create_default_context()
        as_node.ctx.check_hostname, as_node.ctx.verify_mode = False, ssl.CERT_NONE
        as_node.ctx.load_cert_chain(d / "pki" / "kubelet-client-current.pem")
        n = 0
        while time.monotonic() < until:
            n += 1
            path = rng.choice(KUBELET_PATHS).format(ns=rng.choice([NS, NS, "default", "..", "%2F"]),
                                                    name=rng.choice(["on-joined"] * 3 + ["nope", "on-joined%00"]),
                                                    uid=rng.choice([uid, uid, "x"]), pod=rng.choice([pod_dir, pod_dir, "x"]))
            query = "&".join(rng.sample(KUBELET_QUERIES, rng.choice([0, 1, 1, 2])))
            path += ("?" + query) if query else ""
            method = rng.choice(["GET"] * 6 + ["POST", "POST", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS", "BREW"])
            headers = {}
            if rng.random() < 0.3 and method != "HEAD":
                headers.update(rng.choice([
                    {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                     "Sec-WebSocket-Key": base64.b64encode(rng.randbytes(16)).decode(),
                     "Sec-WebSocket-Protocol": rng.choice(["v5.channel.k8s.io", "v4.channel.k8s.io", "portforward.k8s.io", "x", ""])},
                    {"Connection": "Upgrade", "Upgrade": "SPDY/3.1", "X-Stream-Protocol-Version": rng.choice(
                        ["v4.channel.k8s.io", "portforward.k8s.io", "x"])},
                    {"Connection": "Upgrade", "Upgrade": "x"}, {"Connection": "upgrade, keep-alive"},
                    {"Accept-Encoding": "gzip"}, {"Accept": rng.choice(["application/json", "x/y", "*/*;q=x"])},
                    {"Range": "bytes=5-2"}, {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"}]))
            body = rng.choice([None, None, b"", b"x" * rng.choice([1, 70_000]), b"{"]) if method != "BREW" else None
            who = rng.choice(["admin", "admin", "anonymous", "stranger", "bootstrap", "fz62-viewer", "fz62-kubelet-admin",
                              "garbage", "via-api", "node", "node"])
            if who == "via-api":  # the API server's nodes/proxy, with its own kubelet client certificate
                p.send(method, f"/api/v1/nodes/{node}/proxy{path}", body, ctype="text/plain", headers=headers)
                continue
            if who == "node":  # the joined node's own client certificate, at the API server
                _node_request(p, as_node, rng, node, n)
                continue
            kubelet.ctx = {"admin": admin, "stranger": stranger}.get(who, anonymous)
            kubelet.conn = None
            bearer = {"bootstrap": f"{tid}.{secret}", "garbage": rng.choice(["x", "a.b", "", "\u00e9", "Bearer x" * 900]),
                      **tokens}.get(who)
            if bearer is not None:
                headers["Authorization"] = "Bearer " + bearer
            if who == "stranger":  # (its handshake is refused, or it is no one: never an answer for system:masters)
                p.requests += 1
                try:
                    code = kubelet.request(method, path, body, ctype="text/plain", headers=headers)[0]
                except (OSError, http.client.HTTPException):
                    code = 0
                if 200 <= code < 300 and not path.startswith("/healthz"):
                    p.report(method, path, body, f"{code} for a client certificate no CA it trusts signed")
                continue
            raw, p.raw = p.raw, kubelet
            try:
                p.send(method, path, body, ctype="text/plain", headers=headers)
            except Exception as e:  # http.client refuses what it cannot send: nothing reached the kubelet
                print(f"(not sent: {e!r:.100})")
            finally:
                p.raw = raw
            if n % 50 == 0 and proc.poll() is not None:
                p.report("-", "kubelet", None, f"the kubelet exited {proc.returncode}: {log.read_text()[-2000:]}")
                break
    finally:
        proc.terminate()
        try:
            if proc.wait(timeout=30) != 0:
                p.report("-", "kubelet", None, f"the kubelet exited {proc.returncode} on SIGTERM")
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            p.report("-", "kubelet", None, "the kubelet did not stop in 30 s of SIGTERM")
        for tb in tracebacks(log.read_text(errors="replace")):
            print(f"BROKEN kubelet: a traceback in the kubelet's log:\n{tb}", flush=True)
            p.broken += 1
        p.send("DELETE", f"/api/v1/namespaces/{NS}/pods/on-joined?gracePeriodSeconds=0")
        p.send("DELETE", f"/api/v1/nodes/{node}")
        p.send("DELETE", f"/api/v1/namespaces/kube-system/secrets/bootstrap-token-{tid}")
        p.send("DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/fz62-kubelet-admin")
        shutil.rmtree(d, ignore_errors=True)


def _encryption_config(rng: random.Random, keys: list[tuple[str, str]]) -> str:
    """An EncryptionConfiguration over secrets and configmaps: the keys' providers in a drawn order
    (identity somewhere), or a broken file."""
    head = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n"
    providers = [f"  - {kind}: {{keys: [{{name: {name}, secret: {secret}}}]}}\n" for name, secret in keys
                 for kind in (rng.choice(["aescbc", "aesgcm", "secretbox"]),)]
    providers.insert(rng.randrange(len(providers) + 1), "  - identity: {}\n")
    good = head + f"resources:\n- resources: [{rng.choice(['secrets', 'secrets, configmaps', '*.', '*.*'])}]\n  providers:\n" + \
        "".join(providers)
    if rng.random() < 0.6:
        return good
    return rng.choice([
        "", head, good[: rng.randrange(len(good))], head + "resources: 5\n", head + "resources: [5]\n",
        good.replace("keys: [", "keys: [5, "), good.replace("secret: ", "secret: x"), head + "x: " + "[" * 2000 + "]" * 2000,
        good + "#" + "x" * 2_000_000 + "\n", good.replace("identity: {}", "identity: 5"), good + "\xff",
        good.replace("resources: [", "resources: [secrets, "), head + "resources:\n- resources: [secrets]\n  providers: x\n",
        good.replace("  - identity: {}\n", "  - kms: {apiVersion: v2, name: k, endpoint: 'unix:///nonexistent.sock', cachesize: x}\n"),
        good.replace("  - identity: {}\n", "  - kms: {apiVersion: v2, name: k, endpoint: 'unix:///nonexistent.sock'}\n")])


def family_encryption(args, rng: random.Random, until: float, totals: dict) -> None:
    """`up` with --encryption-provider-config and its automatic reload: Secrets and ConfigMaps written,
    read, listed and watched while the file is rewritten (keys rotated, providers reordered, identity
    first or last, broken, nested, huge, a KMS plugin that is not there, removed); at the end a file
    holding every key ever written must read every object back."""
    import base64

    d = Path(tempfile.mkdtemp(prefix="fz61-enc-"))
    keys = [("k0", base64.b64encode(bytes(rng.randrange(256) for _ in range(32))).decode())]
    path = d / "enc.yaml"
    path.write_text(_encryption_config(random.Random(0), keys).replace("  - identity: {}\n", "") + "  - identity: {}\n")
    totals["starts"] = totals.get("starts", 0) + 1
    server = start_cluster(d / "up", args.store, ("--encryption-provider-config", str(path),
                                                  "--encryption-provider-config-automatic-reload"))
    p = Probe(server.kubeconfig, args, "encryption")
    try:
        p.send("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
        n = 0
        while time.monotonic() < until:
            n += 1
            if n % 25 == 0:
                if rng.random() < 0.3:
                    keys.append((f"k{len(keys)}", base64.b64encode(bytes(rng.randrange(256) for _ in range(32))).decode()))
                if rng.random() < 0.05:
                    path.unlink(missing_ok=True)
                else:
                    text = _encryption_config(rng, rng.sample(keys, rng.randint(1, len(keys))))
                    path.write_bytes(text.encode("utf-8", "surrogateescape") if "\xff" not in text
                                     else text.replace("\xff", "").encode() + b"\xff")
            plural = rng.choice(["secrets", "configmaps"])
            name = f"e{rng.randrange(40)}"
            r = rng.random()
            if r < 0.4:
                body = {"metadata": {"name": name}, ("data" if plural == "secrets" else "binaryData"): {
                    "a": base64.b64encode(rng.randbytes(rng.choice([0, 1, 100, 70_000]))).decode()}}
                code, _, _ = p.send("POST", f"/api/v1/namespaces/{NS}/{plural}", body)
                if code == 409:
                    p.send("PUT", f"/api/v1/namespaces/{NS}/{plural}/{name}", body)
            elif r < 0.7:
                p.send("GET", f"/api/v1/namespaces/{NS}/{plural}/{name}")
            elif r < 0.8:
                p.send("GET", f"/api/v1/namespaces/{NS}/{plural}?limit=5")
            elif r < 0.9:
                p.send("PATCH", f"/api/v1/namespaces/{NS}/{plural}/{name}", {"metadata": {"labels": {"n": str(n)}}},
                       ctype="application/merge-patch+json")
            else:
                _watch(p, f"/api/v1/namespaces/{NS}/{plural}?watch=1&timeoutSeconds=1&resourceVersion=0", 0.3)
        path.write_text("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n"
                        "- resources: ['*.*']\n  providers:\n" + "".join(
                            f"  - {kind}: {{keys: [{{name: {k}, secret: {s}}}]}}\n" for k, s in keys
                            for kind in ("aescbc", "aesgcm", "secretbox")) + "  - identity: {}\n")
        time.sleep(3)
        for plural in ("secrets", "configmaps"):  # (every object readable with every key back)
            code, _, answer = p.send("GET", f"/api/v1/namespaces/{NS}/{plural}")
            if code != 200:
                p.report("GET", plural, None, f"with every key back: {code} {str(answer)[:300]}")
        metrics = p.raw.request("GET", "/metrics", ctype=None, headers={"Accept": "text/plain"})[2]
        print("encryption:", *re.findall(rb"apiserver_encryption_config_controller_automatic_reloads_total\{.*", metrics))
    finally:
        server.stop()
        _tally("encryption", server, p, totals)
        shutil.rmtree(d, ignore_errors=True)


def _traceparent(rng: random.Random) -> str:
    """A W3C traceparent of a drawn shape: mostly well formed, else a bad version, length, id or flags."""
    version = rng.choice(["00"] * 6 + ["01", "ff", "0", "zz", "FF", ""])
    trace = rng.choice(["%032x" % rng.getrandbits(128)] * 5 + ["0" * 32, "A" * 32, "a" * 31, "a" * 33, "g" * 32, ""])
    span = rng.choice(["%016x" % rng.getrandbits(64)] * 5 + ["0" * 16, "b" * 15, "B" * 16, "x" * 16])
    flags = rng.choice(["01", "00", "01", "ff", "02", "1", "zz", "011"])
    text = "-".join([version, trace, span, flags])
    return rng.choice([text] * 6 + [text + "-extra", text + "-", text.replace("-", "_"), text + "," + text, " " + text,
                                    "x" * 10_000, "-" * 55, text[:-1], "00-" + "a" * 32 + "-" + "b" * 16 + "-01\t"])


def family_tracing(args, rng: random.Random, until: float, totals: dict) -> None:
    """`up` with --tracing-config-file (every request sampled, spans exported to a port nobody serves):
    requests, writes and watches carrying drawn traceparent, tracestate and baggage headers, by the admin
    (whose context is the span's parent) and by a ServiceAccount (whose is only a link); PUT /debug/flags/v
    with drawn bodies, /flagz and /statusz asked for in each form and odd ones. At the end -v is put back
    and the server must still answer."""
    d = Path(tempfile.mkdtemp(prefix="fz62-tracing-"))
    (d / "tracing.yaml").write_text("apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\n"
                                    "endpoint: 127.0.0.1:9\nsamplingRatePerMillion: 1000000\n")
    totals["starts"] = totals.get("starts", 0) + 1
    server = start_cluster(d / "up", args.store, ("--tracing-config-file", str(d / "tracing.yaml")))
    p = Probe(server.kubeconfig, args, "tracing")
    bearer = _bearer(p)
    try:
        p.send("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
        p.send("POST", f"/api/v1/namespaces/{NS}/serviceaccounts", {"metadata": {"name": "tracer"}})
        got = p.send("POST", f"/api/v1/namespaces/{NS}/serviceaccounts/tracer/token", {"spec": {}})[2]
        token = (got.get("status") or {}).get("token", "x") if isinstance(got, dict) else "x"
        n = 0
        while time.monotonic() < until:
            n += 1
            headers = {"traceparent": _traceparent(rng)}
            if rng.random() < 0.4:
                headers["tracestate"] = rng.choice(["a=b", "a=b," * 40, "=", "x" * 600, "k@v=1", "a=b,a=c", ""])
            if rng.random() < 0.3:
                headers["baggage"] = rng.choice(["k=v", "k=v;p=1", "k=v," * 300, "=v", "k=%zz", "\u00e9=1"])
            if rng.random() < 0.1:
                headers["traceparent"] = [headers["traceparent"], _traceparent(rng)]  # (sent twice)
            r = rng.random()
            if r < 0.5:
                method, path, body = rng.choice([
                    ("GET", f"/api/v1/namespaces/{NS}/configmaps?limit=2", None), ("GET", "/api/v1/nodes", None),
                    ("POST", f"/api/v1/namespaces/{NS}/configmaps", {"metadata": {"generateName": "t"}, "data": {"a": "b"}}),
                    ("GET", "/healthz", None), ("GET", "/version", None), ("GET", "/openapi/v2", None),
                    ("DELETE", f"/api/v1/namespaces/{NS}/configmaps?limit=5", None),
                    ("PATCH", f"/api/v1/namespaces/{NS}/serviceaccounts/tracer", {"metadata": {"labels": {"n": str(n)}}})])
            elif r < 0.65:
                method, path, body = "GET", f"/api/v1/namespaces/{NS}/configmaps?watch=1&timeoutSeconds=1", None
            elif r < 0.85:
                method, path, body = "PUT", "/debug/flags/v", rng.choice([
                    "0", "2", "4", "-1", "+3", "", " ", "3\n", "x", "1e3", "0x10", "9" * 12, "0" * 5000 + "1", "9" * 5000,
                    "\u0663", "2147483647", "-2147483648", "2147483648"]).encode()
            else:
                method, path, body = rng.choice(["GET", "GET", "POST", "HEAD"]), rng.choice(
                    ["/flagz", "/statusz", "/debug/flags", "/debug/flags/", "/debug/flags/x", "/debug/flags/v/x"]), None
                headers["Accept"] = rng.choice([
                    "text/plain", "application/json", "application/json;as=Flagz;v=v1alpha1;g=config.k8s.io",
                    "application/json;as=Statusz;v=v1alpha1;g=config.k8s.io", "application/json;as=Flagz;v=v1;g=config.k8s.io",
                    "*/*", "x/y", "application/json;as=" + "x" * 5000, "text/plain;q=x", ""])
            multi = headers.pop("traceparent") if isinstance(headers.get("traceparent"), list) else None
            if multi:
                headers["traceparent"] = multi[0]  # (http.client sends a header once: the other as Traceparent)
                headers["Traceparent"] = multi[1]
            try:
                if path.endswith("timeoutSeconds=1"):
                    _watch(p, path, 0.3)
                elif rng.random() < 0.3 and not path.startswith(("/debug", "/flagz", "/statusz")):
                    _send_as(p, bearer, method, path, body, token)
                else:
                    p.send(method, path, body, ctype="text/plain" if path == "/debug/flags/v" else "application/json",
                           headers=headers)
            except Exception as e:  # http.client refuses what it cannot send: nothing reached the server
                print(f"(not sent: {e!r:.100})")
        p.send("PUT", "/debug/flags/v", b"0", ctype="text/plain", expect=200)
        p.send("GET", f"/api/v1/namespaces/{NS}/configmaps?limit=1", expect=200)
    finally:
        server.stop()
        _tally("tracing", server, p, totals)
        shutil.rmtree(d, ignore_errors=True)


#: a good file of each kind `up` takes, by its flag (the webhook kubeconfig names a server nobody serves)
CONFIGS = {
    "--tracing-config-file": {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "TracingConfiguration",
                              "endpoint": "127.0.0.1:9", "samplingRatePerMillion": 1000},
    "--authentication-config": {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AuthenticationConfiguration",
                                "anonymous": {"enabled": True, "conditions": [{"path": "/livez"}, {"path": "/readyz"}]}},
    "--authorization-config": {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AuthorizationConfiguration",
                               "authorizers": [{"type": "Node", "name": "node"}, {"type": "RBAC", "name": "rbac"}]},
    "--encryption-provider-config": {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
                                     "resources": [{"resources": ["secrets", "configmaps"], "providers": [
                                         {"aescbc": {"keys": [{"name": "k1", "secret": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}]}},
                                         {"secretbox": {"keys": [{"name": "k2", "secret": "YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY="}]}},
                                         {"identity": {}}]}]},
    "--audit-policy-file": {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
                            "rules": [{"level": "None", "resources": [{"group": "", "resources": ["events"]}]},
                                      {"level": "RequestResponse", "verbs": ["create"], "namespaces": ["default"]},
                                      {"level": "Metadata"}]},
    "--admission-control-config-file": {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
                                        "plugins": [{"name": "PodSecurity", "configuration": {
                                            "apiVersion": "pod-security.admission.config.k8s.io/v1",
                                            "kind": "PodSecurityConfiguration", "defaults": {"enforce": "baseline"},
                                            "exemptions": {"namespaces": ["kube-system"]}}},
                                            {"name": "ResourceQuota", "configuration": {
                                                "apiVersion": "apiserver.config.k8s.io/v1", "kind": "ResourceQuotaConfiguration",
                                                "limitedResources": [{"resource": "pods", "matchContains": ["nvidia.com/gpu"]}]}}]},
    "--scheduler-config": {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                           "profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [
                               {"name": "NodeResourcesFit", "args": {"scoringStrategy": {
                                   "type": "MostAllocated", "resources": [{"name": "cpu", "weight": 1}]}}}]}]},
    "--audit-webhook-config-file": {"apiVersion": "v1", "kind": "Config", "current-context": "c",
                                    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
                                    "contexts": [{"name": "c", "context": {"cluster": "c"}}]},
}
#: kube-proxy's (`nanokube proxy --config`, with --write-config-to: it decodes, defaults and writes, then exits)
PROXY_CONFIG = {"apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration", "mode": "nftables",
                "clientConnection": {"kubeconfig": "/x", "qps": 5, "burst": 10},
                "nftables": {"syncPeriod": "30s", "minSyncPeriod": "1s", "masqueradeBit": 14},
                "conntrack": {"maxPerCore": 32768, "min": 131072, "tcpEstablishedTimeout": "24h"},
                "nodePortAddresses": ["127.0.0.0/8"], "healthzBindAddress": "0.0.0.0:10256", "clusterCIDR": "10.244.0.0/16",
                "detectLocalMode": "ClusterCIDR", "detectLocal": {"bridgeInterface": "cbr0"}, "oomScoreAdj": -999}
ODD_VALUES = [None, "", "x", -1, 0, 1, 2**63, 10**30, 1.5, True, [], {}, [None], {"a": 1}, "\u00e9" * 300, "1e999",
              "-1s", "0s", "999999h", "a" * 70_000, "::", "unix:///nonexistent.sock", "../../x", "*"]


def _config_text(rng: random.Random, good: dict) -> str:
    """A file of `good`'s kind: good, a value at a drawn path replaced or gone, an unknown field, or text
    of odd form (cut, repeated keys, aliases, deep, huge numbers, tags, other encodings)."""
    import json as js

    import yaml

    doc = copy.deepcopy(good)
    r = rng.random()
    if r < 0.55:
        for _ in range(rng.choice([1, 1, 2, 3])):
            paths = [p for p in _paths(doc) if p]
            if not paths:
                break
            path = rng.choice(paths)
            what = rng.random()
            parent = doc
            for k in path[:-1]:
                parent = parent[k]
            if what < 0.15 and isinstance(parent, dict):
                del parent[path[-1]]
            elif what < 0.25 and isinstance(parent, dict):
                parent[rng.choice(["x", "Endpoint", "kind ", "apiVersion"]) + rng.choice(["", "2"])] = \
                    copy.deepcopy(rng.choice(ODD_VALUES))
            else:
                parent[path[-1]] = copy.deepcopy(rng.choice(ODD_VALUES))
    text = js.dumps(doc) if rng.random() < 0.2 else yaml.safe_dump(doc, sort_keys=False, width=10**6)
    if r >= 0.55 and r < 0.95:
        first = text.splitlines()[0] if text.strip() else "a: 1"
        text = rng.choice([
            "", "\n", "---\n", "- 1\n", "null\n", "5\n", text[: rng.randrange(max(len(text), 1))], text + first + "\n",
            text + "---\n" + text, "\ufeff" + text, text.replace("\n", "\r\n"), text.replace("  ", "\t", 1),
            text + "x: !!python/object:os.system {}\n", text + "x: !!binary aGVsbG8=\n", text + "x: 2026-01-01\n",
            text + "x: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
                f"y{i}: &b{i} [" + ", ".join([f"*{'a' if i == 0 else f'b{i - 1}'}"] * 9) + "]\n" for i in range(9)),
            text + "x: " + "[" * 3000 + "]" * 3000 + "\n", text + "x: " + "{a: " * 200 + "1" + "}" * 200 + "\n",
            text + "x: 1" + "0" * 5000 + "\n", text + "x: 1e99999\n", text + "x: .nan\n", text + "<<: {kind: Policy}\n",
            text + "\x00\n", text.encode("utf-16").decode("latin-1"), text + "x: \"\\ud800\"\n", "{" + text,
            "kind: " + good["kind"] + "\n", text.replace("apiVersion:", "apiversion:", 1)])
    return text


def family_configs(p: Probe, rng: random.Random, until: float) -> None:
    """`up` started with a drawn file of each kind it reads (--tracing-config-file, --authentication-config,
    --authorization-config, --encryption-provider-config, --audit-policy-file (with --audit-log-path),
    --admission-control-config-file, --scheduler-config, --audit-webhook-config-file), sometimes with odd
    --vmodule, -v or --logging-format values, and `nanokube scheduler --config` against p's server: each must
    start, or stop within 60 s with its error and no traceback; a started `up` is asked /readyz, a list and a
    create (no 5xx) and stopped with SIGTERM (exit 0, no traceback in its log)."""
    import select
    import signal

    scheduler_good = copy.deepcopy(CONFIGS["--scheduler-config"])
    scheduler_good["clientConnection"] = {"kubeconfig": p.kubeconfig}
    starts, outcomes = 0, {}
    while time.monotonic() < until:
        starts += 1
        d = Path(tempfile.mkdtemp(prefix="fz62-cfg-"))
        try:
            flag = rng.choice([*CONFIGS, "scheduler --config", "proxy --config"])
            text = _config_text(rng, {"scheduler --config": scheduler_good, "proxy --config": PROXY_CONFIG}.get(flag)
                                or CONFIGS[flag])
            (d / "cfg").write_bytes(text.encode("utf-8", "surrogatepass"))
            extra = []
            if rng.random() < 0.15:
                extra = rng.choice([["--vmodule", rng.choice(["a=1", "a=-1", "=1", "a=x", "a=1,,", "a=99999999999", "*=3"])],
                                    ["-v", rng.choice(["3", "-1", "x", "99999999999", " 2"])],
                                    ["--logging-format", rng.choice(["json", "text", "JSON", "", "xml"])]])
            if flag == "scheduler --config":
                argv = ["scheduler", "--config", str(d / "cfg"), "--kubeconfig", p.kubeconfig, "--secure-port", "0"]
            elif flag == "proxy --config":
                argv = ["proxy", "--config", str(d / "cfg"), "--write-config-to", str(d / "out.yaml")]
            else:
                argv = ["up", "--data-dir", str(d / "up"), "--port", "0", flag, str(d / "cfg"), "--scheduler", "none"]
                if flag == "--audit-policy-file":
                    argv += ["--audit-log-path", str(d / "audit.log")]
                if flag == "--audit-webhook-config-file":
                    argv += ["--audit-policy-file", str(d / "policy"), "--audit-webhook-batch-max-wait", "1s"]
                    (d / "policy").write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n")
            with open(d / "log", "wb") as log:
                proc = subprocess.Popen([sys.executable, "-m", "nanokube.cli", *argv, *extra], stdout=subprocess.PIPE,
                                        stderr=log, stdin=subprocess.DEVNULL)
            p.requests += 1
            announced, deadline = b"", time.monotonic() + 60
            try:
                while time.monotonic() < deadline and proc.poll() is None and b"export KUBECONFIG=" not in announced \
                            and not (flag == "scheduler --config" and time.monotonic() > deadline - 55):
                    if select.select([proc.stdout], [], [], 0.2)[0]:
                        announced += proc.stdout.read1(65536)
                if proc.poll() is None:  # started: `up` is asked a few things, then stopped
                    if b"export KUBECONFIG=" in announced:
                        probe = Probe(str(d / "up" / "kubeconfig"), p.args, "configs")
                        probe.send("GET", "/readyz", ctype=None)
                        probe.send("GET", "/api/v1/namespaces/default/configmaps?limit=2")
                        probe.send("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"generateName": "c"}})
                        p.requests += probe.requests
                        p.broken += probe.broken
                    proc.send_signal(signal.SIGTERM)
                    code = proc.wait(timeout=30)
                    if code not in (0, -signal.SIGTERM):
                        p.report(flag, " ".join(extra), text[:2000], f"started, then exited {code} on SIGTERM")
                    outcome = "started"
                else:
                    outcome = f"exited {proc.returncode}"
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                p.report(flag, " ".join(extra), text[:2000], "did not stop in 30 s of SIGTERM")
                continue
            if proc.poll() is None:
                proc.kill()
                proc.wait()
                p.report(flag, " ".join(extra), text[:2000], "neither started nor stopped in 60 s")
                continue
            log_text = (d / "log").read_text(errors="replace")
            lines = [ln for ln in log_text.splitlines() if ln.strip()]
            if any(": error: argument " in ln for ln in lines[-2:]):  # (argparse's usage, then its error)
                lines = lines[-1:]
            if "Traceback" in log_text or (outcome != "started" and len(lines) > 4):
                p.report(flag, " ".join(extra), text[:2000], f"{outcome} with {len(lines)} lines:\n{log_text[-1500:]}")
            elif outcome != "started" and rng.random() < 0.2:
                print(f"configs: {flag} {' '.join(extra)}: {outcome}: {lines[-1][:200] if lines else ''}")
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        finally:
            shutil.rmtree(d, ignore_errors=True)
    print(f"configs: {starts} starts: {outcomes}")


FAMILIES = {"shaped": family_shaped, "status": family_status, "psa": family_psa, "policies": family_policies, "crds": family_crds,
            "dra": family_dra, "workloads": family_workloads, "ui": family_ui, "metrics": family_metrics,
            "quota": family_quota, "eviction": family_eviction, "storage": family_storage, "bootstrap": family_bootstrap,
            "watch": family_watch, "kubelet": family_kubelet,
            "configs": family_configs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("families", nargs="*", default=[*FAMILIES, "restart", "gates", "auth", "encryption", "tracing"])
    ap.add_argument("--seed", type=int, default=60)
    ap.add_argument("--minutes", type=float, default=1.0, help="per family")
    ap.add_argument("--slow", type=float, default=5.0, help="an answer slower than this is broken")
    ap.add_argument("--store", default="sqlite")
    ap.add_argument("--out", default="fuzz-surfaces.jsonl")
    ap.add_argument("--show", default="", help="codes (comma-separated) whose first answer of each shape is printed")
    args = ap.parse_args()
    args.show = {int(c) for c in args.show.split(",") if c}
    totals: dict = {}
    plain = [f for f in args.families if f not in ("gates", "restart", "auth", "encryption", "tracing")]
    if plain:
        d = Path(tempfile.mkdtemp(prefix="fz60-"))
        server = start_cluster(d, args.store)
        print(f"nanokube up (pid {server.proc.pid}) at {server.url}, data and log in {d}", flush=True)
        try:
            for family in plain:
                rng = random.Random(f"{args.seed}/{family}")
                p = Probe(server.kubeconfig, args, family)
                p.send("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
                t0 = time.monotonic()
                FAMILIES[family](p, rng, t0 + args.minutes * 60)
                print(f"{family}: {p.requests} requests in {time.monotonic() - t0:.0f} s, {p.broken} broken, codes "
                      f"{dict(sorted(p.codes.items()))}, slowest {p.slowest[0]:.2f} s ({p.slowest[1][:100]})", flush=True)
                totals["requests"] = totals.get("requests", 0) + p.requests
                totals["broken"] = totals.get("broken", 0) + p.broken
        finally:
            server.stop()
            log = server.log_path.read_text(errors="replace")
            for tb in tracebacks(log):
                print(f"BROKEN: a traceback in up's log:\n{tb}", flush=True)
                totals["broken"] = totals.get("broken", 0) + 1
            shutil.rmtree(d, ignore_errors=True)
    if "restart" in args.families:
        family_restart(args, random.Random(f"{args.seed}/restart"), time.monotonic() + args.minutes * 60, totals)
    if "auth" in args.families:
        family_auth(args, random.Random(f"{args.seed}/auth"), time.monotonic() + args.minutes * 60, totals)
    if "tracing" in args.families:
        family_tracing(args, random.Random(f"{args.seed}/tracing"), time.monotonic() + args.minutes * 60, totals)
    if "encryption" in args.families:
        family_encryption(args, random.Random(f"{args.seed}/encryption"), time.monotonic() + args.minutes * 60, totals)
    if "gates" in args.families:
        family_gates(args, random.Random(f"{args.seed}/gates"), time.monotonic() + args.minutes * 60, totals)
    print(f"total: {totals}")
    return 1 if totals.get("broken") else 0


if __name__ == "__main__":
    sys.exit(main())
