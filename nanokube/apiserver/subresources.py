"""Subresources that are verbs of their own: pods/binding, pods/eviction,
pods/log, serviceaccounts/token and the autoscaling/v1 Scale of workload
resources."""

from __future__ import annotations

import copy
import dataclasses
import random
from collections.abc import AsyncIterable, Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING

import orjson
import yaml
from aiohttp import web

from .. import schema
from ..registry.base import Resource
from ..registry.core_pods import validate_binding
from ..machinery import errors, gojson
from ..machinery.conditions import observed_generation, set_condition
from .admission import lookup
from .auth.restriction import node_token_request
from .auth.serviceaccount import ServiceAccountTokens
from ..machinery.responses import json_response
from . import structural
from . import options, serializer, warning
from .options import delete_options
from .patch import PatchError
from .patch import apply as ssa
from .patch import strict
from .patch import fieldpath as fp
from .rest import PATCH_ATTEMPTS, GenericREST, WriteOptions, _precondition_failed, check_target, decode_patched, \
    patch_out_of_range
from ..machinery.selectors import matches_labels, selector_from_object, selector_to_string
from ..store.interface import KeyNotFound, RevisionMismatch
from .cache import stored_json

if TYPE_CHECKING:
    from .handlers import APIHandlers

#: node agents register a reader of container logs: (namespace, pod, container, options) -> the
#: log, or a stream of chunks for `follow`; None when the pod is not theirs
#: kube-apiserver refuses evictions while this many are unconfirmed by the disruption controller
MAX_DISRUPTED_PODS = 2000
#: eviction.go's EvictionsRetry for the budget's update: 20 tries, ~0.5 s apart (10% jitter), so an
#: eviction outlasts a busy PDB controller's writes instead of a 409 after a few lost races
EVICTION_TRIES, EVICTION_PAUSE, EVICTION_JITTER = 20, 0.5, 0.1
#: the kinds admission sees for creates through pods/binding and pods/eviction
BINDING_KIND = {"group": "", "version": "v1", "kind": "Binding"}
EVICTION_KIND = {"group": "policy", "version": "v1", "kind": "Eviction"}
LogReader = Callable[[str, str, str, dict], Awaitable[bytes | AsyncIterable[bytes] | None]]


def pod_container(pod: dict, container: str) -> str:
    """The container a log, exec or attach request names, as upstream's validateContainer checks it:
    the only regular container when it names none, else one of all the pod's containers (init,
    regular, ephemeral: the order the message lists them in)."""
    spec, name = pod.get("spec") or {}, pod["metadata"]["name"]
    if not container:
        containers = spec.get("containers") or []
        if len(containers) == 1:
            return containers[0]["name"]
        if not containers:
            raise errors.bad_request(f"a container name must be specified for pod {name}")
        names = [c["name"] for k in ("initContainers", "containers", "ephemeralContainers") for c in spec.get(k) or ()]
        raise errors.bad_request(f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]")
    if not any(c.get("name") == container for k in ("initContainers", "containers", "ephemeralContainers")
               for c in spec.get(k) or ()):
        raise errors.bad_request(f"container {container} is not valid for pod {name}")
    return container


def _evicted() -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _same_namespace(body: dict, namespace: str) -> None:
    """The create handler's EnsureObjectNamespaceMatchesRequestNamespace, before a subresource's REST Create
    reads the object (a Binding, an Eviction, a TokenRequest): one naming another namespace is a 400."""
    theirs = (body.get("metadata") or {}).get("namespace")
    if theirs and theirs != namespace:
        raise errors.bad_request("the namespace of the provided object does not match the namespace sent on the request")


def _same_dry_run(body: list | None, opts: WriteOptions) -> None:
    """EvictionREST's propagateDryRun: an Eviction's deleteOptions.dryRun and the request's may
    not both be set and differ (the query's, cleaned, is ["All"] or nothing)."""
    if body and opts.dry_run and body != ["All"]:
        raise errors.internal(f"Non-matching dry-run options in request and content: [All] and [{' '.join(body)}]")


def _budget_processing(name: str) -> errors.APIError:
    """eviction.go's createTooManyRequestsError: a suggested 10 s wait (details and Retry-After) that
    keeps clients from hammering."""
    return errors.APIError(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.", {
        "causes": [{"reason": "DisruptionBudget", "message": f"The disruption budget {name} is still being processed by the server."}],
        "retryAfterSeconds": 10})


def _same_name(body: dict, name: str, kind: str) -> None:
    """BindingREST.Create's and EvictionREST.Create's first check, of the object mutating admission left
    (the create handler runs that chain before Create): its name is the URL's. In bind and evict, so
    every caller gets it, the in-process clients as HTTP's."""
    if (body.get("metadata") or {}).get("name") != name:
        raise errors.bad_request(f"name in URL does not match name in {kind} object")


async def _none(*_args) -> None:
    return None


class Subresources:
    def __init__(self, rest: GenericREST) -> None:
        self.rest = rest
        self.log_readers: list[LogReader] = []
        #: the reader asked when none of `log_readers` has the pod: its node's kubelet, dialled
        self.kubelet_log: LogReader | None = None
        #: the API server's token issuer; None where it serves without PKI
        self.tokens: ServiceAccountTokens | None = None

    async def handle(self, h: APIHandlers, request: web.Request, res: Resource, version: str, namespace, name, sub):
        m = request.method
        if sub == "binding" and m == "POST":
            body, opts = await h._create_input(request)
            unknown = _checked(body, "io.k8s.api.core.v1.Binding", "Binding", version, opts)
            warnings = await _strict_fields(h, request, opts, unknown, "Binding", version)
            return _warned(json_response(await self.bind(res, namespace, name, body, opts), 201), warnings)
        if sub == "eviction" and m == "POST":
            body, opts = await h._create_input(request)
            unknown = _checked(body, "io.k8s.api.policy.v1.Eviction", "Eviction", version, opts)
            warnings = await _strict_fields(h, request, opts, unknown, "Eviction", version)
            return _warned(json_response(await self.evict(namespace, name, body, opts), 201), warnings)
        if sub == "token" and m == "POST" and self.tokens is not None:
            body, opts = await h._create_input(request)  # (the options are judged, as any create's)
            unknown = _checked(body, TOKEN_REQUEST, "TokenRequest", version, opts)
            warnings = await _strict_fields(h, request, opts, unknown, "TokenRequest", version)
            # (the Go struct keeps no unknown field: the answer, which echoes the spec, has none either)
            body = structural.prune(body, schema.definitions()[TOKEN_REQUEST])
            _same_namespace(body, namespace)
            await node_token_request(self.rest.admission.authorizer, partial(lookup.get, self.rest), namespace, name, body,
                                     opts.user)  # NodeRestriction's
            return _warned(h.render_untabled(request, self.tokens.token_request(namespace, name, body),
                                             "*authentication.TokenRequest"), warnings)
        if sub == "log" and m == "GET":
            # a repeated parameter's first value, as url.Values conversion takes it
            data = await self.log(namespace, name, {k: request.query.getone(k) for k in request.query.keys()})
            if not isinstance(data, bytes):  # a stream (follow): a long-running request while it is written
                data = _counted(data, h.metrics.longrunning.labels("CONNECT", "", version, "pods", "log", "resource", "apiserver"))
            return web.Response(body=data, content_type="text/plain")
        if sub == "scale":
            if m == "GET":
                scale = await self.get_scale(res, namespace, name, version=version)
                return h.render_scale(request, res, scale, version)
            if m in ("PUT", "PATCH"):
                if m == "PUT":
                    body, opts = await h._update_input(request)
                    unknown = _checked(body, SCALE, "Scale", "v1", opts)
                    warnings = await _strict_fields(h, request, opts, unknown, "Scale", "v1")
                else:
                    ctype = h._patch_media(request, res)
                    raw = await h._raw(request)
                    opts = h._write_opts(request)  # after the media type and the body, as upstream's patch handler
                    repeated = await strict.patch_duplicates(raw, ctype, opts)  # (an apply's, under Strict, a 400 here)
                    current = await self.get_scale(res, namespace, name, UNSET_REPLICAS, version)
                    # (typed before its metadata is read: a patch may leave anything there, or at the root)
                    body, warnings = await self._patch_scale(current, ctype, raw, opts, repeated)
                    md = body.get("metadata") or {}
                    if md.get("resourceVersion") == current["metadata"].get("resourceVersion"):
                        # the patch named no resourceVersion: like upstream's update loop, a
                        # concurrent write (a controller's status) is retried, not a conflict
                        body["metadata"] = {k: v for k, v in md.items() if k != "resourceVersion"}
                applied = m == "PATCH" and request.content_type == "application/apply-patch+yaml"
                # (an apply configuration that names nothing is merged with the live Scale, which keeps its name)
                check_target({"name": name, **(body.get("metadata") or {})} if applied else body.get("metadata") or {},
                             name, namespace)
                opts.field_manager = opts.field_manager or request.headers.get("User-Agent", "unknown").split("/")[0]
                # an update's Scale uid is also the storage's precondition (DefaultUpdatedObjectInfo's), a patch's is not
                uid = (body.get("metadata") or {}).get("uid") if m == "PUT" else None
                resp = h.render_scale(request, res, await self.put_scale(res, version, namespace, name, body, opts, applied,
                                                                         uid), version)
                for w in warnings:
                    resp.headers.add("Warning", warning.header(w))
                return resp
        raise errors.method_not_allowed()

    # --- binding ----------------------------------------------------------

    async def create_binding(self, h: APIHandlers, request: web.Request, version: str, namespace: str) -> web.Response:
        """POST .../namespaces/{ns}/bindings: the Binding names its pod in metadata.name."""
        body, opts = await h._create_input(request)
        body = _typed(body, "io.k8s.api.core.v1.Binding", "Binding", version)
        pod = (body.get("metadata") or {}).get("name", "")
        pods = self.rest.index.get("", "v1", "pods")
        return json_response(await self.bind(pods, namespace, pod, body, opts), 201)

    async def bind(self, res: Resource, namespace: str, name: str, binding: dict, opts: WriteOptions) -> dict:
        _same_namespace(binding, namespace)

        def mutated(binding: dict) -> None:  # BindingREST.Create, before its createValidation
            _same_name(binding, name, "Binding")
            errs = validate_binding(binding)
            if errs:
                raise errors.invalid("core", "Binding", name, errs)

        binding = await self.rest.admit_subresource_create(res, "v1", "binding", BINDING_KIND, namespace, name, binding,
                                                           opts, mutated=mutated)
        target = binding.get("target") or {}
        md = binding.get("metadata") or {}
        key = res.key(namespace, name)

        def bound(pod: dict) -> dict:
            # setPodNodeAndMetadata's preconditions (the binding's uid and resourceVersion), which the
            # storage checks before the update function; its 409 is on pods (InterpretUpdateError)
            for f, what in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
                if md.get(f) and md[f] != pod["metadata"].get(f):
                    raise errors.conflict("", "pods", name, _precondition_failed(res, key, what, md[f], pod["metadata"].get(f)))
            if pod["metadata"].get("deletionTimestamp"):
                raise errors.conflict("", "pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host")
            node = (pod.get("spec") or {}).get("nodeName")
            if node:
                raise errors.conflict("", "pods/binding", name, f'pod {name} is already assigned to node "{node}"')
            if (pod.get("spec") or {}).get("schedulingGates"):  # a scheduling un-ready pod
                raise errors.conflict("", "pods/binding", name, f"pod {name} has non-empty .spec.schedulingGates")
            new = _bound(pod, target["name"], md.get("annotations"))
            st = new["status"]
            st.pop("nominatedNodeName", None)  # ClearingNominatedNodeNameAfterBinding, beta and on since 1.35
            # podutil.UpdatePodCondition: in its place, its transition time only on a change
            st["conditions"] = set_condition(st.get("conditions"), {
                "type": "PodScheduled", "status": "True", "lastProbeTime": None,
                "lastTransitionTime": self.rest.clock.rfc3339()})
            return new

        await self._update_pod(res, namespace, name, bound, "pods/binding", opts.dry_run)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    async def _update_pod(self, pods: Resource, namespace: str, name: str, change: Callable[[dict], dict],
                          resource: str, dry_run: bool = False) -> int | None:
        """A subresource's optimistic read-modify-write of its pod (GuaranteedUpdate): `change` builds
        the new pod from the stored one, or raises to refuse; a write that loses a race is tried again
        on the pod that won it (PATCH_ATTEMPTS times: upstream's GuaranteedUpdate tries until it wins),
        then a 409 on `resource`. The revision written; None for a dry run, which writes nothing once
        `change` has judged the pod."""
        for _ in range(PATCH_ATTEMPTS):
            entry = self.rest._entry(pods, namespace, name)
            new = change(entry.obj)
            if dry_run:
                return None
            key, (value, handed, at) = pods.key(namespace, name), stored_json(new)
            # the cache takes the pod as written instead of decoding it again (about half of a binding)
            self.rest.cache.expect(key, value, handed, at)
            try:
                kv = await self.rest.store.update(key, value, entry.rev, entry.kv)
            except RevisionMismatch:
                await self.rest.cache.sync()
                continue
            except KeyNotFound:  # deleted since it was read
                raise errors.not_found("", "pods", name) from None
            await self.rest.cache.wait_for(kv.mod_revision)
            return kv.mod_revision
        raise errors.conflict("", resource, name, errors.STALE)

    # --- eviction ---------------------------------------------------------

    async def evict(self, namespace: str, name: str, eviction: dict, opts: WriteOptions) -> dict:
        """The Eviction API: a pod covered by a PodDisruptionBudget is deleted
        only if the budget allows one more disruption, which this records
        (disruptedPods) before deleting, as kube-apiserver does."""
        _same_namespace(eviction, namespace)

        def mutated(eviction: dict) -> None:  # EvictionREST.Create, before its createValidation
            _same_name(eviction, name, "Eviction")
            if eviction.get("deleteOptions") is not None:  # (checked as a DELETE's, after the name)
                eviction["deleteOptions"] = delete_options({}, eviction["deleteOptions"], [])
                _same_dry_run(eviction["deleteOptions"].get("dryRun"), opts)

        pods = self.rest.index.get("", "v1", "pods")
        pdbs = self.rest.index.get("policy", "v1", "poddisruptionbudgets")
        eviction = await self.rest.admit_subresource_create(pods, "v1", "eviction", EVICTION_KIND, namespace, name,
                                                            eviction, opts, mutated=mutated)
        if ((eviction or {}).get("deleteOptions") or {}).get("dryRun") and not opts.dry_run:
            # propagateDryRun: the body's dryRun (kubectl drain --dry-run=server sends it there, not in
            # the query) makes the budget's check and the pod's delete dry runs too
            opts = dataclasses.replace(opts, dry_run=True)
        options = (eviction or {}).get("deleteOptions") or {}
        pod = await self._evict_outside_budgets(pods, namespace, name, options, opts)
        if pod is None:
            return _evicted()
        unhealthy = None  # the budget an unready pod goes without spending
        if pdbs is not None:
            labels = pod["metadata"].get("labels") or {}
            for tried in range(EVICTION_TRIES):
                if tried:
                    await self.rest.clock.sleep(EVICTION_PAUSE * (1 + EVICTION_JITTER * random.random()))
                    await self.rest.cache.sync()
                matching = [e for _, e in self.rest.cache.list(pdbs.key_prefix(namespace))
                            if (e.obj.get("spec") or {}).get("selector") is not None
                            and matches_labels(selector_from_object(e.obj["spec"]["selector"]), labels)]
                if len(matching) > 1:  # eviction.go's own Status, code 500 and no reason (not an InternalError)
                    raise errors.APIError(500, "", "This pod has more than one PodDisruptionBudget, which the "
                                                   "eviction subresource does not support.")
                if matching and self._unhealthy_evictable(pod, matching[0].obj):
                    unhealthy = matching[0].obj["metadata"]["name"]
                    break
                if not matching or await self._decrement(pdbs, namespace, name, matching[0], opts):
                    break
            else:
                raise errors.conflict("policy", "poddisruptionbudgets", matching[0].obj["metadata"]["name"],
                                      errors.STALE)
        pre = options.get("preconditions") or {}
        guarded = unhealthy is not None and pre.get("resourceVersion") is None
        if guarded:  # updateDeletionOptions: the pod let go unhealthy may not have turned Ready since
            options = {**options, "preconditions": {**pre, "resourceVersion": pod["metadata"]["resourceVersion"]}}
        try:
            if not opts.dry_run:
                options = await self._mark_disrupted(pods, namespace, name, options)
            await self.rest.delete(pods, "v1", namespace, name, options, opts)
        except errors.APIError as e:
            if guarded and e.code == 409:  # (the precondition was the server's own: the client is told to retry)
                raise _budget_processing(unhealthy) from None
            raise
        return _evicted()

    async def _evict_outside_budgets(self, pods: Resource, namespace: str, name: str, options: dict,
                                     opts: WriteOptions) -> dict | None:
        """canIgnorePDB: a terminal pod, one being deleted or a Pending one is deleted without a budget's
        say (None); else the pod, for the budgets to judge. A Pending pod goes only as it was read (a
        resourceVersion precondition of the server's own, where the client set none): one written in
        between (it may have started, and be guarded now) is read again, up to EvictionsRetry's 20
        tries, as every conflict is where the client's options name no resourceVersion."""
        retried = (options.get("preconditions") or {}).get("resourceVersion") is None
        for tried in range(EVICTION_TRIES):
            if tried:
                await self.rest.clock.sleep(EVICTION_PAUSE * (1 + EVICTION_JITTER * random.random()))
                await self.rest.cache.sync()
            pod = self.rest._entry(pods, namespace, name).obj
            phase, deleting = (pod.get("status") or {}).get("phase"), bool(pod["metadata"].get("deletionTimestamp"))
            if phase not in ("Succeeded", "Failed", "Pending") and not deleting:
                return pod
            these = options
            if phase == "Pending" and not deleting and retried:  # shouldEnforceResourceVersion
                these = {**options, "preconditions": {**(options.get("preconditions") or {}),
                                                      "resourceVersion": pod["metadata"]["resourceVersion"]}}
            try:
                if not opts.dry_run:
                    these = await self._mark_disrupted(pods, namespace, name, these)
                await self.rest.delete(pods, "v1", namespace, name, these, opts)
                return None
            except errors.APIError as e:
                if e.code != 409 or not retried:
                    raise
                conflict = e
        raise conflict

    async def _mark_disrupted(self, pods: Resource, namespace: str, name: str, options: dict) -> dict:
        """addConditionAndDeletePod: the evicted pod's status gets DisruptionTarget (EvictionByEvictionAPI)
        before it is deleted, so that its owner knows why it goes (a Job's podFailurePolicy rule on
        DisruptionTarget); the delete options, with a resourceVersion precondition moved to the pod
        this wrote."""
        pre = options.get("preconditions") or {}

        def disrupted(pod: dict) -> dict:
            md = pod["metadata"]
            if pre.get("uid") and pre["uid"] != md.get("uid"):
                raise errors.conflict("", "Pod", name, f"the UID in the precondition ({pre['uid']}) does not match the "
                                      f"UID in record ({md.get('uid')}). The object might have been deleted and then recreated")
            if pre.get("resourceVersion") and pre["resourceVersion"] != md.get("resourceVersion"):
                raise errors.conflict("", "Pod", name, f"the ResourceVersion in the precondition ({pre['resourceVersion']}) "
                                      f"does not match the ResourceVersion in record ({md.get('resourceVersion')}). "
                                      "The object might have been modified")
            pod = copy.deepcopy(pod)
            st = pod.setdefault("status", {})
            st["conditions"] = set_condition(st.get("conditions"), {
                "type": "DisruptionTarget", **observed_generation(pod), "status": "True", "lastProbeTime": None,
                "lastTransitionTime": self.rest.clock.rfc3339(), "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting"})
            return pod

        rev = await self._update_pod(pods, namespace, name, disrupted, "pods")
        if pre.get("resourceVersion"):
            options = {**options, "preconditions": {**pre, "resourceVersion": str(rev)}}
        return options

    @staticmethod
    def _unhealthy_evictable(pod: dict, pdb: dict) -> bool:
        """A pod that is not Ready does not count as healthy: it may go without
        spending the budget under AlwaysAllow, or while the budget is met."""
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (pod.get("status") or {}).get("conditions") or [])
        if ready:
            return False
        if (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
            return True
        st = pdb.get("status") or {}
        return st.get("desiredHealthy", 0) > 0 and st.get("currentHealthy", 0) >= st.get("desiredHealthy", 0)

    async def _decrement(self, pdbs: Resource, namespace: str, pod_name: str, entry, opts: WriteOptions) -> bool:
        """Spend one disruption of the budget; False if it changed meanwhile."""
        pdb = entry.obj
        name = pdb["metadata"]["name"]
        st = pdb.get("status") or {}
        refused = "Cannot evict pod as it would violate the pod's disruption budget."
        if st.get("observedGeneration", 0) < pdb["metadata"].get("generation", 1):
            raise _budget_processing(name)
        forbidden = f'poddisruptionbudgets.policy "{name}" is forbidden: '
        details = {"name": name, "group": "policy", "kind": "poddisruptionbudgets"}
        if len(st.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
            raise errors.APIError(403, "Forbidden", forbidden + "DisruptedPods map too big - too many evictions not "
                                                                "confirmed by PDB controller", details)
        if st.get("disruptionsAllowed", 0) == 0:
            raise errors.APIError(429, "TooManyRequests", refused, {"causes": [{
                "reason": "DisruptionBudget", "message": f"The disruption budget {name} needs "
                f"{st.get('desiredHealthy', 0)} healthy pods and has {st.get('currentHealthy', 0)} currently"}]})
        if opts.dry_run:
            return True
        new = copy.deepcopy(pdb)
        nst = new.setdefault("status", {})
        nst["disruptionsAllowed"] -= 1
        nst.setdefault("disruptedPods", {})[pod_name] = self.rest.clock.rfc3339()
        if nst["disruptionsAllowed"] == 0:
            now = self.rest.clock.rfc3339()
            conds = [c for c in nst.get("conditions") or [] if c.get("type") != "DisruptionAllowed"]
            old = next((c for c in nst.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), {})
            conds.append({"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods", "message": "",
                          "observedGeneration": nst.get("observedGeneration", 0),
                          "lastTransitionTime": old.get("lastTransitionTime", now)
                          if old.get("status") == "False" else now})
            nst["conditions"] = conds
        key, (value, handed, at) = pdbs.key(namespace, name), stored_json(new)
        # as any write of this server: the cache keeps the budget as written, and its KV for the next
        # eviction's write (which then reads no row first)
        self.rest.cache.expect(key, value, handed, at)
        try:
            kv = await self.rest.store.update(key, value, entry.rev, entry.kv)
        except RevisionMismatch:
            return False
        await self.rest.cache.wait_for(kv.mod_revision)
        return True

    # --- log --------------------------------------------------------------

    async def log(self, namespace: str, name: str, query: dict) -> bytes | AsyncIterable[bytes]:
        """LogREST.Get's order: the options (400 unconverted, 422 invalid), the pod (404), its
        container (400), then the node's log, read with the options as the kubelet is sent them."""
        kubelet_query = options.pod_log_options(query, name)
        pods = self.rest.index.get("", "v1", "pods")
        pod = self.rest._entry(pods, namespace, name).obj
        container = pod_container(pod, query.get("container") or "")
        if not (pod.get("spec") or {}).get("nodeName"):
            return b""  # LogLocation: no host, no location, an empty log (no kubelet to say more)
        for reader in (*self.log_readers, self.kubelet_log or _none):
            data = await reader(namespace, name, container, kubelet_query)
            if data is not None:
                return data
        raise errors.bad_request(f'container "{container}" in pod "{name}" is not available: no node agent serves logs for node "{pod["spec"]["nodeName"]}"')

    # --- scale ------------------------------------------------------------

    async def get_scale(self, res: Resource, namespace: str, name: str, unset: int | None = None,
                        version: str | None = None) -> dict:
        obj = self.rest._entry(res, namespace, name).obj
        return _scale_of(res, await self._at_version(res, obj, version), unset)

    async def _at_version(self, res: Resource, obj: dict, version: str | None) -> dict:
        """A custom resource's object as `version` serves it, whose /scale reads that version's
        paths (upstream serves each version's from the object converted to it)."""
        if version is None or not res.strategy.unstructured:
            return obj
        await res.strategy.prepare_conversion([obj], version)
        return self.rest._external(res, obj, version)

    async def _patch_scale(self, scale: dict, ctype: str, raw: bytes, opts: WriteOptions,
                           repeated: list[str]) -> tuple[dict, list[str]]:
        """The Scale with a patch applied and decoded as a Scale, or the configuration of a
        server-side apply (applied to the Scale by `put_scale`), and the warnings of the patch's
        `repeated` keys and its unknown fields under Warn. The generic patchers' decoding,
        as upstream's /scale is served by them: a number past float64 refused where the patch is
        decoded into interface values, a patched Scale that does not decode the 422 of a patch."""
        from .patch import PatchError, jsonpatch, merge, strategic

        apply = ctype == "application/apply-patch+yaml"
        try:
            patch = await serializer.off_loop(serializer.loads_yaml, raw) if apply else \
                serializer.loads_json(raw, lenient=True)
        except (orjson.JSONDecodeError, yaml.YAMLError) as e:
            go = not apply and gojson.patch_syntax_error(raw, ctype == "application/strategic-merge-patch+json",
                                                         ctype == "application/json-patch+json", opts.field_validation)
            raise errors.bad_request(go or f"error decoding patch: {e}") from None
        try:
            if apply:
                version = patch.get("apiVersion") if isinstance(patch, dict) else None
                if version != "autoscaling/v1" or patch.get("kind") != "Scale":
                    raise errors.bad_request("Incorrect version specified in apply patch. "
                                             f"Specified patch version: {version or ''}, expected: autoscaling/v1")
                return _typed(patch, SCALE, "Scale", "v1"), repeated
            if serializer.OUT_OF_RANGE.get():
                patch_out_of_range(ctype, patch, opts)
            if ctype == "application/json-patch+json":
                patched = jsonpatch.apply(scale, patch)
            elif ctype == "application/merge-patch+json":
                patched = merge.apply(scale, patch)
            else:  # a strategic merge patch: the media type is one of four (APIHandlers._patch_media)
                patched = strategic.apply(scale, patch, schema.kind_schema("autoscaling", "v1", "Scale"))
        except PatchError as e:
            raise errors.APIError(e.code, e.reason, e.status_message, e.details) from None
        if opts.field_validation == "Strict":
            return decode_patched("Scale", "v1", patched, SCALE, opts, ctype, raw, tuple(repeated))
        scale, warnings = decode_patched("Scale", "v1", patched, SCALE, opts, ctype, raw)
        return scale, [*repeated, *warnings]

    async def put_scale(self, res: Resource, version: str, namespace: str, name: str, scale: dict, opts: WriteOptions,
                        applied: bool = False, precondition: str | None = None) -> dict:
        """A write of the Scale (with `applied`, `scale` is a server-side apply configuration of it);
        its managedFields are tracked on the Scale and mapped to the parent's (ssa.scale_write). One
        naming no resourceVersion that loses a race is made again on the newer object. `precondition`:
        an update's uid, which the storage checks on the parent before the Scale is looked at (a
        custom resource's too), so its 409 is the storage's, on the parent's resource."""
        for _ in range(PATCH_ATTEMPTS):
            entry = self.rest._entry(res, namespace, name)
            if precondition and precondition != entry.obj["metadata"].get("uid"):
                raise errors.conflict(res.group, res.plural, name, _precondition_failed(
                    res, res.key(namespace, name), "UID", precondition, entry.obj["metadata"].get("uid")))
            rv = ((scale.get("metadata") or {}).get("resourceVersion"))
            ext = await self._at_version(res, entry.obj, version)
            try:
                written, fields = ssa.scale_write(
                    entry.obj, _replicas_at(res), res.api_version(version),
                    _scale_of(res, ext, UNSET_REPLICAS), scale, opts.field_manager, self.rest.clock.rfc3339(),
                    applied, opts.force)
            except PatchError as e:
                raise errors.APIError(e.code, e.reason, e.status_message, e.details) from None
            replicas = (written.get("spec") or {}).get("replicas", 0)
            if replicas == UNSET_REPLICAS and res.strategy.scale_of(ext, 0) is not None:  # a custom resource's
                path = ".".join(("", *(res.strategy.replicas_path(res.api_version(version)) or ())))
                raise errors.bad_request(f'the spec replicas field "{path}" cannot be empty')
            if not isinstance(replicas, int) or replicas < 0:
                raise errors.APIError(422, "Invalid", f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: {replicas}: must be greater than or equal to 0',
                                      {"name": name, "group": "autoscaling", "kind": "Scale", "causes": [
                                          {"reason": "FieldValueInvalid", "message": f"Invalid value: {replicas}: must be greater than or equal to 0", "field": "spec.replicas"}]})
            uid, live_uid = (written.get("metadata") or {}).get("uid"), entry.obj["metadata"].get("uid")
            if uid and uid != live_uid and not res.strategy.unstructured:
                # a built-in kind's scaleUpdatedObjectInfo takes the Scale's uid as a precondition after
                # its validation (a custom resource's does not): what a patch's Scale names is met here
                raise errors.conflict(res.group, f"{res.plural}/scale", name, "Precondition failed: UID in "
                                      f"precondition: {uid}, UID in object meta: {live_uid}")
            if rv and rv != str(entry.rev):  # (the store's check, after the Scale's own)
                raise errors.conflict(res.group, res.plural, name, errors.STALE)
            if ext is entry.obj:  # (a built-in kind's)
                await res.strategy.prepare_conversion([entry.obj], version)
                ext = self.rest._external(res, entry.obj, version)
            new = copy.deepcopy(ext)
            res.strategy.set_replicas(new, replicas)  # at the request's version's path
            await res.strategy.prepare_conversion([new], res.storage_version)
            new = res.strategy.to_storage(new, version)
            try:
                r = await self.rest._update_from(res, version, entry, new, opts, "scale", entry.rev,
                                                 managed_fields=fields or [])
            except errors.APIError as e:
                if e.code == 409 and not rv:
                    await self.rest.cache.sync()
                    continue
                raise
            # the Scale of the object this write stored, as upstream's of what its Update returns: the
            # cache may hold a later write by now (a dry run's object, never the cache's)
            await res.strategy.prepare_conversion([r.obj], res.storage_version)
            return _scale_of(res, await self._at_version(res, res.strategy.to_storage(r.obj, version), version))
        raise errors.conflict(res.group, res.plural, name, errors.STALE)


#: scaleUpdatedObjectInfo's invalidSpecReplicas: the replicas of a custom resource's Scale
#: before an update where its spec replicas field is not set (an update must set them)
UNSET_REPLICAS = -2147483648


def _replicas_at(res: Resource) -> Callable[[str], fp.Path | None]:
    """Each apiVersion's replicas path, for the managers of the parent's replicas (each at its own)."""
    def at(api_version: str) -> fp.Path | None:
        path = res.strategy.replicas_path(api_version)
        return fp.make_path(*path) if path is not None else None
    return at


def _scale_of(res: Resource, obj: dict, unset: int | None = None) -> dict:
    md = obj["metadata"]
    spec, st = obj.get("spec") or {}, obj.get("status") or {}
    sel = spec.get("selector")
    custom = res.strategy.scale_of(obj, unset)
    if custom is not None:
        spec, st = {"replicas": custom[0]}, {"replicas": custom[1]}
        selector = custom[2]
    elif obj.get("kind") == "ReplicationController":  # an equality map, not a LabelSelector
        selector = ",".join(f"{k}={sel[k]}" for k in sorted(sel or {}))
    else:
        selector = selector_to_string(sel) if isinstance(sel, dict) else (st.get("selector") or "")
    # autoscaling/v1's JSON: spec.replicas and status.selector are omitempty, status.replicas is not
    replicas = spec.get("replicas", 0)
    status = {"replicas": st.get("replicas", 0)}
    if selector:
        status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {k: md[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in md},
        "spec": {"replicas": replicas} if replicas else {},
        "status": status,
    }


def _bound(pod: dict, node: str, annotations: dict | None) -> dict:
    """A copy of the cached pod with the parts a binding changes copied
    (spec, status, metadata and its annotations) and the rest shared: the
    result is only serialised, never mutated further."""
    md = dict(pod["metadata"])
    if annotations:
        md["annotations"] = {**(md.get("annotations") or {}), **annotations}
    return {**pod, "metadata": md, "spec": {**pod["spec"], "nodeName": node}, "status": dict(pod.get("status") or {})}


SCALE = "io.k8s.api.autoscaling.v1.Scale"
TOKEN_REQUEST = "io.k8s.api.authentication.v1.TokenRequest"


async def _strict_fields(h: APIHandlers, request: web.Request, opts: WriteOptions, unknown: list[str],
                         kind: str, version: str) -> list[str]:
    """A decoded body's unknown (`_checked`'s) and repeated fields per fieldValidation, as the create and
    update handlers' strict decoder reports them together, in the order it meets them: Strict one 400,
    Warn a warning each (returned, and recorded for an error later)."""
    if opts.field_validation == "Ignore":
        return []
    await h._note_duplicates(request, opts)
    if opts.body:
        texts = serializer.strict_order(opts.body, [t[len('duplicate field "'):-1] for t in opts.duplicates], unknown)
    else:
        texts = [*opts.duplicates, *structural.unknown_field_warnings(unknown)]
    opts.body, opts.duplicates = b"", ()  # (reported here: not again by the write of the object behind it)
    if texts and opts.field_validation == "Strict":
        raise errors.bad_request(structural.decode_error_message(kind, version, "strict decoding error: " + ", ".join(texts)))
    texts = warning.strict_decoding(texts)
    warning.record(texts)
    return texts


def _warned(resp: web.Response, warnings: list[str]) -> web.Response:
    for w in warnings:
        resp.headers.add("Warning", warning.header(w))
    return resp


async def _counted(chunks: AsyncIterable[bytes], gauge) -> AsyncIterable[bytes]:
    """A log stream counted in apiserver_longrunning_requests while it is written, as StreamObject
    runs inside RecordLongRunning upstream."""
    gauge.inc()
    try:
        async for chunk in chunks:
            yield chunk
    finally:
        gauge.dec()


def _typed(body, definition: str, kind: str, version: str) -> dict:
    """A subresource's body decoded as its Go type: an object whose fields have their types."""
    _checked(body, definition, kind, version)
    return body


def _checked(body, definition: str, kind: str, version: str, opts: WriteOptions | None = None) -> list[str]:
    """`_typed`'s checks of a body, and its unknown field paths where `opts`' fieldValidation asks for
    them (for `_strict_fields`), from the same walk of the body."""
    if type(body) is not dict:
        what = "array" if type(body) is list else "null" if body is None else type(body).__name__
        raise errors.bad_request(structural.decode_error_message(
            kind, version, f"json: cannot unmarshal {what} into Go value of type {definition.rsplit('.', 2)[-2]}.{kind}"))
    strict = opts is not None and opts.field_validation != "Ignore"
    errs, unknown = structural.check(body, schema.definitions()[definition], strict)
    if errs:
        raise errors.bad_request(structural.decode_error_message(kind, version, errs[0]))
    return unknown
