"""A seeded, bounded run of scripts/fuzz_sweep.py's sweeps against an in-process server: no answer
is a 5xx or missing, and no request held the server's event loop for long, as the server's own
instrumentation (loophold.py) measured it. The bound is generous, meant to catch a hang or a
super-linear path (a wide list's quadratic validation held the loop for minutes), not to time
anything."""

from __future__ import annotations

import asyncio
import importlib.util
import random
from pathlib import Path

from tests.served import served

#: the kinds swept: core ones with wide lists, a workload template, a custom resource with list-map fields
KINDS = ["configmaps", "pods", "services", "deployments", "endpointslices", "widgets"]
#: the longest any request may hold the loop (seconds): far past any honest request, caught only by a hang
HOLD_BOUND = 5.0


def _sweep_module():
    path = Path(__file__).resolve().parents[2] / "scripts" / "fuzz_sweep.py"
    spec = importlib.util.spec_from_file_location("fuzz_sweep", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def _swept(tmp_path, kinds: list[str], run, seed: int | None = None, **options):
    """`run(sweep)` (the families swept) in a worker thread against an in-process server, every answer
    judged: the Sweep (its request count) and the server (its loop holds), once no answer broke."""
    fuzz_sweep = _sweep_module()
    async with served(tmp_path) as (server, _):
        def sweep():
            if seed is not None:
                random.seed(seed)
            s = fuzz_sweep.Sweep(str(tmp_path / "kubeconfig"), slow=float("inf"), out=str(tmp_path / "broken.jsonl"),
                                 kinds=kinds, **options)
            run(s)
            return s
        s = await asyncio.to_thread(sweep)
    broken = (tmp_path / "broken.jsonl").read_text() if s.broken else ""
    assert s.broken == 0, broken[:3000]
    return s, server


async def test_sweeps_get_no_5xx_and_hold_the_loop_briefly(tmp_path):
    def run(s):
        s.types()
        s.schema()
        s.lists(1000)
    s, server = await _swept(tmp_path, KINDS, run, seed=44, paths=8)
    assert s.requests > 300  # (the sweeps ran: every kind's paths, types and lists)
    holds = server.loop_holds
    assert holds.longest < HOLD_BOUND, f"{holds.longest_request} held the loop {holds.longest:.1f} s"


async def test_protobuf_sweep_gets_no_5xx(tmp_path):
    """Seeds sent as typed clients send them (protobuf), cut short or with a byte changed, are each refused
    with a 4xx: a changed byte in a CSR's public key raised from the signature check (a 500, found by the
    sweep's first run with seed 45)."""
    kinds = ["configmaps", "pods", "deployments", "certificatesigningrequests", "podcertificaterequests"]
    s, _ = await _swept(tmp_path, kinds, lambda s: s.protobuf(cuts=20), seed=45)
    assert s.requests > 300  # (every kind's served versions, 61 bodies each)


async def test_subresources_sweep_gets_no_5xx(tmp_path):
    """Every subresource of a pod, a workload, a service account, a CSR and a custom resource, with each
    method and odd bodies under each content type (dry runs): a TokenRequest echoing an unknown field that
    held a number past float64 was a 500 (found by the sweep's first run)."""
    kinds = ["pods", "deployments", "serviceaccounts", "certificatesigningrequests", "widgets"]
    s, server = await _swept(tmp_path, kinds, lambda s: s.subresources(), seed=46)
    assert s.requests > 3000  # (each kind's subresources: status, scale, log, exec, attach, ..., token, approval)
    assert server.loop_holds.longest < HOLD_BOUND, server.loop_holds.longest_request


async def test_crds_sweep_gets_no_5xx(tmp_path):
    """CRDs of odd schemas and custom resources of odd values through every verb, /status and /scale, and
    CRDs whose conversion webhook cannot be called: a conversion webhook's host of a 64-byte label was a 500
    of Python's IDNA error rather than the conversion's failure (found by the sweep's first run)."""
    s, server = await _swept(tmp_path, ["configmaps"], lambda s: s.crds())
    assert s.requests > 1000  # (ten CRDs served, twenty-two values each, five conversion webhooks)
    assert server.loop_holds.longest < HOLD_BOUND, server.loop_holds.longest_request


async def test_patches_sweep_gets_no_5xx(tmp_path):
    """Strategic merge patch directives and json patch pointers (escapes, "-", huge indexes) at each path,
    field selectors on each path, writes and deletes with odd fieldManager, fieldValidation, force and
    dryRun values, and names, labels and annotations at and past their limits: each refused with a 4xx or
    judged as upstream does (every kind's run found none: 12,090 requests, fuzz47)."""
    s, server = await _swept(tmp_path, ["configmaps", "widgets"], lambda s: s.patches(), seed=47, paths=3)
    assert s.requests > 200  # (each kind: its paths, the write options and the long metadata)
    assert server.loop_holds.longest < HOLD_BOUND, server.loop_holds.longest_request


async def test_webhooks_sweep_gets_no_5xx_but_upstreams(tmp_path):
    """Webhooks answering with values of the wrong type or a patch moving the kind, under failurePolicy
    Ignore: a list of audit annotations or a Status that was a string raised in the server, 500s that no
    policy ignored (found by hand probes, fuzz49), and a denial of code 1000 was written as the status line
    "HTTP/1.1 1000", which no client reads."""
    found = [{"response": {"auditAnnotations": ["k"]}}, {"response": {"allowed": False, "status": "no"}},
             {"response": {"patchType": "JSONPatch", "patch": [{"op": "replace", "path": "/kind", "value": "Secret"}]}},
             {"response": {"allowed": False, "status": {"code": 1000}}}]
    s, server = await _swept(tmp_path, ["configmaps"], lambda s: s.webhooks(found, policies=("Ignore",)))
    assert s.requests == len(found) * 2 * 4  # (each answer: a mutating and a validating webhook, four writes)
    assert server.loop_holds.longest < HOLD_BOUND, server.loop_holds.longest_request


async def test_upstream_sweep_answers_as_upstream(tmp_path):
    """Built-in kinds' invalid and boundary values get upstream 1.37's code, and odd encodings (YAML aliases,
    gzip, nested JSON, CBOR) theirs; fuzz50's finds among them: a CronJob timeZone naming a directory of zones
    (a 500), a scope selector's In on BestEffort, a PVC selector, an HPA's empty policies and a DRA selector
    past the cost limit (stored), a Job status's failedIndexes "," (a 500) and two lists of 3,000,000 indexes
    (a 2 s loop hold)."""
    fuzz_sweep = _sweep_module()
    # (a large list's YAML: test_handlers)
    s, server = await _swept(tmp_path, ["configmaps"], lambda s: s.upstream(wide=0))
    cases = sum(len(c[4]) + 1 for c in fuzz_sweep.UPSTREAM_CASES)
    statuses = sum(len(c[4]) for c in fuzz_sweep.UPSTREAM_STATUS)
    assert s.requests == cases + statuses + 13  # (the cases, the status writes and the bodies)
    assert server.loop_holds.longest < HOLD_BOUND, server.loop_holds.longest_request


async def test_auth_sweep_answers_as_upstream(tmp_path):
    """Malformed Authorization headers, impersonation headers, access reviews of odd shape, RBAC writes by a
    user who may only write RBAC objects, and odd watch-lists get upstream 1.37's codes; fuzz52's finds among
    them: `system:serviceaccount:a:b:c` impersonated a ServiceAccount, selectors of access reviews were never
    validated, a RoleBinding to cluster-admin by such a user was stored (no escalation check), and
    `Bearer  x` was a 401."""
    fuzz_sweep = _sweep_module()
    s, server = await _swept(tmp_path, ["configmaps"], lambda s: s.auth())
    assert s.requests == (len(fuzz_sweep.AUTH_HEADERS) * len(fuzz_sweep.AUTH_PATHS) + len(fuzz_sweep.IMPERSONATIONS)
                          + len(fuzz_sweep.ACCESS_REVIEWS) + len(fuzz_sweep.ESCALATIONS) + len(fuzz_sweep.WATCH_LISTS))
    assert server.loop_holds.longest < HOLD_BOUND, server.loop_holds.longest_request
