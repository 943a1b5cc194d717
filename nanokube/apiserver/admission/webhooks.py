"""MutatingAdmissionWebhook and ValidatingAdmissionWebhook: the configured
webhooks, matched and called as apiserver's webhook dispatchers do.

Configurations run sorted by name, webhooks within one in order. Mutating
webhooks run one after another, each patch applied (and defaults re-applied)
before the next sees the object; validating webhooks run concurrently and the
first error in order wins. Errors read as upstream's: a denial is
`admission webhook "<name>" denied the request: ...`, a failed call under
failurePolicy Fail is a 500 `failed calling webhook "<name>": failed to call
webhook: ...`, and under Ignore the request goes on with a failed-open audit
annotation.
"""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

import orjson

from ...machinery import errors
from ...machinery.gojson import value_kind
from .. import latencytrackers
from ..patch import PatchError, json_copy, jsonpatch
from ..webhook.client import WebhookClient, WebhookError
from .attributes import Attributes
from .source import ConfigSource
from .cel import MATCH_CONDITIONS_COST_BUDGET, OUT_OF_BUDGET, Budget, CELError, OutOfBudget, evaluate
from .metrics import CALLING_WEBHOOK_ERROR, INTERNAL_ERROR, NO_ERROR, AdmissionMetrics
from .policies import reads_authorizer, type_meta_error
from .matching import (
    Target,
    match_rules,
    namespace_labels,
    namespace_matches,
    object_matches,
)

GROUP = "admissionregistration.k8s.io"
REVIEW_VERSIONS = ("v1", "v1beta1")

T = TypeVar("T")


class CallError(Exception):
    """ErrCallingWebhook: the webhook could not give an answer; failurePolicy decides.
    `code` is the status its metrics record."""

    def __init__(self, name: str, reason: str, code: int = 503) -> None:
        super().__init__(f'failed calling webhook "{name}": {reason}')
        self.code = code


@dataclass
class Hook:
    config: str
    index: int  # within its configuration
    spec: dict
    mutating: bool

    @property
    def name(self) -> str:
        return self.spec.get("name", "")

    @property
    def uid(self) -> tuple[str, int]:
        return (self.config, self.index)

    @property
    def ignore_failures(self) -> bool:
        return self.spec.get("failurePolicy", "Fail") == "Ignore"


def to_status_error(name: str, result: dict | None) -> errors.APIError:
    """webhookerrors.ToStatusErr: a denial as the Status the client gets."""
    result = dict(result or {})
    code = result.get("code") or 0
    code = code if isinstance(code, int) and code >= 400 else 400
    denied = f'admission webhook "{name}" denied the request'
    if result.get("message"):
        msg = f"{denied}: {result['message']}"
    elif result.get("reason"):
        msg = f"{denied}: {result['reason']}"
    else:
        msg = f"{denied} without explanation"
    return errors.APIError(code, result.get("reason", ""), msg, result.get("details"))


_STR = "string"
_CAUSE = ("StatusCause", "v1.StatusCause", {"reason": "v1.CauseType", "message": _STR, "field": _STR})
_DETAILS = ("StatusDetails", "v1.StatusDetails", {
    "name": _STR, "group": _STR, "kind": _STR, "uid": "types.UID", "causes": ("[]v1.StatusCause", _CAUSE),
    "retryAfterSeconds": "int32"})
_STATUS = ("Status", "v1.Status", {
    "kind": _STR, "apiVersion": _STR, "status": _STR, "message": _STR, "reason": "v1.StatusReason", "code": "int32",
    "details": _DETAILS, "metadata": ("ListMeta", "v1.ListMeta", {
        "selfLink": _STR, "resourceVersion": _STR, "continue": _STR, "remainingItemCount": "int64"})})
#: AdmissionResponse's fields as Go's decoder types them: a Go type's name, (struct, type name, fields) or
#: (slice or map type name, element); `[]uint8` is base64 text
_RESPONSE = {"uid": "types.UID", "allowed": "bool", "status": _STATUS, "patch": "[]uint8", "patchType": "PatchType",
             "auditAnnotations": ("map[string]string", _STR), "warnings": ("[]string", _STR)}
_INT_BOUNDS = {"int32": 2**31, "int64": 2**63}


def decode_review(review: dict, version: str) -> None:
    """What Go's decoder refuses in an AdmissionReview answer (the REST client's `Into`): the first value of
    the wrong type in its response, or a patch that is not base64, raised as a ValueError in Go's words.
    A webhook's call fails with it, under its failurePolicy."""
    for f in ("apiVersion", "kind"):  # (the serializer reads the type first, as SimpleMetaFactory.Interpret)
        if review.get(f) is not None and not isinstance(review[f], str):
            raise ValueError("couldn't get version/kind; json parse error: json: cannot unmarshal "
                             f"{value_kind(review[f])} into Go struct field .{f} of type string")
    if isinstance(review.get("apiVersion"), str) and review["apiVersion"].count("/") > 1:
        raise ValueError(f"unexpected GroupVersion string: {review['apiVersion']}")
    resp = review.get("response")
    if resp is not None:
        why = _mismatch(resp, ("AdmissionResponse", f"{version}.AdmissionResponse", _RESPONSE), "AdmissionReview",
                        "response", version)
        if why:
            raise ValueError(why)


def _mismatch(v, t, struct: str, path: str, version: str) -> str | None:
    """Go's text for the first value in `v` its type `t` does not take (None when it takes them all)."""
    if v is None:  # (null leaves a Go value at its zero)
        return None
    if isinstance(t, str):
        name = f"{version}.PatchType" if t == "PatchType" else t
        if t == "bool":
            ok = isinstance(v, bool)
        elif t in _INT_BOUNDS:
            if isinstance(v, (int, float)) and not isinstance(v, bool) and \
                    not (isinstance(v, int) and -_INT_BOUNDS[t] <= v < _INT_BOUNDS[t]):
                return _type_error(value_kind(v, True), struct, path, name)
            ok = isinstance(v, int) and not isinstance(v, bool)
        else:
            ok = isinstance(v, str)
            if ok and t == "[]uint8":
                at = _base64_error(v.encode())
                if at is not None:
                    return f"illegal base64 data at input byte {at}"
        return None if ok else _type_error(value_kind(v), struct, path, name)
    if len(t) == 3:  # a struct
        own, name, fields = t
        if not isinstance(v, dict):
            return _type_error(value_kind(v), struct, path, name)
        for k, x in v.items():
            if k in fields:
                why = _mismatch(x, fields[k], own, f"{path}.{k}", version)
                if why:
                    return why
        return None
    name, elem = t
    if not isinstance(v, dict if name.startswith("map") else list):
        return _type_error(value_kind(v), struct, path, name)
    for x in (v.values() if isinstance(v, dict) else v):
        why = _mismatch(x, elem, struct, path, version)
        if why:
            return why
    return None


def _type_error(kind: str, struct: str, path: str, go_type: str) -> str:
    return f"json: cannot unmarshal {kind} into Go struct field {struct}.{path} of type {go_type}"


_B64 = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def _base64_error(src: bytes) -> int | None:
    """Where Go's base64.StdEncoding refuses `src` (its CorruptInputError offset), or None: padding is
    required, and line breaks are skipped anywhere."""
    si, n = 0, len(src)
    while True:
        j = 0
        while j < 4:
            if si == n:
                return None if j == 0 else si - j
            c = src[si]
            si += 1
            if c in _B64:
                j += 1
                continue
            if c in b"\r\n":
                continue
            if c != 0x3D or j < 2:  # (anything but "=", or padding too early)
                return si - 1
            if j == 2:  # "==" expected: the second "="
                while si < n and src[si] in b"\r\n":
                    si += 1
                if si == n:
                    return n
                if src[si] != 0x3D:
                    return si - 1
                si += 1
            while si < n and src[si] in b"\r\n":
                si += 1
            return si if si < n else None  # (anything after the padding is trailing garbage)


def _as_webhooks(err: errors.APIError) -> errors.APIError:
    """A mutating policy's answer to a patch that changed the kind or apiVersion, as the webhook dispatcher
    gives it: the conversion back to the request's type at the end of its Dispatch returns Convert's error
    as it is, which the handler answers as a 500 of no reason (ErrorToAPIStatus); a kind or apiVersion that
    is no string is the json serializer's Interpret error; the rest are the same."""
    internal = "Internal error occurred: "
    if err.message.startswith(internal + "failed to convert object: "):
        return errors.APIError(500, "", err.message[len(internal + "failed to convert object: "):])
    if err.message.startswith(internal + "json: cannot unmarshal") and " Go struct field ." in err.message:
        return errors.internal("couldn't get version/kind; json parse error: " + err.message[len(internal):])
    return err


def verify_response(review: dict, version: str, uid: str, mutating: bool) -> dict:
    """VerifyAdmissionResponse: the response part of a well-formed review."""
    resp = review.get("response")
    if not isinstance(resp, dict):
        raise ValueError("webhook response was absent")
    if version == "v1beta1":
        out = dict(resp)
        if mutating and out.get("patch"):
            out["patchType"] = "JSONPatch"
        else:
            out.pop("patch", None)
            out.pop("patchType", None)
        return out
    if resp.get("uid") != uid:
        raise ValueError(f'expected response.uid="{uid}", got "{resp.get("uid", "")}"')
    got = f"{review.get('apiVersion', '')}, Kind={review.get('kind', '')}"
    if review.get("apiVersion") != "admission.k8s.io/v1" or review.get("kind") != "AdmissionReview":
        if "/" in review.get("apiVersion", ""):
            g, v = review["apiVersion"].split("/", 1)
            got = f"{g}/{v}, Kind={review.get('kind', '')}"
        raise ValueError(f"expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {got}")
    if mutating:
        if resp.get("patch") and resp.get("patchType") is None:
            raise ValueError("webhook returned response.patch but not response.patchType")
        if not resp.get("patch") and resp.get("patchType") is not None:
            raise ValueError("webhook returned response.patchType but not response.patch")
        if resp.get("patchType") == "":
            raise ValueError('webhook returned invalid response.patchType of ""')
    else:
        if resp.get("patch"):
            raise ValueError("validating webhook may not return response.patch")
        if resp.get("patchType") is not None:
            raise ValueError("validating webhook may not return response.patchType")
    return resp


@dataclass
class MutationRound:
    """Reinvocation bookkeeping for one request (reinvocationcontext.go)."""

    round: int = 0
    #: IfNeeded webhooks called in the first round, in order
    called: dict[tuple[str, int], None] = field(default_factory=dict)
    #: webhooks to call again in the second round
    again: set[tuple[str, int]] = field(default_factory=set)
    #: the object as the webhooks of the first round left it
    last_output: dict | None = None
    #: a webhook changed the object: the chain runs a second round
    changed: bool = False


class Webhooks:
    def __init__(self, rest, client: WebhookClient, source: ConfigSource) -> None:
        self.rest = rest
        self.client = client
        self.source = source
        self.metrics = AdmissionMetrics()

    def _observe(self, hook: Hook, a: Attributes, started: float, error: BaseException | None) -> None:
        """ObserveWebhook / ObserveWebhookRejection for one call."""
        typ = "admit" if hook.mutating else "validating"
        if error is None:
            code, rejected = 200, False
        elif isinstance(error, CallError):
            code, rejected = error.code, not hook.ignore_failures
            if rejected:
                self.metrics.rejection(hook.name, typ, a.operation, CALLING_WEBHOOK_ERROR, code)
            else:
                self.metrics.fail_open.inc(hook.name, typ)
        elif isinstance(error, errors.APIError) and error.message.startswith(f'admission webhook "{hook.name}" denied'):
            code, rejected = error.code, True
            self.metrics.rejection(hook.name, typ, a.operation, NO_ERROR, code)
        else:
            code, rejected = 0, True
            self.metrics.rejection(hook.name, typ, a.operation, INTERNAL_ERROR, 0)
        seconds = time.perf_counter() - started
        self.metrics.observe(hook.name, typ, a.operation, seconds, code, rejected)
        latencytrackers.webhook(hook.mutating, seconds)

    def hooks(self, mutating: bool) -> list[Hook]:
        """Every webhook, configurations sorted by name, webhooks in their order."""
        plural = "mutatingwebhookconfigurations" if mutating else "validatingwebhookconfigurations"

        def build() -> list[Hook]:
            return [Hook(cfg["metadata"]["name"], i, w, mutating)
                    for cfg in self.source.objects(plural) for i, w in enumerate(cfg.get("webhooks") or [])]

        return self.source.derived(("hooks", plural), build)

    # --- matching --------------------------------------------------------

    async def should_call(self, hook: Hook, a: Attributes) -> Target | None:
        """ShouldCallHook: rules (Equivalent), namespace and object selectors, then matchConditions."""
        w = hook.spec
        # rules first: the cheapest test, and selectors can only exclude what rules match
        t = match_rules(self.rest.index, w.get("rules") or [], w.get("matchPolicy", "Equivalent"), a.operation,
                        a.target, a.subresource, a.namespace)
        if t is None:
            return None
        ns_labels = namespace_labels(self.rest, a.res, a.operation, a.subresource, a.namespace, a.obj or a.old)
        if not namespace_matches(w.get("namespaceSelector"), ns_labels):
            return None
        if not object_matches(w.get("objectSelector"), a.obj, a.old):
            return None
        conditions = w.get("matchConditions") or []
        if conditions:
            await a.prepare(t)
        if conditions and a.authorizer_waits and reads_authorizer([c.get("expression", "") for c in conditions]):
            if not await asyncio.to_thread(self._conditions_match, hook, conditions, a, t):  # (policies._off_loop)
                return None
        elif conditions and not self._conditions_match(hook, conditions, a, t):
            return None
        return t

    def _conditions_match(self, hook: Hook, conditions: list[dict], a: Attributes, t: Target) -> bool:
        activation = {"object": a.versioned(t, a.obj), "oldObject": a.versioned(t, a.old),
                      "request": a.request(t, "", None, None), "authorizer": a.authorizer}
        failures: list[str] = []
        budget = Budget(MATCH_CONDITIONS_COST_BUDGET)
        results: list[tuple[dict, object, str | None]] = []
        try:  # all evaluated first, as upstream's matcher does: running out of the budget is the failure
            for c in conditions:
                try:
                    results.append((c, evaluate(c.get("expression", ""), activation, budget), None))
                except CELError as e:
                    results.append((c, None, str(e)))
        except OutOfBudget:
            failures, results = [OUT_OF_BUDGET], []
        for c, ok, why in results:
            if why is not None:
                failures.append(why)
            elif ok is False:
                return False
            elif ok is not True:
                failures.append(f"expression '{c.get('expression', '')}' resulted in error: "
                                f"no such overload: expected bool, got {type(ok).__name__}")
        if not failures:
            return True
        if hook.ignore_failures:
            return False
        why = failures[0] if len(failures) == 1 else "[" + ", ".join(failures) + "]"
        raise errors.forbidden(a.res.group, a.res.plural, a.name, why)

    # --- calling ---------------------------------------------------------

    async def _call(self, hook: Hook, a: Attributes, t: Target) -> dict:
        """One AdmissionReview round trip; the verified response."""
        w = hook.spec
        if a.dry_run and w.get("sideEffects") not in ("None", "NoneOnDryRun"):
            raise errors.bad_request(f'admission webhook "{hook.name}" does not support dry run')
        version = next((v for v in w.get("admissionReviewVersions") or [] if v in REVIEW_VERSIONS), None)
        if version is None:
            raise CallError(hook.name, "could not create admission objects: webhook does not accept known "
                                       "AdmissionReview versions (v1, v1beta1)", 400)
        uid = str(uuid.uuid4())
        await a.prepare(t)
        review = {"apiVersion": f"admission.k8s.io/{version}", "kind": "AdmissionReview",
                  "request": a.request(t, uid, a.versioned(t, a.obj), a.versioned(t, a.old))}
        try:
            answer = await self.client.post(w.get("clientConfig") or {}, review, float(w.get("timeoutSeconds") or 10))
            decode_review(answer, version)
        except (WebhookError, ValueError) as e:
            raise CallError(hook.name, f"failed to call webhook: {e}", 503 if hook.mutating else 400) from None
        try:
            resp = verify_response(answer, version, uid, hook.mutating)
        except ValueError as e:
            raise CallError(hook.name, f"received invalid webhook response: {e}") from None
        for k, v in (resp.get("auditAnnotations") or {}).items():
            a.add_annotation(f"{hook.name}/{k}", v)
        a.warnings += [str(x) for x in resp.get("warnings") or []]
        if not resp.get("allowed"):
            raise to_status_error(hook.name, resp.get("status"))
        return resp

    # --- mutating --------------------------------------------------------

    async def mutate(self, a: Attributes, state: MutationRound) -> None:
        if state.round and state.last_output != a.obj:
            # in-tree plugins changed the object on reinvocation: every reinvocable webhook runs again
            state.again |= set(state.called)
        for i, hook in enumerate(self.hooks(mutating=True)):
            t = await self.should_call(hook, a)
            if t is None or (state.round and hook.uid not in state.again):
                continue
            changed = bool(await self._observed(hook, a, self._mutate_one(hook, a, t),
                                                f"failed-open.mutation.webhook.admission.k8s.io/round_{state.round}_index_{i}"))
            a.add_annotation(f"mutation.webhook.admission.k8s.io/round_{state.round}_index_{i}",
                             orjson.dumps({"configuration": hook.config, "webhook": hook.name,
                                           "mutated": changed}).decode())
            if changed:
                # everything that can be reinvoked and ran before this change runs again
                state.again |= {uid for uid in state.called if uid != hook.uid}
                state.changed = True
            if hook.spec.get("reinvocationPolicy") == "IfNeeded":
                state.called[hook.uid] = None
        if not state.round and state.called:  # read only by a second round, and only to re-invoke `called`
            state.last_output = json_copy(a.obj)

    async def _mutate_one(self, hook: Hook, a: Attributes, t: Target) -> bool:
        resp = await self._call(hook, a, t)
        raw = resp.get("patch")
        if not raw:
            return False
        try:
            ops = orjson.loads(base64.b64decode(raw))
        except (ValueError, orjson.JSONDecodeError) as e:
            raise CallError(hook.name, f"received undecodable patch in webhook response: {e}") from None
        if not ops:
            return False
        if a.obj is None:
            raise errors.internal(f'admission webhook "{hook.name}" attempted to modify the object, '
                                  "which is not supported for this operation")
        if resp.get("patchType") != "JSONPatch":
            raise CallError(hook.name, f'unsupported patch type "{resp.get("patchType")}"')
        current = a.versioned(t, a.obj)
        try:
            patched = jsonpatch.apply(current, ops)
        except PatchError as e:
            raise errors.internal(str(e)) from None
        if not isinstance(patched, dict):
            raise errors.internal("json: cannot unmarshal the patched object into an object")
        if err := type_meta_error(self.rest.index, a, t, current, patched):
            raise _as_webhooks(err)
        try:
            patched = a.prune(t, patched, typed=True)
        except ValueError as e:  # upstream's dispatcher decodes the patched JSON: a 500
            raise errors.internal(str(e)) from None
        patched["apiVersion"], patched["kind"] = current["apiVersion"], current["kind"]
        if patched == current:
            return False
        await a.store_versioned(t, patched)
        return True

    # --- validating ------------------------------------------------------

    async def validate(self, a: Attributes) -> None:
        relevant = []
        for hook in self.hooks(mutating=False):
            t = await self.should_call(hook, a)
            if t is not None:
                relevant.append((hook, t))
        if not relevant:
            return
        results = await asyncio.gather(*(self._validate_one(h, a, t, i) for i, (h, t) in enumerate(relevant)),
                                       return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r

    async def _validate_one(self, hook: Hook, a: Attributes, t: Target, i: int) -> None:
        await self._observed(hook, a, self._call(hook, a, t),
                             f"failed-open.validating.webhook.admission.k8s.io/round_0_index_{i}")

    async def _observed(self, hook: Hook, a: Attributes, call: Awaitable[T], failed_open: str) -> T | None:
        """What `call` (one webhook's) returns, its outcome observed: a denial is raised; a call that
        failed is refused (500) unless the hook ignores failures, then None, `failed_open` annotated."""
        started = time.perf_counter()
        try:
            result = await call
        except (CallError, errors.APIError) as e:
            self._observe(hook, a, started, e)
            if not isinstance(e, CallError):
                raise
            if not hook.ignore_failures:
                raise errors.internal(str(e)) from None
            a.add_annotation(failed_open, hook.name)
            return None
        self._observe(hook, a, started, None)
        return result
