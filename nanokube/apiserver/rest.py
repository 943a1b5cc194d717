"""Generic REST storage: the semantics of every verb, for every resource.

This is the one place that turns a request into a store write: decoding
checks, defaulting, conversion, admission, validation, optimistic
concurrency, managed fields, graceful deletion and finalizers. Both
transports (HTTP handlers and the in-process client) call it, so their
semantics cannot drift.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import logging
import os
import random
import re
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any, AsyncIterator, Awaitable, Callable

import orjson

from .. import schema as schemas
from ..clock import Clock
from ..registry.base import STATUS_META, Resource, Strategy
from ..store.interface import KV, Compacted, KeyExists, KeyNotFound, RevisionMismatch, Store
from ..machinery import envknob, errors, featuregates, gofmt, goduration, gojson, strconv
from ..machinery.meta import new_uid
from ..machinery.user import User
from .cache import ADDED, DELETED, MODIFIED, CacheEvent, Entry, WatchCache, Watcher, stored_json
from ..machinery.selectors import matches_fields, matches_labels, parse_field_selector, parse_label_selector
from ..machinery.fieldorder import in_unstructured_order, in_upstream_order
from ..machinery.validation import immutable, invalid
from . import continuetoken, decoded_specs, omitempty, options, serializer, structural, warning
from .options import IGNORE_READ_ERROR
from .patch import PatchError, json_copy, jsonpatch, merge, strategic
from .patch import status as status_patch
from .patch import apply as ssa
from .patch import typed
from .turns import HELD, Turn, Turns

NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


#: upstream's name generator draws from math/rand, not a cryptographic source: a name is not a secret
_NAMES = random.Random()
#: NAME_CHARS two at a time, for name_suffix
_NAME_PAIRS = [a + b for a in NAME_CHARS for b in NAME_CHARS]
_SUFFIXES = len(NAME_CHARS) ** 5


def name_suffix(prefix: str) -> str:
    """Five random characters, as upstream's SimpleNameGenerator appends to generateName: 24 random
    bits, drawn again past 27**5, read as five base-27 digits, each as uniform as a draw of its own
    (five draws were most of ServiceAccount admission's token volume name)."""
    n = _NAMES.getrandbits(24)
    while n >= _SUFFIXES:
        n = _NAMES.getrandbits(24)
    return "".join((_NAME_PAIRS[n % 729], _NAME_PAIRS[n // 729 % 729], NAME_CHARS[n // 531441]))


log = logging.getLogger(__name__)
SYSTEM = User("system:apiserver", ("system:masters",))
#: how often a patch, an update naming no resourceVersion or a delete is made again after losing
#: a race with another write (upstream's GuaranteedUpdate and conditionalDelete retry until they
#: win; every round some writer wins, so this bound is only a guard: five rounds were lost in a row
#: to two clients patching one object on etcd)
PATCH_ATTEMPTS = 64
#: entries a list scans (and decodes, the first time) between yields to the event loop
LIST_CHUNK = 1024
#: upstream's blockTimeout, which no flag sets
BLOCK_TIMEOUT = 3.0
FUTURE_RV_WAIT_ENV = "NANOKUBE_FUTURE_RV_WAIT"


def future_rv_wait(env: Mapping[str, str] = os.environ) -> float:
    """BLOCK_TIMEOUT, or the shorter wait (seconds) NANOKUBE_FUTURE_RV_WAIT sets for tests that ask for
    many 504s. Any other value is named in a warning and the wait stays upstream's: this is read at
    import, where a refusal would be a traceback."""
    try:
        wait = envknob.seconds(env, FUTURE_RV_WAIT_ENV, lambda s: 0 < s <= BLOCK_TIMEOUT, "")
    except ValueError:
        log.warning("%s=%s is not a wait of more than 0 and at most %g seconds: a read at a future resourceVersion "
                    "waits %g s", FUTURE_RV_WAIT_ENV, env[FUTURE_RV_WAIT_ENV], BLOCK_TIMEOUT, BLOCK_TIMEOUT)
        return BLOCK_TIMEOUT
    return BLOCK_TIMEOUT if wait is None else wait


#: how long a read at a resourceVersion the cache has not reached waits for it
FUTURE_RV_WAIT = future_rv_wait()
#: a watch that allows bookmarks gets one this often, busy or idle, and its last this long before it times
#: out (upstream's cacher: defaultBookmarkFrequency, cacheWatcher.nextBookmarkTime's pre-timeout bookmark)
BOOKMARK_FREQUENCY = 60.0
BOOKMARK_BEFORE_TIMEOUT = 2.0
#: how long a watch waits on a conversion webhook that keeps failing before it ends (the cacher's
#: reflector's MaxInternalErrorRetryDuration)
WATCH_CONVERSION_RETRY = 30.0
#: the queued marker of a periodic bookmark that is due (`GenericREST._schedule_bookmark`)
_BOOKMARK_DUE = "BOOKMARK"
#: names a create drawn from generateName tries before a 409 (upstream's maxNameGenerationCreateAttempts:
#: a prefix's millionth name still collides with a chance of 0.1%, without retries its 4,500th half the time)
NAME_ATTEMPTS = 8
#: the longest generateName prefix a generated name keeps, so that with its five random characters it
#: fits 63 (upstream's SimpleNameGenerator: maxNameLength - randomLength)
GENERATED_PREFIX = 58
#: a write of an object this many bytes of JSON or more has its managed fields (a server-side apply, its
#: result) computed in a worker thread: linear work, but seconds of it for a pod of 10,000 containers,
#: that on the event loop would leave every other client unanswered meanwhile (loophold.py)
OFF_LOOP_OBJECT = 256 * 1024


@dataclass
class WriteOptions:
    dry_run: bool = False
    field_manager: str = ""
    field_validation: str = "Strict"  # Strict | Warn | Ignore
    force: bool = False
    user: User = field(default_factory=lambda: SYSTEM)
    #: a create's or an update's body, as sent when it is JSON, and the strict decoder's texts for the keys it
    #: repeats: reported with its unknown fields, as one decoder meets them (`_decode_checks`)
    body: bytes = b""
    duplicates: tuple[str, ...] = ()
    #: False: the in-process caller drops a create's response (an Event recorder's write), so it is the
    #: object as stored, not converted to the request's version (events.k8s.io/v1's from_core: ~22 k
    #: instructions of a FailedScheduling Event's ~714 k create)
    response: bool = True


@dataclass
class Result:
    obj: dict
    code: int = 200
    warnings: list[str] = field(default_factory=list)
    #: when `obj` is served as cached: the bytes stored, where their resourceVersion goes and the
    #: revision (`served_json` of them is `obj`'s JSON)
    stored: tuple[bytes, int, int] | None = None
    #: the object as stored that `obj` is served from: a Table's cells read it (transformResponseObject
    #: renders the write's own object, never the cache's, which may already hold a later write)
    internal: dict | None = None


def _converts(strategy: Strategy) -> bool:
    """Whether the strategy's conversion needs its asynchronous preparation (a CRD's webhook): the
    others' is a no-op, and a write path would await it three or four times."""
    return type(strategy).prepare_conversion is not Strategy.prepare_conversion


def _stored_before(res: Resource, version: str, obj: dict) -> bool:
    """A custom resource stored at another version than `version`, the storage version's (written
    before the CRD's storage version changed): it converts from the version it was stored at."""
    return _converts(res.strategy) and obj.get("apiVersion") != res.api_version(version)


def _event_objects(ev: CacheEvent, with_prev: bool) -> list[dict]:
    """What a watch converts of `ev`: its object, and the one before it where a selector matches
    that at the watch's version too."""
    return [ev.entry.obj, ev.prev.obj] if with_prev and ev.prev is not None else [ev.entry.obj]


def _in_stored_order(res: Resource, obj: dict) -> dict:
    """A dry run's object in the order its write would have stored and served it (stored_json's:
    Go's struct order, a custom resource's maps sorted), as upstream encodes the same struct either
    way; no resourceVersion where it has none (a create's)."""
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    if res.strategy.unstructured:
        out = in_unstructured_order(obj, rv or "")
    else:
        out = in_upstream_order(dict(obj), rv or "")
    if rv is None:
        del out["metadata"]["resourceVersion"]
    return out


def _meta(obj: dict) -> dict:
    md = obj.get("metadata")
    if not isinstance(md, dict):
        md = obj["metadata"] = {}
    return md


def _revision(resource_version: str) -> int:
    """A resourceVersion parameter as ParseResourceVersion reads it (strconv.ParseUint): ASCII digits only,
    no sign, space or underscore (which int() takes), below 2^64; otherwise the 400 of an invalid one."""
    try:
        return strconv.parse_uint(resource_version)
    except strconv.NumError:
        raise errors.bad_request(f'invalid resource version "{resource_version}"') from None


def _object_revision(resource_version: Any) -> int | None:
    """An object's metadata.resourceVersion on an update or patch as the store's versioner reads it
    (ObjectResourceVersion, strconv.ParseUint: "007" is 7, "0" asks for no version as none does); one
    that does not parse is _revision's 400 (upstream's raw strconv error is a 500). None for a value of
    another type, which matches no revision."""
    return _revision(resource_version) if isinstance(resource_version, str) else None


def _same_namespace(res: Resource, md: dict, requested: str | None) -> None:
    """EnsureObjectNamespaceMatchesRequestNamespace, as BeforeCreate and BeforeUpdate run it after mutating
    admission: a namespace a policy or webhook removed is the request's again, one it changed a 400."""
    if not res.namespaced:
        md.pop("namespace", None)
    elif not md.get("namespace"):
        md["namespace"] = requested
    elif md["namespace"] != requested:
        raise errors.bad_request("the namespace of the provided object does not match the namespace sent on the request")


def check_target(md: dict, name: str, namespace: str | None) -> None:
    """EnsureObjectNamespaceMatchesRequestNamespace, then checkName, as the update and patch handlers
    judge the object they are about to write (a /scale's Scale too): a 400 when it names another
    namespace or object, or none (ObjectName's errEmptyName: the URL's name is not taken for it)."""
    if namespace and md.get("namespace") and md["namespace"] != namespace:
        raise errors.bad_request("the namespace of the provided object does not match the namespace sent on the request")
    if not md.get("name"):
        raise errors.bad_request(f"the name of the object ({name} based on URL) was undeterminable: name must be provided")
    if md["name"] != name:
        raise errors.bad_request(f"the name of the object ({md['name']}) does not match the name on the URL ({name})")


class ResourceIndex:
    """Look-ups of served resources by (group, version, plural) and by kind."""

    def __init__(self, resources: list[Resource]):
        self.resources = resources
        self._by_gvr: dict[tuple[str, str, str], Resource] = {}
        self._by_gk: dict[tuple[str, str], Resource] = {}
        #: how the field manager shows a write at (group, version, plural) to managers of other
        #: versions (ssa.Convert), for the built-in resources whose versions differ in shape or whose
        #: storage another resource shares (events.k8s.io and core Events, autoscaling/v1 and v2, ...);
        #: the others' managers, custom resources' included, compare as the write's version shows them
        self.converters: dict[tuple[str, str, str], ssa.Convert] = {}
        #: `group_versions`' answer until a resource is added or removed (read by every discovery GET)
        self._group_versions: dict[str, list[str]] | None = None
        for r in resources:
            for v in r.versions:
                self._by_gvr[(r.group, v, r.plural)] = r
            self._by_gk[(r.group, r.kind)] = r
        for r in resources:
            self._shapes(r)

    def get(self, group: str, version: str, plural: str) -> Resource | None:
        return self._by_gvr.get((group, version, plural))

    def add(self, res: Resource) -> None:
        """Serve `res` from now on, in place of any resource of the same group and plural
        (custom resources come and change at run time)."""
        self.remove(res.group, res.plural)
        self._group_versions = None
        self.resources.append(res)
        for v in res.versions:
            self._by_gvr[(res.group, v, res.plural)] = res
        self._by_gk[(res.group, res.kind)] = res
        self._shapes(res)

    def remove(self, group: str, plural: str) -> Resource | None:
        old = next((r for r in self.resources if r.group == group and r.plural == plural), None)
        if old is not None:
            self._group_versions = None
            self.resources.remove(old)
            for v in old.versions:
                if self._by_gvr.get((group, v, plural)) is old:
                    del self._by_gvr[(group, v, plural)]
            if self._by_gk.get((group, old.kind)) is old:
                del self._by_gk[(group, old.kind)]
            for v in old.versions:
                self.converters.pop((group, v, plural), None)
        return old

    def by_kind(self, group: str, kind: str) -> Resource | None:
        return self._by_gk.get((group, kind))

    def _shapes(self, res: Resource) -> None:
        """The converters of `res`'s versions, and of those of a resource whose storage it shares."""
        if res.storage_alias:
            shared = [res, *(r for r in self.resources if (r.group, r.plural) == res.storage_alias)]
        elif type(res.strategy).from_storage is not Strategy.from_storage and not _converts(res.strategy):
            shared = [res]
        else:
            return
        for r in shared:
            for v in r.versions:
                self.converters[(r.group, v, r.plural)] = self._converter(r, v)

    def _converter(self, res: Resource, version: str) -> ssa.Convert:
        """Converts an object of `res` at `version` to another version of its kind through storage, or
        gives None where no resource stored with it serves that version."""
        def convert(obj: dict, api_version: str, at: str = ""):
            group, _, v = api_version.rpartition("/")
            other = res if group == res.group else self.by_kind(group, res.kind)
            if other is None or v not in other.versions or other.storage_resource != res.storage_resource:
                return None
            source, sv = res, version
            if at:  # `obj` is shown at another version than this converter's
                g, _, sv = at.rpartition("/")
                source = res if g == res.group else self.by_kind(g, res.kind)
                if source is None or sv not in source.versions:
                    return None
            stored = source.strategy.to_storage(json_copy(obj), sv)
            return schemas.kind_schema(group, v, res.kind), other.strategy.from_storage(stored, v)
        return convert

    def group_versions(self) -> dict[str, list[str]]:
        """group → served versions, preferred first: the aggregator's order of their APIServices,
        versionPriority first (a CRD's 100 outranks every built-in's, so a CRD version added to a
        built-in group becomes its preferred one, as upstream), then Kubernetes version order.
        Worked out once per set of resources: each discovery GET asks, and working it out took
        ~1 ms (every resource's versions walked, each group's sorted by a regular expression's
        key); callers do not change it."""
        if self._group_versions is not None:
            return self._group_versions
        from .aggregator.priorities import CRD_VERSION_PRIORITY, priority

        out: dict[str, list[str]] = {}
        for r in self.resources:
            vs = out.setdefault(r.group, [])
            for v in r.versions:
                if v not in vs:
                    vs.append(v)
        for g, vs in out.items():
            vs.sort(key=lambda v: (-(p[1] if (p := priority(g, v)) else CRD_VERSION_PRIORITY), version_priority(v)))
        self._group_versions = out
        return out


def version_priority(v: str) -> tuple:
    """Kubernetes version ordering: GA > beta > alpha, then higher numbers first."""
    import re

    m = re.match(r"^v(\d+)(?:(alpha|beta)(\d+))?$", v)
    if not m:
        return (3, v)
    major, level, minor = int(m.group(1)), m.group(2), int(m.group(3) or 0)
    rank = {None: 0, "beta": 1, "alpha": 2}[level]
    return (rank, -major, -minor)


class _ExpiredContinue(errors.APIError):
    """A continue token older than the watch cache's window (upstream: older than etcd's compaction):
    410 Expired, with a token that continues the list from the same key at the latest revision."""

    def __init__(self, token: str) -> None:
        super().__init__(410, "Expired", "The provided continue parameter is too old to display a consistent list result. "
                         "You can start a new list without the continue parameter, or use the continue token in this "
                         "response to retrieve the remainder of the results. Continuing with the provided token results "
                         "in an inconsistent list - objects that were created, modified, or deleted between the time "
                         "the first chunk was returned and now may show up in the list.")
        self.token = token

    def status(self) -> dict[str, Any]:
        s = super().status()
        s["metadata"] = {"continue": self.token}
        return s


class WatchStream:
    """An open watch; `aclose()` unregisters it even if it was never iterated.

    `translate(event)` is the (type, object) a live cache event becomes for this watch (None when
    its selectors drop it), for `Watcher.direct`; None when objects need asynchronous conversion."""

    def __init__(self, gen, cache: WatchCache, watcher: Watcher, translate=None):
        self._gen, self._cache, self._w = gen, cache, watcher
        self.watcher = watcher
        self.translate = translate

    def __aiter__(self):
        """The generator itself, whose `__anext__` is C: an `async for` (an informer's) calls no
        Python method per event."""
        return self._gen

    def __anext__(self) -> Awaitable[tuple[str, dict]]:
        """The generator's own awaitable, not a coroutine around it: one frame less per event."""
        return self._gen.__anext__()

    async def aclose(self) -> None:
        self._cache.remove_watcher(self._w)
        await self._gen.aclose()


#: the admission configurations that name webhooks (`_webhooks`)
_WEBHOOK_CONFIGURATIONS = ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")

#: the field of each resource that upstream's watch cache indexes its watchers by (its TriggerFunc: a
#: node's pods, a node by name), on which a watch's buffer depends (WatchCache.buffer_size)
_TRIGGERS = {("", "pods"): "spec.nodeName", ("", "nodes"): "metadata.name"}


def _trigger(res: Resource, field_selector: str) -> tuple[bool, bool]:
    """Whether `res` has a trigger field, and whether `field_selector` asks for one value of it."""
    field = _TRIGGERS.get((res.group, res.plural))
    if field is None:
        return False, False
    for term in field_selector.split(","):
        name, eq, _ = term.partition("=")
        if eq and not name.endswith("!") and name.strip() == field:
            return True, True
    return True, False


#: the type of an event whose selectors failed in a watch's `accept`: its stream matches them again
_UNJUDGED = "UNJUDGED"


def _verdict(ev: CacheEvent, ok) -> str | None:
    """The type a cache event is for a watch with the filter `ok` (an object that came to match it
    is ADDED, one that stopped matching DELETED), None when it drops it."""
    now_ok = ok(ev.entry.obj)
    typ = ev.type
    if typ == ADDED:
        return ADDED if now_ok else None
    if typ == DELETED:
        return DELETED if (ok(ev.prev.obj) if ev.prev else now_ok) else None
    was_ok = ok(ev.prev.obj) if ev.prev else False
    if now_ok:
        return MODIFIED if was_ok else ADDED
    return DELETED if was_ok else None


def _as_it_matched(ev: CacheEvent) -> Entry:
    """What a watch is sent for an event whose object stopped matching its selectors (DELETED): the
    previous object, the one the watch last saw matching, at the event's resourceVersion, as
    upstream's cacheWatcher sends it."""
    before = ev.prev.obj
    return Entry({**before, "metadata": {**before["metadata"], "resourceVersion": str(ev.rev)}}, ev.rev)


def _everything(obj: dict) -> bool:
    """The filter of a list or watch without selectors (`_filters`), which a watch's initial state
    then skips calling per object."""
    return True


#: the metadata fields a fieldSelector may name (Strategy.metadata_field_selectors)
_META_FIELDS = {"metadata.name": lambda o: o["metadata"].get("name"),
                "metadata.namespace": lambda o: o["metadata"].get("namespace")}


class GenericREST:
    def __init__(self, store: Store, cache: WatchCache, index: ResourceIndex, clock: Clock, admission=None):
        self.store = store
        self.cache = cache
        self.index = index
        self.clock = clock
        self.admission = admission
        #: the audit log (audit.AuditLog), which the loopback client reports in-process writes to; None when off
        self.audit = None
        #: answers a create of a review resource (auth/reviews.Reviews), for the loopback client as for HTTP; None: none
        self.reviews = None
        #: answers the loopback client's GET of a path outside this stack (the metrics APIs, an aggregated
        #: APIService's): `await raw_get(path, query, user)`, the document or an APIError; None: no such path
        self.raw_get = None
        #: generateName's suffix for a prefix; a simulation puts seeded draws here so its runs repeat
        self.name_suffix = name_suffix
        #: a created object's metadata.uid; a simulation puts seeded draws here too (a Job's PodGroup is named
        #: after its uid)
        self.new_uid = new_uid
        #: the last object `_external_once` served: (cached object, resource, version, served object)
        self._served: tuple = (None, None, None, None)
        #: the last event `_translate_unfiltered` translated: (cache event, resource, version, result)
        self._unfiltered: tuple = (None, None, None, None)
        #: the writes of each object that lost a race, taking turns (turns.py)
        self.turns = Turns(clock)
        #: keys whose stored values do not decrypt (encryption.store's), read and listed as corrupt objects
        self.unreadable: dict[str, str] = {}
        #: `await stale(key)`: whether the key's stored value was written by a provider that no longer writes
        #: (encryption.store's), which an unchanged update writes again, as upstream's GuaranteedUpdate reads
        #: the store before it skips a write (how `kubectl replace` and storage version migration move values
        #: to a new key); None: none is
        self.stale = None
        #: the watches' conversions under way (`_watch_conversion`), by strategy, version and the objects'
        #: ids (alive while their entry is here): (the objects, the task converting them)
        self._converting: dict[tuple, tuple[list, asyncio.Future]] = {}

    # --- helpers ---------------------------------------------------------

    def _external(self, res: Resource, obj: dict, version: str) -> dict:
        """The stored object as the client asked for it."""
        out = res.strategy.from_storage(obj, version)
        api_version = res.api_version(version)
        if out.get("apiVersion") != api_version or out.get("kind") != res.kind:
            out = {**out, "apiVersion": api_version, "kind": res.kind}
        return out

    def _result(self, res: Resource, obj: dict, version: str, code: int, warnings: list[str] | None = None) -> Result:
        """A write's response: the stored `obj` as the client asked for it."""
        return Result(self._external(res, obj, version), code, warnings or [], internal=obj)

    async def _as_requested(self, res: Resource, version: str, *objs: dict) -> tuple[dict, ...]:
        """What a custom resource's validation reads: the objects at the request's version, whose
        schema and rules are that version's (upstream's CR handler holds the request's version in
        memory and converts only to store), not the storage version's. Awaited for custom resources
        only: a built-in kind's are the objects themselves (the awaited call was ~1.5 k instructions
        of each pod create and status patch)."""
        if version == res.storage_version and not any(_stored_before(res, version, o) for o in objs):
            return objs
        await res.strategy.prepare_conversion(list(objs), version)
        return tuple(self._external(res, o, version) for o in objs)

    def _decode_checks(self, res: Resource, version: str, obj: Any, opts: WriteOptions,
                       changed: set[str] | None = None, held: list | None = None,
                       patched: _Patched | None = None) -> list[str]:
        """Generic decoding: a JSON object, the right kind, sane types; unknown
        fields per fieldValidation. Returns warnings. `changed` (a patch's result): the only
        top-level fields that can hold what the body brought in. `held` (a create's or an update's):
        where the empty lists its validation reads are (omitempty.drop). `patched`: `obj` is a patch's
        result, whose decoding errors are its (422)."""
        if not isinstance(obj, dict):
            raise errors.bad_request(f"Object '{res.kind}' is invalid: the body must be a JSON object")
        api_version = res.api_version(version)
        for f in ("apiVersion", "kind"):
            if obj.get(f) is not None and type(obj[f]) is not str:
                raise errors.bad_request(f'{res.kind} in version "{version}" cannot be handled as a {res.kind}: '
                                         f"json: cannot unmarshal {gojson.value_kind(obj[f])} into Go struct field "
                                         f"{res.kind}.{f} of type string")
        if obj.get("apiVersion") and obj["apiVersion"] != api_version:
            raise errors.bad_request(
                f"the API version in the data ({obj['apiVersion']}) does not match the expected API version ({api_version})"
            )
        if obj.get("kind") and obj["kind"] != res.kind:
            raise errors.bad_request(f"the kind in the data ({obj['kind']}) does not match the expected kind ({res.kind})")
        obj["apiVersion"], obj["kind"] = api_version, res.kind
        if obj.get("metadata") is not None and not isinstance(obj["metadata"], dict):
            raise errors.bad_request(
                f"{res.kind} in version \"{version}\" cannot be handled as a {res.kind}: json: cannot unmarshal "
                f"{type(obj['metadata']).__name__} into Go struct field {res.kind}.metadata of type v1.ObjectMeta"
            )
        sch = None
        number = gojson.find_out_of_range(obj) if serializer.OUT_OF_RANGE.get() else None
        unknown = res.strategy.decode(obj, version)
        if number is not None and unknown is not None:  # a custom resource's body: no struct skips it
            raise _out_of_range(res, version, number, obj, patched)
        if unknown is None:
            sch = schemas.kind_schema(res.group, version, res.kind)
            if sch is None:
                return self._strict_errors(res, version, obj, opts, [], False)
            # a remembered status patch's result: only apiVersion and kind, just set, are left to check
            errs, unknown = ([], []) if changed is _NO_FIELDS else _check_fields(obj, sch, changed, held)
            while errs and patched is not None and patched.smp and structural.convert_number(errs[0], obj):
                errs, unknown = _check_fields(obj, sch, changed, held)
            if errs:
                raise _undecodable(res.kind, version, obj, errs[0], patched)
            if (err := res.strategy.conversion_error(obj, version)) is not None:
                raise _undecodable(res.kind, version, obj, err, patched)
        warnings: list[str] = []
        if patched is None and opts.duplicates:
            warnings = self._strict_errors(res, version, obj, opts, unknown, sch is not None)
        elif opts.field_validation == "Strict" and (unknown or (patched is not None and patched.duplicates)):
            if patched is None:
                raise _undecodable(res.kind, version, obj, structural.strict_error(unknown), None)
            raise _undecodable(res.kind, version, obj, patched.strict_error(unknown or []), patched)
        elif unknown and opts.field_validation == "Warn":
            warnings = structural.unknown_field_warnings(patched.unknown_order(unknown) if patched else unknown)
        if unknown and sch is not None:
            pruned = structural.prune(obj, sch)
            obj.clear()
            obj.update(pruned)
        if number is not None and (number := gojson.find_out_of_range(obj)) is not None:  # in a raw field
            raise _out_of_range(res, version, number, obj, patched)
        warning.record(warnings)  # kept for the response should the write fail after decoding
        return warnings

    @staticmethod
    def _strict_errors(res: Resource, version: str, obj: dict, opts: WriteOptions, unknown: list[str],
                       typed: bool) -> list[str]:
        """A body's repeated keys with its unknown fields, all one strict decoding error (Strict, a 400)
        or each a warning (Warn): a YAML body's (YAMLToJSONStrict's error) before its unknown fields, a
        custom resource's (the JSON decoder's) before the schema's unknown fields, a kind's in the order
        its JSON decoder meets them."""
        if opts.body and typed:
            texts = serializer.strict_order(opts.body, [t[17:-1] for t in opts.duplicates], unknown)
        else:
            texts = [*opts.duplicates, *structural.unknown_field_warnings(unknown)]
        if opts.field_validation == "Strict":
            raise _undecodable(res.kind, version, obj, "strict decoding error: " + ", ".join(texts), None)
        texts = warning.strict_decoding(texts)
        warning.record(texts)
        return texts

    def _manager(self, opts: WriteOptions, default: str) -> str:
        return opts.field_manager or default

    def _track_fields(self, res: Resource, version: str, old: dict | None, new: dict, opts: WriteOptions,
                      subresource: str = "", sent: dict | None = None, known: tuple | None = None,
                      sent_old: dict | None = None) -> list | None:
        """The managedFields of an Update of `old` (None: a create) to `new`, both in storage shape, as
        upstream's field manager records them: in the request's version (a kind whose versions differ
        in shape is compared as `version` shows it, other managers' fields in their own versions).
        `sent`: `new` as the request gave it at `version`, where the caller holds it (no conversion);
        `sent_old`: `old` at `version`, where the caller converted it already (a patch's live object).
        `known`: a create's (map, its shape.signature) for a map of `new` whose shape is known."""
        sch = schemas.kind_schema(res.group, version, res.kind)
        convert = self.index.converters.get((res.group, version, res.plural))
        if convert is not None or (_converts(res.strategy) and version != res.storage_version):
            new = sent if sent is not None else res.strategy.from_storage(new, version)
            if old is not None:
                old = sent_old if sent_old is not None else res.strategy.from_storage(old, version)
        elif old is not None and _stored_before(res, version, old):
            old = res.strategy.from_storage(old, version)
        ignore_status = "status" in res.subresources
        manager, now, api_version = self._manager(opts, "unknown"), self.clock.rfc3339(), res.api_version(version)
        if old is None:
            return ssa.create_managed_fields(new, manager, sch, now, api_version, ignore_status, convert, decoded=True,
                                             known=known)
        return ssa.update_managed_fields(
            old, new, manager, "Update", sch, now, api_version, subresource=subresource, ignore_status=ignore_status,
            convert=convert, decoded=True).get("metadata", {}).get("managedFields")

    async def _mutating_admission(self, res: Resource, version: str, subresource: str, op: str, obj: dict | None,
                                  old: dict | None, opts: WriteOptions, options: dict | None = None):
        """Mutating admission; returns the object it leaves and the request's attributes."""
        if self.admission is None:
            return obj, None
        a = self.admission.attributes(res, version, subresource, op, obj, old, opts, options)
        try:
            step = self.admission.mutate(a)
            await (step if HELD.get() is None else self._admitted(res, step))
        except errors.APIError as e:
            self.admission.publish(a, e)
            raise
        warning.record(a.warnings)  # a mutating webhook's warnings stay on the response should the write fail
        return a.obj, a

    async def _validating_admission(self, a, obj: dict | None) -> list[str]:
        """Validating admission of the final object; returns the admission warnings."""
        if a is None:
            return []
        a.obj = obj
        try:
            step = self.admission.validate(a)
            await (step if HELD.get() is None else self._admitted(a.res, step))
        except errors.APIError as e:
            self.admission.publish(a, e)
            raise
        return self.admission.publish(a)

    async def _admitted(self, res: Resource, step: Awaitable[None]) -> None:
        """Awaits an admission `step` of a write holding its turn (turns.py), which it sets aside meanwhile
        where a webhook may answer (a webhook's wait held every other writer of the key), and waits for
        again after; where none is configured (policies run in-process), the step keeps the turn."""
        turn = HELD.get()
        if not self._webhooks(res):
            await step
            return
        turn.set_aside()
        await step
        await turn.take_back()

    def _webhooks(self, res: Resource) -> bool:
        """Whether admission of a write to `res` may call a webhook (a webhook configuration exists)."""
        a = self.admission
        return a.shows_objects(res) and a.configs.derived(
            "webhooks", lambda: any(a.configs.objects(plural) for plural in _WEBHOOK_CONFIGURATIONS))

    @staticmethod
    def _warned(a, warnings: list[str]) -> list[str]:
        """A strategy's warnings where upstream's BeforeCreate/BeforeUpdate records them, after mutating
        admission's and before validating admission's: into the request's admission warnings when it
        has them (an admission refusal's headers carry them then, as upstream's); else returned."""
        if a is None or not warnings:
            return warnings
        a.warnings += warnings
        return []

    @staticmethod
    def _admitted_fields(a, md: dict, before: list | None) -> list | None:
        """The managedFields to store once mutating admission changed the ones tracked `before` it:
        its own, or `before` again (with a warning) where it left them unreadable, as upstream's
        managedFieldsValidatingAdmissionController does."""
        problem = ssa.managed_fields_problem(md.get("managedFields"))
        if problem is None:
            return md.get("managedFields")
        _set_managed_fields(md, before)
        a.warnings.append(".metadata.managedFields was in an invalid state after admission; this could be caused "
                          "by an outdated mutating admission controller; please fix your requests: " + problem)
        return before

    def _invalid(self, res: Resource, obj: dict, errs) -> errors.APIError:
        return errors.invalid(res.group, res.kind, _meta(obj).get("name") or _meta(obj).get("generateName", ""), errs)

    async def _reserve(self, res: Resource, obj: dict, old: dict | None) -> list:
        """The store records of the values `obj` is given (Strategy.reservations)."""
        made, errs = await res.strategy.reservations.reserve(obj, old)
        if errs:
            raise self._invalid(res, obj, errs)
        return made

    async def _write_wait(self, rev: int) -> None:
        await self.cache.wait_for(rev)

    async def _delete_written(self, res: Resource, key: str, rev: int, prev, released: dict, freed: dict,
                              written: list | None = None) -> KV:
        """The store's delete (of revision `rev`; `prev` the caller's KV), waited for in the cache, then the
        values the object held let go: `released`'s in the allocators (Strategy.release), `freed`'s
        records with several workers (reservations.free). Made, they are let go even if the request ends
        meanwhile: a Service's delete goes on in a task of its own, as its create does. `written`: an
        update's that deletes (`released` over `freed`, its values prepared), where the store's answer
        goes once made; a cancelled request's write then finishes those values itself as it ends."""
        write = self.store.delete(key, rev, prev)
        if type(res.strategy).release is Strategy.release:
            kv = await write
            if written is not None:
                written.append(kv)
            await self._write_wait(kv.mod_revision)
            return kv
        finish = None if written is None else functools.partial(res.strategy.finish_update, released, freed)

        async def let_go() -> None:
            res.strategy.release(released)
            if res.strategy.reservations is not None:
                await res.strategy.reservations.free(freed)

        def made() -> None:
            if finish is not None:
                finish(True)
            _hold(asyncio.ensure_future(let_go()))

        kv = await _unabandoned(write, unmade=finish and functools.partial(finish, False), made=made)
        if written is not None:
            written.append(kv)
        try:
            await self._write_wait(kv.mod_revision)
        finally:  # the write is made: let go even if the request ends here
            await let_go()
        return kv

    def _entry(self, res: Resource, namespace: str | None, name: str):
        e = self.cache.get(res.key(namespace, name))
        if e is None:
            if self.unreadable and (key := res.key(namespace, name)) in self.unreadable:
                from .encryption.corrupt import unreadable_error

                raise unreadable_error([res.etcd_key(key)])
            raise errors.not_found(res.group, res.plural, name)
        return e

    # --- reads -----------------------------------------------------------

    async def get(self, res: Resource, version: str, namespace: str | None, name: str, resource_version: str = "") -> dict:
        """The object; without a `resource_version` the most recent, a consistent read as upstream's from
        etcd: the cache first catches up with the store's revision (another API server on it may have just
        written; on SQLite and the memory store, whose cache follows every local commit, a memory read).
        With one (other than "0") as the watch cache's Get serves it: not older than that revision,
        waited for up to FUTURE_RV_WAIT, then the 504 Too large resource version. HTTP and the loopback
        client (the controllers in `up`) both read through here."""
        if not resource_version:
            await self.cache.sync()
        elif resource_version != "0":
            want = _revision(resource_version)
            if want > self.cache.rev:
                try:
                    await self.cache.wait_for(want, FUTURE_RV_WAIT)
                except TimeoutError:
                    raise _too_large_resource_version(want, self.cache.rev) from None
        obj = self._entry(res, namespace, name).obj
        await res.strategy.prepare_conversion([obj], version)
        return self._external(res, obj, version)

    def _filters(self, res: Resource, version: str, label_selector: str, field_selector: str):
        """(ok, everything, at_version): `ok` matches an object as `version` has it; `at_version`:
        the selectors read more than a name, of a kind whose conversion may change it (a CRD's
        webhook), so each object is matched converted to `version`, as upstream's per-version CR
        storage matches the object it decoded to that version."""
        if not label_selector and not field_selector:
            return _everything, True, False
        lreqs = parse_label_selector(label_selector) if label_selector else None
        freqs = None
        if field_selector:
            supported = {f: _META_FIELDS[f] for f in res.strategy.metadata_field_selectors}
            supported.update(res.strategy.field_selectors_at(version))
            freqs = parse_field_selector(field_selector, supported,
                                         lambda label: res.strategy.unsupported_field_label(label, version))

        def ok(obj: dict) -> bool:
            if lreqs is not None and not matches_labels(lreqs, obj["metadata"].get("labels")):
                return False
            if freqs is not None and not matches_fields(freqs, obj):
                return False
            return True

        at_version = res.strategy.converts_fields and (lreqs is not None or any(
            fn not in _META_FIELDS.values() for fn, _, _ in freqs or ()))
        return ok, lreqs is None and freqs is None, at_version

    async def _at_version(self, res: Resource, version: str, objs: list[dict]) -> list[dict]:
        """`objs` as the selectors of a list at `version` read them: converted (in one webhook
        call) where stored at another version, the others as they are."""
        api = res.api_version(version)
        todo = [o for o in objs if o.get("apiVersion") != api]
        if not todo:
            return objs
        await res.strategy.prepare_conversion(todo, version)
        return [self._external(res, o, version) if o.get("apiVersion") != api else o for o in objs]

    async def list(
        self, res: Resource, version: str, namespace: str | None, *, label_selector: str = "",
        field_selector: str = "", limit: int = 0, continue_: str = "", resource_version: str = "",
        resource_version_match: str = "", send_initial_events: bool | None = None, encoded: list | None = None,
    ) -> tuple[list[dict], dict]:
        """Returns (items at `version`, list metadata). `encoded`, when given, receives each item's
        cached JSON (None for an item converted for `version`), so a response joins bytes."""
        # (the selectors first: upstream decodes them with the list options, before any resourceVersion check)
        ok, everything, at_version = self._filters(res, version, label_selector, field_selector)
        errs = options.list_options_errors(False, resource_version, resource_version_match, send_initial_events, continue_)
        if errs:
            raise options.options_invalid("ListOptions", errs)
        if continue_ and resource_version not in ("", "0"):
            raise errors.bad_request("specifying resource version is not allowed when using continue")
        if resource_version == "0" and not continue_:
            limit = 0  # the watch cache's computeListLimit: "the limit is ignored for requests that set RV == 0"
        # a page at a resourceVersion without a match is at that exact revision (ValidateListOptions'
        # legacy case), as a continue token's pages are
        exact = resource_version_match == "Exact" or bool(limit and not resource_version_match
                                                          and resource_version not in ("", "0"))
        if resource_version not in ("", "0"):
            want = _revision(resource_version)
            if exact and want != self.cache.rev:
                # an exact revision the cache cannot serve is etcd's to answer, as the cacher delegates it:
                # a future one is GetList's ErrFutureRev (504, no retry hint), a compacted one ErrCompacted
                if want > self.cache.rev:
                    await self.cache.sync()
                    if want > self.cache.rev:
                        raise _too_large_resource_version(want, self.cache.rev, retry=0)
            try:
                await self.cache.wait_for(want, FUTURE_RV_WAIT)
            except TimeoutError:
                raise _too_large_resource_version(want, self.cache.rev) from None
        elif resource_version == "":
            await self.cache.sync()
        prefix = res.key_prefix(namespace)
        if self.unreadable and (bad := sorted(k for k in self.unreadable if k.startswith(prefix))):
            from .encryption.corrupt import unreadable_error

            raise unreadable_error([res.etcd_key(k) for k in bad])
        start, at = continuetoken.decode(continue_, prefix) if continue_ else ("", 0)
        if at > self.cache.rev:  # a token from the future (made up): etcd's ErrFutureRev, as GetList reports it
            await self.cache.sync()
            if at > self.cache.rev:
                raise _too_large_resource_version(at, self.cache.rev, retry=0)
        if exact:
            at = want  # the collection as it was then, answered with that revision (and paged at it)
        # without selectors a page needs only its own entries (and one more, to know there are more);
        # a continued list reads the revision its first page did (rv -1: the latest, as upstream's)
        n = limit + 1 if limit and everything else 0
        try:
            total, entries = self.cache.scan(prefix, start, n, rev=max(at, 0))
        except Compacted:  # older than the cache reaches: the store's to serve (etcd's history), as the cacher's
            try:
                total, kvs = await self.cache.store.list_at(prefix, at, start, n)
            except Compacted:
                if continue_:
                    raise _ExpiredContinue(continuetoken.encode(start, prefix, -1)) from None
                raise errors.gone("The resourceVersion for the provided list is too old.") from None
            entries = self.cache.stored(prefix, kvs)
        rev = at if at > 0 else self.cache.rev
        out: list[Entry] = []
        remaining = 0
        more = False
        last_key = ""
        objs = views = None
        chosen: list[int] = []  # with `views`: the indexes of the entries matched
        if at_version:
            objs = [e.obj for _, e in entries]
            views = await self._at_version(res, version, objs)
        if everything:  # the entries are the page, and one more when there are more
            page = entries[:limit] if limit else entries
            out = [e for _, e in page]
            if len(entries) > len(page):
                remaining, last_key = total - limit, page[-1][0]
        for i, (key, e) in enumerate(() if everything else entries):
            if i % LIST_CHUNK == LIST_CHUNK - 1:
                await asyncio.sleep(0)  # a list of many objects lets other requests (readyz) through
            if limit and len(out) >= limit:
                # the cacher's hasMore: anything after the page's last item, whether it matches or not;
                # and no remainingItemCount, which it counts only for a list without selectors
                more = True
                break
            if not ok(e.obj if views is None else views[i]):
                continue
            out.append(e)
            last_key = key
            if views is not None:
                chosen.append(i)
        self.cache.stats.listed(prefix, len(entries), len(out))
        meta: dict[str, Any] = {"resourceVersion": str(rev)}
        if remaining or more:
            meta["continue"] = continuetoken.next_after(last_key, prefix, rev)
        if remaining:
            meta["remainingItemCount"] = remaining
        if views is None:
            objs = Entry.objects(out)
            await res.strategy.prepare_conversion(objs, version)
            items = [self._external(res, o, version) for o in objs]
        else:  # those converted to be matched are served as they are
            items = [views[i] if views[i] is not objs[i] else self._external(res, objs[i], version) for i in chosen]
        if encoded is not None:
            encoded.extend(Entry.kept_json(out, items))
        return items, meta

    async def watch(
        self, res: Resource, version: str, namespace: str | None, *, resource_version: str = "",
        label_selector: str = "", field_selector: str = "", send_initial_events: bool | None = None,
        allow_bookmarks: bool = False, timeout: float | None = None, name: str | None = None,
        resource_version_match: str = "", continue_: str = "", forced: bool = False, periodic_bookmarks: bool = True,
    ) -> AsyncIterator[tuple[str, dict]]:
        """Validates the request and registers the watcher (raising APIError
        before anything is streamed), then returns the stream of (type, object
        at `version`) pairs. Objects that stop (start) matching the selectors
        arrive as DELETED (ADDED), as upstream does. A `forced` watch (a legacy /watch/ path without
        ?watch) has a list's options, as ListResource's forceWatch: no watch-list defaults, a list's rules.
        `timeout`: the seconds the watch is served, for its last bookmark just before it ends.
        `periodic_bookmarks` False: a watch allowing bookmarks gets only the initial-events-end one
        (the in-process client's streaming lists, which a simulated run's clock would otherwise wake)."""
        ok, everything, at_version = self._filters(res, version, label_selector, field_selector)
        if at_version:  # matched on the object `_stream` had converted (`_external` then reads its conversion)
            selects = ok
            ok = lambda o: selects(self._external(res, o, version))  # noqa: E731
        match = resource_version_match
        if not forced:
            match, send_initial_events = options.watch_list_defaults(resource_version, match, send_initial_events)
        errs = options.list_options_errors(not forced, resource_version, match, send_initial_events, continue_)
        if errs:
            raise options.options_invalid("ListOptions", errs)
        if name:
            base_ok = ok
            ok = lambda o: o["metadata"].get("name") == name and base_ok(o)  # noqa: E731
        prefix = res.key_prefix(namespace)

        def accept(ev: CacheEvent) -> CacheEvent | bool | None:
            if not ev.key.startswith(prefix):
                return False
            if (everything and not name) or at_version:  # (an object to convert is judged in `_stream`)
                return True
            # the event as the selectors make it, judged here once (`_translate_judged` takes its type):
            # one whose object matches neither before nor after is dropped, so the watch's task is not
            # woken for it (the node agents' and taint eviction's `spec.nodeName!=` watches were handed
            # every write of every pending pod)
            try:
                typ = _verdict(ev, ok)
            except Exception:  # judged again in the stream, which meets the same error, as before
                return CacheEvent(_UNJUDGED, ev.key, ev.entry, ev.prev, ev.rev)
            if typ is None or typ == ev.type:
                return typ is not None
            return CacheEvent(typ, ev.key, _as_it_matched(ev) if typ == DELETED else ev.entry, ev.prev, ev.rev)

        w = Watcher(prefix, accept, size=self.cache.buffer_size(prefix, *_trigger(res, field_selector)))
        listed: list[Entry] = []  # the state a watch from "" or "0" (or a watch-list) starts with, as ADDED events
        initial: list[CacheEvent] = []
        if resource_version in ("", "0") or send_initial_events:
            if resource_version == "":
                await self.cache.sync()
            elif resource_version != "0":  # a watch-list's initial state is at least as new as what it names
                want = _revision(resource_version)
                try:
                    await self.cache.wait_for(want, FUTURE_RV_WAIT)
                except TimeoutError:
                    raise _too_large_resource_version(want, self.cache.rev) from None
            self.cache.add_watcher(w)
            rev = self.cache.rev
            if send_initial_events is not False:
                listed = [e for _, e in self.cache.list(prefix)]
        else:
            rev = _revision(resource_version)
            try:
                initial = self.cache.events_since(rev, prefix)
            except Compacted as c:
                raise errors.gone(f"too old resource version: {rev} ({c.compacted})") from None
            self.cache.add_watcher(w)
            # events that raced in between are in both; skip by revision below
        self.cache.stats.watched(prefix, len(listed) + len(initial))
        deadline = self.clock.monotonic() + timeout if timeout else None
        translate = None
        if not _converts(res.strategy):  # (partials, not lambdas: no Python frame of their own per watch and event)
            if everything and not name:
                translate = functools.partial(self._translate_unfiltered, res, version)
            else:
                translate = functools.partial(self._translate_judged, res, version, ok=ok, external=self._external_once)
        gen = self._stream(res, version, w, listed, initial, rev, ok, send_initial_events, allow_bookmarks, deadline,
                           translate, at_version, periodic_bookmarks)
        return WatchStream(gen, self.cache, w, translate)

    async def _stream(self, res, version, w, listed, initial, rev, ok, send_initial_events, allow_bookmarks, deadline,
                      translate, at_version=False, periodic_bookmarks=True):
        """`translate`: WatchStream.translate, which the live events of a kind without asynchronous
        conversion take too: the watches of a resource that the cache woke for one event (every
        in-process informer of pods) then share its translation, made by the first. `at_version`:
        `ok` matches an event's previous object converted too. `listed`: entries sent as ADDED events
        first, each read, matched and served as a LIST's item (a streaming list of 10,000 pods was an
        event made and translated per object); `initial`: the events since the revision asked for."""
        timer = None
        try:
            converts = translate is None  # a CRD's webhook: still one conversion an object, as an event's
            everything = ok is _everything
            for obj in Entry.objects(listed):
                if converts and not await self._watch_conversion(res, [obj], version, deadline):
                    return
                if everything or ok(obj):
                    w.stored = obj
                    yield ADDED, self._external(res, obj, version)
            last = 0
            for ev in initial:
                if ev.type != ADDED or ev.prev is not None:
                    last = max(last, ev.rev)
                if not await self._watch_conversion(res, _event_objects(ev, at_version), version, deadline):
                    return
                out = self._translate(res, version, ev, ok, self._external)
                if out:
                    w.stored = ev.entry.obj
                    yield out
            high = max(last, rev)
            if send_initial_events and allow_bookmarks:
                # the revision the initial events show, not the cache's by now: writes made while they went
                # out are queued, and come after the bookmark with newer revisions
                yield ("BOOKMARK", self._bookmark(res, version, high, initial_end=True))
            if allow_bookmarks and periodic_bookmarks:
                timer = self._schedule_bookmark(w, deadline)
            while True:
                ev = await w.queue.get()
                if ev is None:
                    return
                if ev.type is _BOOKMARK_DUE:
                    yield ("BOOKMARK", self._bookmark(res, version, ev.rev))
                    timer = self._schedule_bookmark(w, deadline)
                    continue
                if ev.rev <= high:
                    continue
                high = ev.rev
                if translate is not None:
                    out = translate(ev)
                else:
                    if not await self._watch_conversion(res, _event_objects(ev, at_version), version, deadline):
                        return
                    out = self._translate(res, version, ev, ok, self._external)
                if out:
                    e = ev.entry
                    w.stored = e._obj or e.obj  # (the slot straight: the property's frame only where it decodes)
                    yield out
        finally:
            if timer is not None:
                timer.cancel()
            self.cache.remove_watcher(w)

    async def _watch_conversion(self, res, objs: list, version: str, deadline: float | None = None) -> bool:
        """Converts `objs` for a watch (a CRD's webhook); False once the conversion has failed for
        WATCH_CONVERSION_RETRY, or the watch's `deadline` (timeoutSeconds, on the injected clock) came
        first, when the watch ends without an ERROR event. So upstream's watch
        cache of the version behaves: its reflector decodes, and so converts, each event once for
        every watch of the version, and retries the storage watch whose event it could not convert
        for 30 s (MaxInternalErrorRetryDuration), the watchers waiting and then getting that event,
        or else ends every watch of the version and relists. Here the watches that reach the same
        objects at the same version share one attempt each second (`_conversion_attempts`): N watches
        of a failing webhook's kind asked it N times a second."""
        while not res.strategy.converted(objs, version):  # none needed, or made for another watch: read in this step
            key = (id(res.strategy), version, *map(id, objs))
            held = self._converting.get(key)
            if held is None:
                task = asyncio.ensure_future(self._conversion_attempts(res, objs, version))
                self._converting[key] = (objs, task)
                task.add_done_callback(lambda _, key=key: self._converting.pop(key, None))
            else:
                task = held[1]
            if deadline is None:
                if not await asyncio.shield(task):
                    return False
                continue
            # the attempts go on for the other watches sharing them; this one ends at its timeout, as
            # upstream's cacheWatcher does whatever its events wait on
            timer = asyncio.ensure_future(self.clock.sleep(max(deadline - self.clock.monotonic(), 0.0)))
            try:
                await asyncio.wait((task, timer), return_when=asyncio.FIRST_COMPLETED)
            finally:
                timer.cancel()
            if not (task.done() and task.result()):
                return False
        return True

    async def _conversion_attempts(self, res, objs: list, version: str) -> bool:
        """`_watch_conversion`'s shared attempts: one each second until one succeeds (True) or they
        have failed for WATCH_CONVERSION_RETRY (False)."""
        failing_since = None
        while True:
            try:
                await res.strategy.prepare_conversion(objs, version, True)
                return True
            except errors.APIError as e:
                now = self.clock.monotonic()
                if failing_since is None:
                    failing_since = now
                elif now - failing_since >= WATCH_CONVERSION_RETRY:
                    log.info("watches of %s at %s ended: conversion failing for %gs: %s", res.plural, version,
                             WATCH_CONVERSION_RETRY, e.message)
                    return False
                await self.clock.sleep(1.0)

    def _schedule_bookmark(self, w: Watcher, deadline: float | None) -> asyncio.Task | None:
        """Queues `w`'s next periodic bookmark when it is due on the injected clock, behind the events
        queued before it: a minute on, or just before the watch's deadline when that comes first (none
        when that has passed), as the cacher's nextBookmarkTime. It carries the cache's revision when it
        is queued, which every event before it in the queue (or handed to the watch directly) is at or
        below, so a client resuming from it misses nothing; sent by time, not after a quiet spell."""
        now = self.clock.monotonic()
        due = now + BOOKMARK_FREQUENCY
        if deadline is not None:
            due = min(due, deadline - BOOKMARK_BEFORE_TIMEOUT)
        if due <= now:
            return None

        async def fire() -> None:
            await self.clock.sleep(due - now)
            w.queue.put_nowait(CacheEvent(_BOOKMARK_DUE, "", None, None, self.cache.rev))

        return asyncio.get_running_loop().create_task(fire())

    def _bookmark(self, res: Resource, version: str, rev: int, initial_end: bool = False) -> dict:
        md: dict[str, Any] = {"resourceVersion": str(rev)}
        if initial_end:
            md["annotations"] = {"k8s.io/initial-events-end": "true"}
        return {"kind": res.kind, "apiVersion": res.api_version(version), "metadata": md}

    def _external_once(self, res: Resource, obj: dict, version: str) -> dict:
        """`_external` for the direct watches (`WatchStream.translate`), which only encode what they
        are handed: the watch cache hands an event to all of a resource's watches in one loop, so
        the object they are served is made once per event and version, not once per watch. A
        converted object (events.k8s.io/v1 Events, autoscaling/v1 HPAs) was a new dict per watch,
        which also missed the encoded-line memo (`WatchCache.encode_event`): 12-22 us per watch
        and event, ~2 us now after the first."""
        served = self._served
        if served[0] is obj and served[1] is res and served[2] == version:
            return served[3]
        out = self._external(res, obj, version)
        self._served = (obj, res, version, out)
        return out

    def _translate_unfiltered(self, res: Resource, version: str, ev: CacheEvent) -> tuple[str, dict]:
        """`WatchStream.translate` of a watch without selectors: the same for every such watch of
        the resource and version, so made once per event and handed to the others as it is
        (translating it per watch was the largest part of the cache's fan-out loop)."""
        last = self._unfiltered
        if last[0] is ev and last[1] is res and last[2] == version:
            return last[3]
        # `_translate` with a filter that keeps everything: the event's own type, but an ADDED for a
        # MODIFIED that has no previous object
        typ = ev.type if ev.prev is not None or ev.type != MODIFIED else ADDED
        out = (typ, self._external_once(res, ev.entry.obj, version))
        self._unfiltered = (ev, res, version, out)
        return out

    def _translate(self, res: Resource, version: str, ev: CacheEvent, ok, external) -> tuple[str, dict] | None:
        """The (type, object) a cache event is for a watch with the filter `ok`, None when it drops
        it; `external` is `_external` or `_external_once`."""
        typ = _verdict(ev, ok)
        if typ is None:
            return None
        # (an object a webhook converts is sent as it is now: only the event's own objects were converted)
        stopped = typ == DELETED and ev.type != DELETED and not _converts(res.strategy)
        return typ, external(res, (_as_it_matched(ev) if stopped else ev.entry).obj, version)

    def _translate_judged(self, res: Resource, version: str, ev: CacheEvent, ok, external) -> tuple[str, dict] | None:
        """`_translate` of a live event that the watch's `accept` has judged already (its type is the
        one the selectors make it), so they are not matched again."""
        if ev.type is _UNJUDGED:
            return self._translate(res, version, ev, ok, external)
        return ev.type, external(res, ev.entry.obj, version)

    # --- create ----------------------------------------------------------

    async def create(self, res: Resource, version: str, namespace: str | None, body: Any, opts: WriteOptions,
                     managed_fields: list | None = None, large: bool | None = None) -> Result:
        """`large`: whether the object is large (rest._large), where the caller knows."""
        held: list = []
        if large is None:  # judged once: its decoding, tracking and validation leave the loop alike
            large = _large(body, len(opts.body))
        spec_key = decoded_specs.key(res.strategy, res.kind, version, body, bool(opts.duplicates)
                                     or serializer.OUT_OF_RANGE.get())
        remembered = decoded_specs.find(spec_key, body["spec"]) if spec_key is not None else None
        # a spec remembered decoded and defaulted: only the rest of the body is decoded
        args = (res, version, body, opts, None if remembered is None else body.keys() - _SPEC, held)
        if large:
            warnings = await asyncio.to_thread(self._decode_checks, *args)
        else:  # called, not awaited through _computed: ~3 k less a small write
            warnings = self._decode_checks(*args)
        obj = body
        md = _meta(obj)
        if res.namespaced:
            if md.get("namespace") and namespace and md["namespace"] != namespace:
                raise errors.bad_request("the namespace of the provided object does not match the namespace sent on the request")
            md["namespace"] = namespace or md.get("namespace")
        else:
            md.pop("namespace", None)
        known = None
        if remembered is not None:
            obj["spec"], signature = remembered.copy()
            known = (obj["spec"], signature)
        else:
            res.strategy.default(obj, version)
            if spec_key is not None and not held and not warnings and opts.field_validation != "Ignore":
                decoded_specs.remember(spec_key, obj["spec"])  # decoded clean: nothing unknown, nothing held
        if _converts(res.strategy):
            await res.strategy.prepare_conversion([obj], res.storage_version)
        sent, obj = obj, res.strategy.to_storage(obj, version)  # a kind of many shapes converts to a new object
        if managed_fields is None:  # tracked before admission, as upstream's create handler does
            args = (res, version, None, obj, opts, "", sent, known)
            if large:
                managed_fields = await asyncio.to_thread(self._track_fields, *args)
            else:
                managed_fields = self._track_fields(*args)
        _set_managed_fields(_meta(obj), managed_fields)  # what admission sees, as upstream's
        requested = md.get("namespace")
        obj, admission = await self._mutating_admission(res, version, "", "CREATE", obj, None, opts)
        md = _meta(obj)
        _same_namespace(res, md, requested)
        if md.get("managedFields") is not managed_fields:
            managed_fields = self._admitted_fields(admission, md, managed_fields)
        if md.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        generated = not md.get("name") and bool(md.get("generateName"))
        if generated:
            md["name"] = self._generated_name(md["generateName"])
        md["uid"] = self.new_uid()
        md["creationTimestamp"] = self.clock.rfc3339()
        for f in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            md.pop(f, None)
        if res.strategy.track_generation:
            md["generation"] = 1
        if "status" in res.subresources and not res.strategy.keep_status_on_create:
            obj.pop("status", None)
            if not res.strategy.unstructured and (sch := schemas.kind_schema(res.group, res.storage_version, res.kind)) \
                    and (status := structural.left_out(sch, "status")) is not None:
                obj["status"] = status  # a struct held by value: its zero, as upstream's strategies reset it
        res.strategy.prepare_for_create(obj)
        written: list[KV] = []  # the store's answer, once it made the write
        try:
            return await self._create_prepared(res, version, obj, opts, warnings, admission, generated, held, large,
                                               written)
        except WriteGoesOn:
            raise  # its write, still in flight, releases the values if it fails
        except BaseException:
            if not written:  # (a request ended after its write, in the cache's wait: the values are the stored object's)
                res.strategy.release(obj)
            raise

    def _generated_name(self, prefix: str) -> str:
        """A name from generateName: the prefix cut to GENERATED_PREFIX characters, then five random ones."""
        prefix = prefix[:GENERATED_PREFIX]
        return prefix + self.name_suffix(prefix)

    async def _create_prepared(self, res, version, obj, opts, warnings, admission=None,
                               generated: bool = False, held: list | None = None, large: bool = False,
                               written: list | None = None) -> Result:
        """`generated`: the name is generateName's, and one taken is drawn again (RetryGenerateName);
        `held`: the empty lists validation reads, left out once it passed; `written`: where the
        store's answer goes once it made the write."""
        md = obj["metadata"]
        # a large or costly custom resource is validated in a worker thread (a built-in kind's validation
        # may allocate, as a Service's begin_create does, and stays on the loop)
        checked = await self._as_requested(res, version, obj) if res.strategy.unstructured else (obj,)
        if _validated_off_loop(res, large, checked[0], len(opts.body)):
            errs = await asyncio.to_thread(res.validate_create, *checked)
        else:
            errs = res.validate_create(*checked)
        if errs:
            raise self._invalid(res, obj, errs)
        if held:
            omitempty.drop(held)
        warnings = warnings + self._warned(admission, res.strategy.warnings_on_create(obj)) \
            + await self._validating_admission(admission, obj)
        key = res.key(md.get("namespace"), md["name"])
        if opts.dry_run:
            res.strategy.release(obj)
            if await self.store.get(key) is not None:  # DryRunnableStorage.Create: a name taken is taken
                raise self._name_taken(res, key, md["name"], generated)
            return self._result(res, await _computed(large, _in_stored_order, res, obj), version, 201, warnings)
        held = res.strategy.reservations
        made = await self._reserve(res, obj, None) if held is not None else None
        try:
            for attempt in range(NAME_ATTEMPTS):
                value, handed, at = await _stored_json(res, obj, large)
                self.cache.expect(key, value, handed, at)
                try:
                    write = self.store.create(key, value)
                    if made:
                        kv = await held.written(write, made, None, obj)
                    elif type(res.strategy).release is not Strategy.release:  # values allocated (a Service's)
                        kv = await _unabandoned(write, unmade=functools.partial(res.strategy.release, obj))
                    else:
                        kv = await write
                    break
                except KeyExists:
                    if not generated or attempt == NAME_ATTEMPTS - 1:
                        raise self._name_taken(res, key, md["name"], generated) from None
                obj["metadata"] = md = {**md, "name": self._generated_name(md["generateName"])}
                key = res.key(md.get("namespace"), md["name"])
        except BaseException:
            if made:
                await held.undo(made)
            raise
        if written is not None:
            written.append(kv)
        await self._write_wait(kv.mod_revision)
        return await self._written(res, key, obj, (value, at, kv.mod_revision), version, 201, warnings,
                                   opts.response)

    async def _written(self, res: Resource, key: str, obj: dict, stored: tuple[bytes, int, int], version: str,
                       code: int, warnings: list[str], convert: bool = True) -> Result:
        """The response to a create or update just stored (`stored`: its bytes, where their
        resourceVersion goes, its revision): the cache's object when the watch has brought that
        revision in (then served as the bytes stored, where it needs no conversion), else `obj` at it;
        as stored, unconverted, where `convert` is False (WriteOptions.response)."""
        rev = stored[2]
        entry = self.cache.get(key)
        cached = entry is not None and entry.rev == rev
        written = entry.obj if cached else {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(rev)}}
        if not convert:
            return Result(written, code, warnings, internal=written)
        if _converts(res.strategy):
            await res.strategy.prepare_conversion([written], version)
        out = self._external(res, written, version)
        return Result(out, code, warnings, stored if cached and out is written else None, written)

    def _name_taken(self, res: Resource, key: str, name: str, generated: bool) -> errors.APIError:
        """Store.create's AlreadyExists: CheckGeneratedNameError's conflict where the name was generated
        (retry in a second), and "object is being deleted: " before it when the object holding the
        name is being deleted."""
        e = errors.already_exists(res.group, res.plural, name)
        if generated:
            e.message += ", the server was not able to generate a unique name for the object"
            e.details = {**(e.details or {}), "retryAfterSeconds": 1}
        held = self.cache.get(key)
        if held is not None and held.obj["metadata"].get("deletionTimestamp"):
            e.message = f"object is being deleted: {e.message}"
        return e

    # --- update ----------------------------------------------------------

    async def update(
        self, res: Resource, version: str, namespace: str | None, name: str, body: Any, opts: WriteOptions,
        subresource: str = "",
    ) -> Result:
        held: list = []  # the empty lists its validation reads (omitempty.held), back for it only
        if len(opts.body) >= OFF_LOOP_OBJECT:
            warnings = await asyncio.to_thread(self._decode_checks, res, version, body, opts, None, held)
        else:
            warnings = self._decode_checks(res, version, body, opts, None, held)
        md = _meta(body)
        check_target(md, name, namespace if res.namespaced else None)
        md["name"] = name
        if res.namespaced:
            md["namespace"] = namespace
        res.strategy.default(body, version)
        omitempty.drop(held)  # after defaulting, which reads them as set (copyHPAScalingRules keeps `[]`)
        if _converts(res.strategy):
            await res.strategy.prepare_conversion([body], res.storage_version)
        new = res.strategy.to_storage(body, version)
        key = res.key(namespace, name)
        entry = _as_decoded(res, self.cache.get(key), subresource)
        if entry is None:
            if subresource or not res.strategy.allow_create_on_update:
                raise errors.not_found(res.group, res.plural, name)
            created = orjson.loads(orjson.dumps(new))  # (create fills in what it is given; `new` may be updated yet)
            _meta(created).pop("resourceVersion", None)
            try:
                return await self.create(res, version, namespace, self._external(res, created, version), opts)
            except errors.APIError as e:
                # another client created it since the cache was read: this is an update of theirs, as
                # upstream's create-on-update inside GuaranteedUpdate becomes one when the key is taken
                if e.reason != "AlreadyExists":
                    raise
                await self.cache.sync()
                entry = _as_decoded(res, self.cache.get(key), subresource)
                if entry is None:  # (and gone again)
                    raise
        uid, stored_uid = _meta(new).get("uid"), entry.obj["metadata"].get("uid")
        if uid and uid != stored_uid:  # the body's uid is a precondition, as upstream's UpdatedObjectInfo makes it
            raise errors.conflict(res.group, res.plural, name, _precondition_failed(res, key, "UID", uid, stored_uid))
        rv = _meta(new).get("resourceVersion")
        rv = _object_revision(rv) if rv else 0
        if rv == 0 and not res.strategy.allow_unconditional_update:
            raise _resource_version_required(res, name)
        if rv != 0 and rv != entry.rev:
            raise errors.conflict(res.group, res.plural, name, errors.STALE)
        if rv:
            result = await self._update_from(res, version, entry, new, opts, subresource, expected_rev=entry.rev,
                                             held=held, size=len(opts.body))
        else:
            result = await self._update_unconditionally(res, version, namespace, name, entry, new, opts, subresource,
                                                        held)
        result.warnings[:0] = warnings
        return result

    async def _update_unconditionally(self, res: Resource, version: str, namespace: str | None, name: str, entry,
                                      new: dict, opts: WriteOptions, subresource: str,
                                      held: list | None = None) -> Result:
        """An update that names no resourceVersion applies to whatever is stored when it is written:
        one that lost a race with another write is made again from the request on the newer object
        inside the server, as upstream's GuaranteedUpdate does, instead of a 409 to a client that set
        no precondition (several API server workers make such races likelier)."""
        sent = orjson.dumps(new)  # the update mutates `new` as it goes
        async with self.turns.of(res.key(namespace, name)) as turn:
            if turn.joined:  # it waited for its turn: the entry read before may be stale by then
                await self.cache.sync()
                entry = _as_decoded(res, self._entry(res, namespace, name), subresource)
            for attempt in range(PATCH_ATTEMPTS):
                try:
                    return await self._update_from(res, version, entry, new, opts, subresource, expected_rev=entry.rev,
                                                   held=held, size=len(opts.body))
                except errors.APIError as e:
                    if e.code != 409 or not e.message.endswith(errors.STALE) or attempt == PATCH_ATTEMPTS - 1:
                        raise
                await turn.lost()
                await self.cache.sync()
                entry = _as_decoded(res, self._entry(res, namespace, name), subresource)
                new = orjson.loads(sent)

    def _merge_subresource(self, res: Resource, old: dict, new: dict, subresource: str) -> dict:
        """Which parts of `new` a write through `subresource` may change."""
        if subresource in ("status", "approval"):
            merged = copy.copy(old)
            if subresource == "status":
                if "status" in new:
                    merged["status"] = new["status"]
                else:
                    merged.pop("status", None)
            else:
                st = dict(old.get("status") or {})
                st["conditions"] = (new.get("status") or {}).get("conditions")
                merged["status"] = st
            merged["metadata"] = md = {**old["metadata"]}
            sent = new.get("metadata") or {}
            for f in res.strategy.status_metadata:
                if f in sent:
                    md[f] = sent[f]
                else:
                    md.pop(f, None)
            return merged
        if subresource == "finalize":
            merged = copy.copy(old)
            merged["metadata"] = {**old["metadata"]}  # the update sets managedFields on it; old is the cache's
            merged["spec"] = {**(old.get("spec") or {}), "finalizers": (new.get("spec") or {}).get("finalizers") or []}
            return merged
        # main resource: status is owned by the status subresource
        if "status" in res.subresources:
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        return new

    async def _update_from(
        self, res: Resource, version: str, entry, new: dict, opts: WriteOptions, subresource: str, expected_rev: int,
        managed_fields: list | None = None, held: list | None = None, size: int = 0, sent: tuple | None = None,
        large: bool = False,
    ) -> Result:
        """`size`: the JSON length of the object tracked as the request knows it (rest._large), 0 where not;
        `large`: a patch's judgement that its object is large (rest._large), where it made one.
        `sent`: a main-resource patch's (live object, patched object) at `version` (the field manager's
        liveObj and newObj, as upstream's patcher hands them), where `new` is the latter converted for
        storage: tracked without converting both again."""
        old = entry.obj
        if managed_fields is None:  # tracked before admission, as upstream's update and patch handlers do
            if subresource in ("status", "approval"):
                tracked = _status_tracked(res.strategy, old, new)
            elif subresource in res.strategy.spec_subresources:  # it owns only what it may change
                tracked = res.strategy.prepare_for_subresource_update(subresource, new, old)
            else:
                tracked = new
            if _converts(res.strategy) and (version != res.storage_version or _stored_before(res, version, old)):
                await res.strategy.prepare_conversion([old, tracked], version)  # fields are tracked at `version`
            live, patched = sent if sent is not None and tracked is new else (None, None)
            args = (res, version, old, tracked, opts, subresource, patched)
            if large or _large(tracked, size):
                managed_fields = await asyncio.to_thread(self._track_fields, *args, sent_old=live)
            else:  # called, not awaited through _computed: ~3 k less a small write
                managed_fields = self._track_fields(*args, sent_old=live)
        _set_managed_fields(_meta(new), managed_fields)  # what admission sees, as upstream's
        sent_rv, sent_uid = _meta(new).get("resourceVersion"), _meta(new).get("uid")
        new, admission = await self._mutating_admission(res, version, subresource, "UPDATE", new, old, opts)
        if admission is not None:
            _admitted_identity(res, entry, _meta(new), sent_rv, sent_uid)
        if (md := _meta(new)).get("managedFields") is not managed_fields:
            managed_fields = self._admitted_fields(admission, md, managed_fields)
        # prepare_for_update runs on `new`
        prepared = subresource not in ("status", "approval", "finalize") and subresource not in res.strategy.spec_subresources
        written: list[KV] = []  # the store's answer, once it made the write
        try:
            result = await self._update_admitted(res, version, entry, new, opts, subresource, expected_rev,
                                                 managed_fields, admission, held, large, written if prepared else None)
        except WriteGoesOn:
            raise  # its write, still in flight, finishes the update's values when it ends
        except BaseException:
            if prepared:  # (a request ended after its write: the values are the new object's)
                res.strategy.finish_update(new, entry.obj, bool(written))
            raise
        if prepared:
            res.strategy.finish_update(new, entry.obj, not opts.dry_run)
        if admission is not None:
            result.warnings += admission.warnings
        return result

    async def _update_admitted(self, res: Resource, version: str, entry, new: dict, opts: WriteOptions,
                               subresource: str, expected_rev: int, managed_fields: list | None, admission,
                               held: list | None = None, large: bool = False, written: list | None = None) -> Result:
        """`written`: where the store's answer goes once it made the write, for an update whose values
        the strategy finishes (prepare_for_update ran)."""
        old = entry.obj
        om, nm = old["metadata"], _meta(new)
        # a large or costly custom resource is validated, and a large dry run's answer ordered, in a worker
        # thread; a large object's metadata too (100,000 annotations patched through /status: ~0.3 s)
        size = max(len(opts.body), entry.size)
        large = large or size >= OFF_LOOP_OBJECT
        _same_namespace(res, nm, om.get("namespace"))
        if subresource == "status":
            _keep_stored(nm, om, res.strategy.status_deletion_kept)
        meta_errs = _deletion_fields(om, nm)
        _keep_stored(nm, om, ("uid", "creationTimestamp", "generation"))
        new = self._merge_subresource(res, old, new, subresource)
        nm = new["metadata"]
        _set_managed_fields(nm, managed_fields)
        checked = (new, old)  # what the strategy validates and warns of: a custom resource's at `version`
        if subresource == "status":
            res.strategy.prepare_for_status_update(new, old)
            if res.strategy.unstructured:
                checked = await self._as_requested(res, version, new, old)
            if _validated_off_loop(res, large, checked[0], size):
                errs = await asyncio.to_thread(res.strategy.validate_status_update, *checked)
            else:
                errs = res.strategy.validate_status_update(*checked)
        elif subresource == "approval":
            res.strategy.prepare_for_approval_update(new, old)
            errs = res.strategy.validate_approval_update(new, old)
        elif subresource == "finalize":
            errs = res.strategy.validate_finalize(new, old)
        if subresource in ("status", "approval", "finalize"):
            # the metadata a subresource write carries is validated as on any update
            if large:
                sub_errs = await asyncio.to_thread(res.validate_subresource_meta, new, old)
            else:
                sub_errs = res.validate_subresource_meta(new, old)
            errs = sub_errs + list(errs or [])
        elif subresource in res.strategy.spec_subresources:
            new = res.strategy.prepare_for_subresource_update(subresource, new, old)
            nm = new["metadata"]
            if res.strategy.track_generation and _spec_changed(old, new):
                nm["generation"] = om.get("generation", 0) + 1
            errs = res.validate_spec_subresource_update(subresource, new, old)
        else:
            res.strategy.prepare_for_update(new, old)
            if res.strategy.track_generation and _spec_changed(old, new):
                nm["generation"] = om.get("generation", 0) + 1
            # a built-in kind's own checks stay on the loop (they may allocate); a large one's metadata
            # checks (100,000 annotations: ~0.3 s) are worked out in a worker thread first, where
            # validation runs once (no empty lists held, which it would read both without and with)
            meta = await asyncio.to_thread(res.update_meta_errors, new, old) \
                if large and not res.strategy.unstructured and not held else None
            if res.strategy.unstructured:
                checked = await self._as_requested(res, version, new, old)
            args = (held, new, lambda: res.validate_update(*checked, meta))
            if _validated_off_loop(res, large, checked[0], size):
                errs = await asyncio.to_thread(omitempty.validated, *args)
            else:
                errs = omitempty.validated(*args)
        if meta_errs:
            errs = meta_errs + list(errs or [])
        if errs:
            raise self._invalid(res, new, errs)
        if subresource == "status":
            warned = self._warned(admission, res.strategy.warnings_on_status_update(*checked))
        elif subresource in ("approval", "finalize") or subresource in res.strategy.spec_subresources:
            warned = []
        else:
            warned = self._warned(admission, res.strategy.warnings_on_update(*checked))
        await self._validating_admission(admission, new)
        nm["resourceVersion"] = om.get("resourceVersion")
        if new == old and type(entry) is not _Redecoded \
                and not (self.stale is not None and await self.stale(res.key(nm.get("namespace"), nm["name"]))):
            if _converts(res.strategy):
                await res.strategy.prepare_conversion([old], version)
            return self._result(res, old, version, 200, warned)
        if opts.dry_run:
            return self._result(res, await _computed(large, _in_stored_order, res, new), version, 200, warned)
        key = res.key(nm.get("namespace"), nm["name"])
        if nm.get("deletionTimestamp") and not nm.get("finalizers") and not res.strategy.blocks_deletion(new) \
                and not nm.get("deletionGracePeriodSeconds"):
            try:
                kv = await self._delete_written(res, key, expected_rev, entry.kv, new, old, written)
            except RevisionMismatch:
                raise errors.conflict(res.group, res.plural, nm["name"], errors.STALE) from None
            except KeyNotFound:
                raise errors.not_found(res.group, res.plural, nm["name"]) from None
            return self._result(res, {**new, "metadata": {**nm, "resourceVersion": str(kv.mod_revision)}}, version, 200, warned)
        held = res.strategy.reservations
        made = await self._reserve(res, new, old) if held is not None else None
        try:
            spec = new.get("spec")
            value, handed, at = await _stored_json(res, new, large, spec is not None and spec is old.get("spec"))
            self.cache.expect(key, value, handed, at)
            write = self.store.update(key, value, expected_rev, entry.kv)
            if held is not None:
                kv = await held.written(write, made, old, new)
            elif written is not None and type(res.strategy).finish_update is not Strategy.finish_update:
                finish = res.strategy.finish_update  # (a Service's values: as the request would once it ends)
                kv = await _unabandoned(write, unmade=functools.partial(finish, new, old, False),
                                        made=functools.partial(finish, new, old, True))
            else:
                kv = await write
        except BaseException as e:
            if made:
                await held.undo(made)
            if isinstance(e, RevisionMismatch):
                raise errors.conflict(res.group, res.plural, nm["name"], errors.STALE) from None
            if isinstance(e, KeyNotFound):
                raise errors.not_found(res.group, res.plural, nm["name"]) from None
            raise
        if written is not None:
            written.append(kv)
        try:
            await self._write_wait(kv.mod_revision)
        finally:  # the write is made: the values it gave up are freed even if the request ends here
            if held is not None:
                await held.free(old, new)
        return await self._written(res, key, new, (value, at, kv.mod_revision), version, 200, warned)

    # --- patch -----------------------------------------------------------

    async def patch(
        self, res: Resource, version: str, namespace: str | None, name: str, patch_type: str, patch: bytes,
        opts: WriteOptions, subresource: str = "", duplicates: list[str] | tuple[str, ...] = (),
    ) -> Result:
        """`duplicates`: under fieldValidation=Strict, the patch's own strict errors (the keys a
        merge or strategic merge patch repeats, a json patch's unknown and repeated op fields),
        strict errors of its result."""
        async with self.turns.of(res.key(namespace, name)) as turn:
            if patch_type != "application/apply-patch+yaml" or not res.strategy.unstructured:
                return await self._patch(res, version, namespace, name, patch_type, patch, opts, subresource,
                                         duplicates, turn)
            applied = ssa.APPLIED.set(True)
            try:
                return await self._patch(res, version, namespace, name, patch_type, patch, opts, subresource,
                                         duplicates, turn)
            finally:
                ssa.APPLIED.reset(applied)

    async def _patch(self, res: Resource, version: str, namespace: str | None, name: str, patch_type: str,
                     patch: bytes, opts: WriteOptions, subresource: str, duplicates: list[str] | tuple[str, ...],
                     turn: Turn) -> Result:
        key = res.key(namespace, name)
        sch = schemas.kind_schema(res.group, version, res.kind)
        seen = version == res.storage_version and status_patch.seen(patch_type, patch)
        try:
            if seen:  # a status-only patch met before (patch/status.py): decoded only if it is merged again
                parsed = None
            elif patch_type == "application/apply-patch+yaml":
                parsed = await serializer.off_loop(serializer.loads_yaml, patch)
            else:
                parsed = await serializer.off_loop_json(patch, lenient=True)
        except errors.APIError:
            raise
        except Exception as e:
            go = isinstance(e, orjson.JSONDecodeError) and gojson.patch_syntax_error(
                patch, patch_type == STRATEGIC_PATCH, patch_type == "application/json-patch+json", opts.field_validation)
            raise errors.bad_request(go or f"error decoding patch: {e}") from None
        if parsed is not None and serializer.OUT_OF_RANGE.get():
            patch_out_of_range(patch_type, parsed, opts)
        changed = _STATUS if seen else None
        if patch_type in (MERGE_PATCH, STRATEGIC_PATCH) and isinstance(parsed, dict) and version == res.storage_version:
            changed = _patched_fields(parsed, patch_type == STRATEGIC_PATCH)
        status_only = self._status_only(res, subresource, changed, parsed)
        apply = patch_type == "application/apply-patch+yaml"
        dups = tuple(duplicates)
        for attempt in range(PATCH_ATTEMPTS):
            entry = _as_decoded(res, self.cache.get(key), subresource)
            memo = remembered = None
            # a large object is patched, decoded and validated in a worker thread (judged by the lengths
            # known; an apply, whose merge costs most, encodes a stored object of unknown length)
            large = len(patch) >= OFF_LOOP_OBJECT or entry is not None and (
                _large(entry.obj, entry.size) if apply else entry.size >= OFF_LOOP_OBJECT)
            if patch_type == "application/apply-patch+yaml":
                if not isinstance(parsed, dict):
                    raise errors.bad_request("error decoding YAML: the apply patch must be an object")
                await _computed(large, _check_apply_configuration, res, version, parsed, sch)
                if entry and _converts(res.strategy):
                    await res.strategy.prepare_conversion([entry.obj], version)
                live = self._external(res, entry.obj, version) if entry else None
                try:
                    new = await _computed(
                        large, ssa.apply,
                        live, _status_applied(res.strategy, parsed) if subresource == "status" else parsed,
                        opts.field_manager, opts.force, sch, self.clock.rfc3339(),
                        res.api_version(version), subresource, ignore_status="status" in res.subresources,
                        convert=self.index.converters.get((res.group, version, res.plural)),
                        keep_nulls=res.strategy.unstructured,
                    )
                except PatchError as e:
                    raise _patch_error(e) from None
                if entry is None:
                    if subresource:
                        raise errors.not_found(res.group, res.plural, name)
                    mf = (new.get("metadata") or {}).get("managedFields")
                    try:
                        return await self._create_applied(res, version, namespace, new, opts, mf, large)
                    except errors.APIError as e:
                        # another client created it since the cache was read: applied again to theirs,
                        # as upstream's apply creates inside GuaranteedUpdate, which retries as an update
                        if e.reason != "AlreadyExists" or attempt == PATCH_ATTEMPTS - 1:
                            raise
                    await self.cache.sync()
                    continue
                body = new
            else:
                if entry is None:
                    raise errors.not_found(res.group, res.plural, name)
                if _converts(res.strategy):
                    await res.strategy.prepare_conversion([entry.obj], version)
                current = self._external(res, entry.obj, version)
                if subresource == "scale":
                    raise errors.method_not_allowed()
                doc = ({"status": current["status"]} if "status" in current else {}) if status_only else current
                if status_only and sch is not None and opts.field_validation in ("Strict", "Warn"):
                    memo = status_patch.key(sch, patch_type, patch, current, (res.group, res.plural, opts.field_manager),
                                            current.get("status") is entry.obj.get("status"))
                    remembered = status_patch.get(memo, sch) if memo is not None else None
                if parsed is None and remembered is None:
                    parsed = await serializer.off_loop_json(patch, lenient=True)
                try:
                    if remembered is not None:
                        body = {"status": remembered}
                    elif patch_type == "application/json-patch+json":
                        if not isinstance(parsed, list):
                            raise errors.bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
                        body = await _computed(large, jsonpatch.apply, current, parsed)
                    elif patch_type == MERGE_PATCH:
                        if not isinstance(parsed, dict):
                            raise errors.bad_request("json: cannot unmarshal into map[string]interface{}")
                        body = await _computed(large, merge.apply, doc, _handed(parsed, patch, attempt), handed=True)
                    elif patch_type == STRATEGIC_PATCH:
                        if not isinstance(parsed, dict):
                            raise errors.bad_request("json: cannot unmarshal into map[string]interface{}")
                        body = await _computed(large, strategic.apply, doc, _handed(parsed, patch, attempt), sch, handed=True)
                    else:
                        raise errors.unsupported_media_type(patch_type)
                except PatchError as e:
                    raise _patch_error(e) from None
                if status_only:
                    body = _with_status(current, body)
            if not isinstance(body, dict):
                raise errors.bad_request("the patch produced something that is not an object")
            if body.get("metadata") is not None and not isinstance(body["metadata"], dict):
                meta = body["metadata"]
                raise _undecodable(res.kind, version, body, structural.Mismatch(
                    f"json: cannot unmarshal {gojson.value_kind(meta)} into Go struct field {res.kind}.metadata of type "
                    "v1.ObjectMeta", meta, "v1.ObjectMeta", False), None if apply else _Patched(patch_type, patch))
            check_target(body.get("metadata") or {}, name, namespace if res.namespaced else None)
            patched_rv = (body.get("metadata") or {}).get("resourceVersion")
            if patched_rv and _object_revision(patched_rv) not in (0, entry.rev):
                raise errors.conflict(res.group, res.plural, name, errors.STALE)
            patched_uid = (body.get("metadata") or {}).get("uid")
            if patched_uid and patched_uid != entry.obj["metadata"].get("uid"):
                raise self._invalid(res, body, [immutable("metadata.uid", patched_uid)])
            popts = opts
            if patch_type == "application/apply-patch+yaml":
                mf = (body.get("metadata") or {}).get("managedFields")
                popts = WriteOptions(opts.dry_run, "", opts.field_validation, opts.force, opts.user)
            held: list = []
            args = (res, version, body, popts, _NO_FIELDS if remembered is not None else changed, held,
                    None if apply else _Patched(patch_type, patch, dups))
            if large:
                warnings = await asyncio.to_thread(self._decode_checks, *args)
            else:  # called, not awaited through _computed: ~3 k less a small write
                warnings = self._decode_checks(*args)
            if memo is not None and remembered is None and not warnings and not dups:
                # no unknown field: checked as it is; no repeated key: strict.patch_duplicates passes it
                status_patch.remember(memo, sch, body.get("status"))
            if not status_only:
                res.strategy.default(body, version)
            omitempty.drop(held)  # after defaulting, as an update's
            if _converts(res.strategy):
                await res.strategy.prepare_conversion([body], res.storage_version)
            new = res.strategy.to_storage(body, version)
            try:
                if patch_type == "application/apply-patch+yaml":
                    r = await self._update_applied(res, version, entry, new, opts, subresource, mf, large)
                else:
                    # a merge's result is no longer than what it merges: the stored object and the patch
                    size = entry.size and entry.size + len(patch) if patch_type in (MERGE_PATCH, STRATEGIC_PATCH) else 0
                    # a kind stored in another shape: the live and patched objects at `version` are tracked
                    converted = not subresource and new is not body and not _converts(res.strategy)
                    r = await self._update_from(res, version, entry, new, opts, subresource, entry.rev, held=held,
                                                size=size, sent=(current, body) if converted else None, large=large)
            except errors.APIError as e:
                # lost a race with another write: apply the patch again to the newer object (a patch
                # that names a resourceVersion then fails the precondition above, as upstream)
                if e.code == 409 and e.message.endswith(errors.STALE) and attempt < PATCH_ATTEMPTS - 1:
                    await turn.lost()
                    await self.cache.sync()
                    continue
                raise
            r.warnings[:0] = warnings
            return r
        raise errors.conflict(res.group, res.plural, name, errors.STALE)

    def _status_only(self, res: Resource, subresource: str, changed: set[str] | None, parsed: Any) -> bool:
        """Whether a patch is a /status write that names only status (a scheduler's or kubelet's), of
        a kind whose defaulting fills in nothing of status, that no policy or webhook sees: its
        result is the stored object but its status (`_merge_subresource`), and the rest of what it
        patched reaches only the in-tree admission plugins, which never change a pods/status write's
        object (LimitRanger and RuntimeClass pass subresources by; NodeRestriction reads the stored
        pod). So only the status is copied and patched, the rest of the live object shared; a copy
        of the stored spec that nothing would see is not made and defaulted (~18% of the scheduler's
        PodScheduled=False patch). What a policy or webhook may see is built in full, as before."""
        return (subresource == "status" and changed == _STATUS and (parsed is None or parsed.keys() == _STATUS)
                and not res.strategy.defaults_status and not _converts(res.strategy)
                and (self.admission is None or not self.admission.shows_objects(res)))

    async def _create_applied(self, res, version, namespace, obj, opts, managed_fields, large: bool) -> Result:
        obj = await _computed(large, orjson.loads, orjson.dumps(obj))  # a deep copy, 10x faster than copy.deepcopy
        md = _meta(obj)
        md.pop("managedFields", None)
        if res.namespaced:
            md.setdefault("namespace", namespace)
        return await self.create(res, version, namespace, obj, opts, managed_fields=managed_fields, large=large)

    async def _update_applied(self, res, version, entry, new, opts, subresource, managed_fields, large: bool) -> Result:
        return await self._update_from(res, version, entry, new, opts, subresource, entry.rev,
                                       managed_fields=managed_fields or [], large=large)

    # --- delete ----------------------------------------------------------

    async def delete(
        self, res: Resource, version: str, namespace: str | None, name: str, options: dict | None, opts: WriteOptions,
    ) -> Result:
        if (why := res.strategy.refuse_delete(name)) is not None:
            raise errors.forbidden(res.group, res.plural, name, why)
        return await self._delete(res, version, namespace, name, options, opts)

    async def _delete(
        self, res: Resource, version: str, namespace: str | None, name: str, options: dict | None, opts: WriteOptions,
    ) -> Result:
        async with self.turns.of(res.key(namespace, name)) as turn:
            return await self._deleted(res, version, namespace, name, options or {}, opts, turn)

    async def _deleted(self, res: Resource, version: str, namespace: str | None, name: str, options: dict,
                       opts: WriteOptions, turn: Turn) -> Result:
        key = res.key(namespace, name)
        if options.get(IGNORE_READ_ERROR) and featuregates.enabled("AllowUnsafeMalformedObjectDeletion"):
            from .encryption import corrupt

            await corrupt.admit_unsafe_delete(self.admission and self.admission.authorizer, opts.user, res.group,
                                              version, res.plural, namespace, name)
            if key not in self.unreadable:
                raise corrupt.not_corrupt(res.group, res.plural, name)
            if not opts.dry_run:
                await self.store.delete(key)
            return Result(errors.success_status(name, res.group, res.plural, ""), 200)
        for attempt in range(PATCH_ATTEMPTS):
            entry = self._entry(res, namespace, name)
            obj = entry.obj
            md = obj["metadata"]
            if attempt == 0 and _converts(res.strategy):  # Store.Delete's Get decodes it at the request's
                await res.strategy.prepare_conversion([obj], version)  # version: a failed conversion fails it
            pre = options.get("preconditions") or {}
            for f, what, why in (("uid", "UID", "deleted and then recreated"),
                                 ("resourceVersion", "ResourceVersion", "modified")):
                if pre.get(f) is not None and pre[f] != md.get(f):
                    if attempt == 0:  # BeforeDelete's early check, which names the kind
                        raise errors.conflict(res.group, res.kind, name, f"the {what} in the precondition "
                                              f"({pre[f]}) does not match the {what} in record ({md.get(f)}). "
                                              f"The object might have been {why}")
                    # the storage's own, on the object a lost race left
                    raise errors.conflict(res.group, res.plural, name,
                                          _precondition_failed(res, key, what, pre[f], md.get(f)))
            if attempt == 0:
                await self._delete_admission(res, version, obj, options, opts)
            policy = options.get("propagationPolicy")
            if policy is None and options.get("orphanDependents") is not None:
                policy = "Orphan" if options["orphanDependents"] else "Background"
            if policy not in (None, "Foreground", "Background", "Orphan"):
                raise errors.APIError(422, "Invalid", f'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "{policy}": supported values: "Foreground", "Background", "Orphan", "nil"')
            grace = options.get("gracePeriodSeconds")
            grace = res.strategy.graceful_delete_seconds(obj, grace)
            new_md = {**md}
            finalizers = list(md.get("finalizers") or [])
            if policy == "Foreground" and "foregroundDeletion" not in finalizers:
                finalizers.append("foregroundDeletion")
            if policy == "Orphan" and "orphan" not in finalizers:
                finalizers.append("orphan")
            if policy == "Background":
                finalizers = [f for f in finalizers if f not in ("foregroundDeletion", "orphan")]
            lingering = bool(finalizers) or res.strategy.blocks_deletion(obj) or grace > 0
            if not lingering:
                if opts.dry_run:
                    return Result(self._deleted_result(res, version, obj), 200)
                try:
                    kv = await self._delete_written(res, key, entry.rev, entry.kv, obj, obj)
                except RevisionMismatch:
                    await turn.lost()
                    await self.cache.sync()
                    continue
                except KeyNotFound:
                    raise errors.not_found(res.group, res.plural, name) from None
                return Result(self._deleted_result(res, version, {**obj, "metadata": {**md, "resourceVersion": str(kv.mod_revision)}}), 200)
            new = copy.copy(obj)
            new["metadata"] = new_md
            if finalizers:
                new_md["finalizers"] = finalizers
            else:
                new_md.pop("finalizers", None)
            now = self.clock.now()
            if not md.get("deletionTimestamp"):
                new_md["deletionTimestamp"] = self.clock.rfc3339(now + goduration.seconds(grace))
                new_md["deletionGracePeriodSeconds"] = grace
                if res.strategy.track_generation and md.get("generation") is not None:
                    new_md["generation"] = md["generation"] + 1
                res.strategy.prepare_for_delete(new)
            elif grace < (md.get("deletionGracePeriodSeconds") or 0):
                new_md["deletionTimestamp"] = self.clock.rfc3339(now + goduration.seconds(grace))
                new_md["deletionGracePeriodSeconds"] = grace
            # DeleteResource's 202: an object left in place when the client asked for cascading by
            # orphanDependents=false (a Foreground propagationPolicy is a 200, as any other)
            pending = 202 if options.get("orphanDependents") is False else 200
            if new == obj:
                return self._result(res, obj, version, pending)
            if opts.dry_run:
                return self._result(res, new, version, pending)
            if grace == 0 and not finalizers and not res.strategy.blocks_deletion(new):
                try:
                    await self._delete_written(res, key, entry.rev, entry.kv, new, new)
                except RevisionMismatch:
                    await turn.lost()
                    await self.cache.sync()
                    continue
                return Result(self._deleted_result(res, version, new), 200)
            try:
                value, handed, at = await _stored_json(res, new, entry.size >= OFF_LOOP_OBJECT)
                self.cache.expect(key, value, handed, at)
                kv = await self.store.update(key, value, entry.rev, entry.kv)
            except RevisionMismatch:
                await turn.lost()
                await self.cache.sync()
                continue
            except KeyNotFound:
                raise errors.not_found(res.group, res.plural, name) from None
            await self._write_wait(kv.mod_revision)
            # the object written, as upstream's GuaranteedUpdate returns it (the cache may hold a later write)
            return await self._written(res, key, new, (value, at, kv.mod_revision), version, pending, [])
        raise errors.conflict(res.group, res.plural, name, errors.STALE)

    async def admit_subresource_create(self, res: Resource, version: str, subresource: str, kind: dict,
                                       namespace: str | None, name: str, body: dict, opts: WriteOptions,
                                       operation: str = "CREATE", mutated: Callable[[dict], None] | None = None
                                       ) -> dict:
        """Admission of a create through a subresource with an object of its own kind
        (pods/binding, pods/eviction); returns the object as admission left it. `mutated` judges the
        object between the chains, as the REST's Create does before its createValidation."""
        if self.admission is None or not isinstance(body, dict):
            if mutated is not None:
                mutated(body)
            return body
        a = self.admission.subresource_attributes(res, version, subresource, kind, namespace, name, body, opts,
                                                  operation)
        await self.admission.admit(a, mutated)
        return a.obj

    async def admit_connect(self, subresource: str, namespace: str, name: str, options: dict, user: User) -> None:
        """CONNECT admission of pods/exec, pods/attach and pods/portforward, with the
        Pod*Options of the request as the object."""
        pods = self.index.get("", "v1", "pods")
        kind = {"group": "", "version": "v1", "kind": options["kind"]}
        await self.admit_subresource_create(pods, "v1", subresource, kind, namespace, name, options,
                                            WriteOptions(user=user), operation="CONNECT")

    async def _delete_admission(self, res: Resource, version: str, obj: dict, options: dict, opts: WriteOptions) -> None:
        """DELETE admission: both chains see the object being deleted as oldObject."""
        if self.admission is None:
            return
        step = self.admission.admit(self.admission.attributes(res, version, "", "DELETE", None, obj, opts, options))
        await (step if HELD.get() is None else self._admitted(res, step))

    def _deleted_result(self, res: Resource, version: str, obj: dict) -> dict:
        if res.strategy.returns_deleted_object(version):
            return self._external(res, obj, version)
        return errors.success_status(obj["metadata"]["name"], res.group, res.plural, obj["metadata"].get("uid", ""))

    async def delete_collection(
        self, res: Resource, version: str, namespace: str | None, options: dict | None, opts: WriteOptions,
        label_selector: str = "", field_selector: str = "", list_meta: dict | None = None, **listing: Any,
    ) -> list[dict]:
        """Deletes what the list with these selectors and `listing` (list's other options) holds, and
        returns that list's items, those another client deleted first too (upstream's DeleteCollection
        answers with the list it read). `list_meta`, when given, receives the list's metadata."""
        items, meta = await self.list(res, version, namespace, label_selector=label_selector, field_selector=field_selector,
                                      **listing)
        if list_meta is not None:
            list_meta.update(meta)
        for it in items:
            try:
                await self._delete(res, version, it["metadata"].get("namespace"), it["metadata"]["name"], options, opts)
            except errors.APIError as e:
                if e.code != 404:
                    raise
        return items


#: what a patch's result is always checked in, whatever the patch names (metadata only when the
#: patch names it: otherwise it is the live object's, like the spec of a status patch, and
#: checking it was ~32 k instructions, 3-4% of a pod status patch)
_ALWAYS_CHECKED = frozenset(("apiVersion", "kind"))
#: the fields of a remembered status patch's result left to check (its status was checked; its
#: apiVersion and kind are the kind's, which `_decode_checks` sets before checking)
_NO_FIELDS: frozenset[str] = frozenset()
#: the top-level field decoded_specs remembers
_SPEC = frozenset(("spec",))


#: the top-level fields of a patch that names only status (see `_status_only`)
_STATUS = frozenset(("status",))


def _set_managed_fields(md: dict, entries: list | None) -> None:
    if entries:
        md["managedFields"] = entries
    else:
        md.pop("managedFields", None)


def _with_status(live: dict, patched: dict) -> dict:
    """`live` with `patched`'s status (or none), its other fields shared; metadata is copied one
    level deep, as the update sets fields of it."""
    out = {**live}
    if type(live.get("metadata")) is dict:
        out["metadata"] = {**live["metadata"]}
    if "status" in patched:
        out["status"] = patched["status"]
    else:
        out.pop("status", None)
    return out


def _handed(parsed: dict, raw: bytes, attempt: int) -> dict:
    """The decoded patch a merge may take over: the request's own decode the first time (nothing
    reads it after the merge), a fresh one for each retry (the merge changed the first)."""
    return parsed if attempt == 0 else serializer.loads_json(raw, lenient=True)


def patch_out_of_range(patch_type: str, parsed: Any, opts: WriteOptions) -> None:
    """A number past float64's range in a json, merge or strategic merge patch. Upstream decodes a
    strategic merge patch into a map[string]interface{} (strategicPatchObject), and a json or merge
    patch so too under Strict or Warn (applyJSPatch's strict pass, a json patch's op values only):
    Go refuses the number there, 400. A json or merge patch under Ignore is merged as raw JSON text,
    and the patched object is decoded as a create's body is (`_decode_checks`)."""
    if patch_type == "application/json-patch+json":
        values = [op["value"] for op in parsed if type(op) is dict and "value" in op] if type(parsed) is list else []
    else:
        values = parsed if type(parsed) is dict else None
    number = gojson.find_out_of_range(values)
    if number is None or (patch_type != STRATEGIC_PATCH and opts.field_validation == "Ignore"):
        return
    message = f"json: cannot unmarshal number {number} into Go value of type float64"
    raise errors.bad_request(message if patch_type == STRATEGIC_PATCH else f"error decoding patch: {message}")


def _patched_fields(patch: dict, smp: bool) -> set[str] | None:
    """The top-level fields a merge or strategic merge patch can change (None: any, for a
    directive at the root it does not name a field by). The rest of the result is the live
    object's, which upstream decodes from storage before patching, so its decoding of the
    result never finds an unknown or mistyped field there."""
    if not smp:
        return set(patch)
    out = set()
    for k in patch:
        if not k.startswith("$"):
            out.add(k)
            continue
        directive, sep, name = k.partition("/")
        if sep and directive in ("$setElementOrder", "$deleteFromPrimitiveList"):
            out.add(name)
        elif k != "$retainKeys":  # which keys remain: it only removes
            return None
    return out


class _Redecoded(Entry):
    """A stored object as it decodes now, where that differs from what was stored (an older server's
    object, without a struct or a null the decoder fills in): an update that changes nothing writes
    it again, as upstream's GuaranteedUpdate writes where the encoded object differs from the stored
    bytes (how `kubectl replace` and a StorageVersionMigration bring it up to date)."""

    __slots__ = ()


def _as_decoded(res: Resource, entry: Entry | None, subresource: str | None) -> Entry | None:
    """The stored object as an update compares with it: decoded as a request is (structural.check), so
    one an older server stored without a field tagged without omitempty (a StatefulSet's
    `serviceName: ""`, a PVC dataSource's `apiGroup: null`) equals the same object sent back, as
    upstream's stored objects do once decoded into Go structs (a `_Redecoded`). `entry` itself when nothing
    changes, and for a subresource's write, which keeps the stored spec as it is (decoding a whole pod for
    each status patch doubled its cost: issue 19's pending pods), and for a resource stored in another's
    shape (events.k8s.io's Events are core/v1's: its own schema would add its value times to them)."""
    if entry is None or subresource or type(res.strategy).decode is not Strategy.decode or res.storage_alias \
            or (sch := schemas.kind_schema(res.group, res.storage_version, res.kind)) is None:
        return entry
    obj = json_copy(entry.obj)
    errs, _ = structural.check(obj, sch, False)
    return entry if errs or obj == entry.obj else _Redecoded(obj, entry.rev, size=entry.size)


def _check_fields(obj: dict, sch: dict, changed: set[str] | None,
                  held: list | None = None) -> tuple[list[str], list[str]]:
    """`structural.check` of `obj`, or with `changed` of its top-level fields in it (a status
    patch leaves the pod's spec and metadata unchecked: they are the live object's)."""
    if changed is None:
        return structural.check(obj, sch, True, held=held)
    names = [k for k in obj if k in changed or k in _ALWAYS_CHECKED]
    view = {k: obj[k] for k in names}
    out = structural.check(view, sch, True, held=held)
    for k in names:  # nulls the check replaced or dropped
        if k in view:
            obj[k] = view[k]
        else:
            del obj[k]
    for k in view.keys() - obj.keys():  # a list left out that decodes as null (omitempty.nulled)
        obj[k] = view[k]
    return out



def _admitted_identity(res: Resource, entry, md: dict, sent_rv, sent_uid) -> None:
    """Store.Update's checks of what mutating admission left, which upstream runs inside UpdatedObject
    before them: a resourceVersion it changed must still be the stored one (409) or, emptied, one the
    kind may go without (422); a uid it changed to another is immutable (ValidateObjectMetaUpdate, 422)."""
    name = entry.obj["metadata"].get("name", "")
    if (rv := md.get("resourceVersion")) != sent_rv:
        n = _object_revision(rv) if rv else 0
        if n == 0 and not res.strategy.allow_unconditional_update:
            raise _resource_version_required(res, name)
        if n != 0 and n != entry.rev:
            raise errors.conflict(res.group, res.plural, name, errors.STALE)
    stored = entry.obj["metadata"].get("uid")
    if (uid := md.get("uid")) and uid != sent_uid and uid != stored:
        raise errors.invalid(res.group, res.kind, name, [immutable("metadata.uid", uid)])


def _keep_stored(nm: dict, om: dict, fields: tuple[str, ...]) -> None:
    """`nm` holds the stored object's value of each of `fields` (or lacks it, as that does)."""
    for f in fields:
        if f in om:
            nm[f] = om[f]
        else:
            nm.pop(f, None)


def _deletion_fields(om: dict, nm: dict) -> list:
    """An update never removes or changes a deletion timestamp or grace period (upstream's
    BeforeUpdate keeps the stored ones where the body leaves them out or the object is being
    deleted); setting one the stored object lacks, or another grace period, is ValidateObjectMetaUpdate's
    'field is immutable'."""
    errs = []
    if "deletionTimestamp" in om:
        nm["deletionTimestamp"] = om["deletionTimestamp"]
    elif nm.get("deletionTimestamp") is not None:
        errs.append(immutable("metadata.deletionTimestamp", nm["deletionTimestamp"]))
    else:
        nm.pop("deletionTimestamp", None)
    grace = nm.get("deletionGracePeriodSeconds")
    if grace is None or grace == om.get("deletionGracePeriodSeconds"):
        if "deletionGracePeriodSeconds" in om:
            nm["deletionGracePeriodSeconds"] = om["deletionGracePeriodSeconds"]
        else:
            nm.pop("deletionGracePeriodSeconds", None)
    else:
        errs.append(immutable("metadata.deletionGracePeriodSeconds", grace))
    return errs


def _status_applied(strategy: Strategy, applied: dict) -> dict:
    """An apply configuration sent to /status less the metadata its strategy keeps as stored and
    names among its reset fields, which upstream's field manager leaves out of the applier's set
    (and the strategy out of the object)."""
    md = applied.get("metadata")
    if strategy.status_owns_dropped_metadata or type(md) is not dict:
        return applied
    reset = [f for f in STATUS_META if f not in strategy.status_metadata and f in md]
    reset += [f for f in strategy.status_deletion_kept if f in md]
    return {**applied, "metadata": {k: v for k, v in md.items() if k not in reset}} if reset else applied


def _status_tracked(strategy: Strategy, old: dict, new: dict) -> dict:
    """`new` as the managedFields of a write through /status see it: the metadata its strategy keeps
    as stored is the stored one, so the writer owns none of it (upstream's field manager leaves
    a strategy's reset fields unowned), unless the strategy's reset fields do not name it."""
    nm, om = new.get("metadata"), old["metadata"]
    if strategy.status_owns_dropped_metadata or type(nm) is not dict:
        return new
    reset = [f for f in STATUS_META if f not in strategy.status_metadata and nm.get(f) != om.get(f)]
    reset += [f for f in strategy.status_deletion_kept if nm.get(f) != om.get(f)]
    if not reset:
        return new
    md = {**nm}
    _keep_stored(md, om, tuple(reset))
    return {**new, "metadata": md}


def _spec_changed(old: dict, new: dict) -> bool:
    for k in set(old) | set(new):
        if k in ("metadata", "status", "apiVersion", "kind"):
            continue
        if old.get(k) != new.get(k):
            return True
    return False


def _large(obj: dict, size: int = 0) -> bool:
    """Whether `obj` is OFF_LOOP_OBJECT bytes of JSON or more: judged by `size` where the request
    knows it (the JSON body sent, the stored object's length and the patch's), else by encoding
    `obj` (~15 k instructions for a pod, 2% of a pods/status patch: paid only where not known)."""
    if size:
        return size >= OFF_LOOP_OBJECT
    try:
        return len(orjson.dumps(obj)) >= OFF_LOOP_OBJECT
    except TypeError:  # (a value JSON has no form for: judged by the code that meets it)
        return False


class WriteGoesOn(asyncio.CancelledError):
    """The request was cancelled (its client gone, its deadline past) while its store write was in
    flight, which goes on in a task of its own (`_unabandoned`)."""


#: the writes of cancelled requests still in flight
_UNABANDONED: set[asyncio.Task] = set()


async def _unabandoned(write: Awaitable[KV], unmade: Callable[[], object] | None = None,
                       made: Callable[[], object] | None = None) -> KV:
    """`write`, which a cancelled request leaves to end in a task of its own, since the store may make
    it all the same (upstream's handler runs on after its 504): then `unmade` undoes what the request
    did for it if it fails (a created Service's allocated values), `made` does what the request would
    have done after it if it is made (a deleted Service's values let go), so that a Service stored as
    the request ended keeps its ClusterIP and node ports, and one not stored holds none."""
    task = asyncio.ensure_future(write)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        _UNABANDONED.add(task)
        task.add_done_callback(functools.partial(_settled, unmade, made))
        raise WriteGoesOn() from None


def _settled(unmade: Callable[[], object] | None, made: Callable[[], object] | None, task: asyncio.Task) -> None:
    _UNABANDONED.discard(task)
    then = unmade if task.cancelled() or task.exception() is not None else made
    if then is not None:
        then()


def _hold(task: asyncio.Task) -> None:
    """Keeps `task` (a cancelled request's follow-up) referenced until it ends."""
    _UNABANDONED.add(task)
    task.add_done_callback(_UNABANDONED.discard)


def _validated_off_loop(res: Resource, large: bool, obj: dict, size: int) -> bool:
    """Whether a custom resource is validated in a worker thread: a large one, and one whose CRD's
    rules may cost more on its `size` (bytes of JSON, 0 where not known) than the loop can spare."""
    return res.strategy.unstructured and (large or res.strategy.validation_costly(obj, size))


async def _computed(large: bool, fn, *args, **kwargs):
    """fn(*args, **kwargs), in a worker thread where its object is `large`."""
    if not large:
        return fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)


async def _stored_json(res: Resource, obj: dict, large: bool, keeps_spec: bool = False) -> tuple[bytes, dict, int]:
    """cache.stored_json, a large custom resource put in Go's order (every map sorted: ~0.3 s at
    3 MB) in a worker thread."""
    if large and res.strategy.unstructured:
        return stored_json(obj, keeps_spec, True, await asyncio.to_thread(in_unstructured_order, obj, ""))
    return stored_json(obj, keeps_spec, res.strategy.unstructured)


def _check_apply_configuration(res: Resource, version: str, applied: dict, sch: dict | None) -> None:
    """An apply configuration is of the endpoint's group, version and kind, carries no managedFields
    and has the kind's types (its nulls mean something to apply, so they are left alone), checked
    in the order of upstream's field manager chain: its versionCheckManager first, then
    structuredmerge's managedFields and typing."""
    group, ver, kind = _applied_gvk(applied)
    if (group, ver, kind) != (res.group, version, res.kind):
        raise errors.bad_request(f"invalid object type: {group}/{ver}, Kind={kind}")
    meta = applied.get("metadata")
    if isinstance(meta, dict) and meta.get("managedFields") is not None:
        raise errors.bad_request("metadata.managedFields must be nil")
    if sch is not None:
        found = typed.problems(applied, sch)
        if found:
            raise _untyped_apply_configuration(res, version, applied, found)
        # what only the decoder of the merged object refuses (a range, a format); a custom resource is decoded into
        # no Go struct, so what its schema's formats and ranges refuse is its validation's 422, as an update's
        errs = [] if res.strategy.unstructured else structural.check(applied, sch, False, nulls=False)[0]
        if errs:
            raise errors.bad_request(structural.decode_error_message(res.kind, version, errs[0]))


def _applied_gvk(applied: dict) -> tuple[str, str, str]:
    """An unstructured object's GroupVersionKind: a value that is not a string reads as "", and an
    apiVersion of more than two parts makes the whole GVK empty (ParseGroupVersion's error)."""
    api_version, kind = (v if type(v) is str else "" for v in (applied.get("apiVersion"), applied.get("kind")))
    parts = api_version.split("/") if api_version else ["", ""]
    if len(parts) > 2:
        return "", "", ""
    return ("", *parts, kind) if len(parts) == 1 else (*parts, kind)


def _untyped_apply_configuration(res: Resource, version: str, applied: dict, found: list[str]) -> errors.APIError:
    """structuredmerge's ObjectToTyped refusing values of the wrong type and fields the schema does
    not declare (patch/typed.py), naming the applied object as `namespace/name; group/version, Kind`
    (a GroupVersionKind's String: `/v1` for core).
    Upstream 1.37 returns it as a plain error, a 500 (kubernetes#139253); a client's input is never
    a server error here, so it is the 400 that kubernetes#139255 makes of it, with the same message."""
    meta = applied.get("metadata") if isinstance(applied.get("metadata"), dict) else {}
    detail = found[0] if len(found) == 1 else "\n  ".join(["errors:", *found])
    return errors.bad_request(f"failed to create typed patch object ({meta.get('namespace', '')}/{meta.get('name', '')}; "
                              f"{res.group}/{version}, Kind={res.kind}): {detail}")


def _out_of_range(res: Resource, version: str, number: gojson.OutOfRange, obj: dict,
                  patched: _Patched | None) -> errors.APIError:
    """A number past float64's range where Go's decoder keeps it (a custom resource's JSON, a raw field)."""
    return _undecodable(res.kind, version, obj, f"json: cannot unmarshal number {number} into Go value of type float64",
                        patched)


_SEGMENT = re.compile(r"\.|\[")


@dataclass(frozen=True, slots=True)
class _Patched:
    """A json, merge or strategic merge patch, as its decoding errors quote it."""

    patch_type: str
    raw: bytes
    #: the strict decoder's texts for the patch's own strict errors (under Strict)
    duplicates: tuple[str, ...] = ()

    @property
    def smp(self) -> bool:
        return self.patch_type == STRATEGIC_PATCH

    def strict_error(self, unknown: list[str]) -> str:
        """The patch's own strict errors, then its result's unknown fields."""
        texts = [*self.duplicates, *(f'unknown field "{p}"' for p in self.unknown_order(unknown))]
        return "strict decoding error: " + ", ".join(texts)

    def unknown_order(self, unknown: list[str]) -> list[str]:
        """Unknown fields in the order the decoder meets them: the converter sorts its errors; the
        JSON decoder walks the patched JSON, whose objects the patch went into Go marshals with
        their keys sorted."""
        if self.smp:
            return sorted(unknown, key=lambda p: f'unknown field "{p}"')
        return sorted(unknown, key=lambda p: [int(s[:-1]) if s[-1:] == "]" else s for s in _SEGMENT.split(p)])


def decode_patched(kind: str, version: str, obj: Any, definition: str, opts: WriteOptions, patch_type: str,
                   raw: bytes, duplicates: tuple[str, ...] = ()) -> tuple[dict, list[str]]:
    """A subresource's patched object (a Scale), decoded as its Go type as a patch's result is: a
    type error, or under Strict an unknown field or a key the patch repeats (`duplicates`), is the
    patchers' 422; returns `obj` and, under Warn, the unknown fields' warnings."""
    patched = _Patched(patch_type, raw, duplicates)
    if type(obj) is not dict:
        what = "array" if type(obj) is list else "null" if obj is None else gojson.value_kind(obj)
        raise _undecodable(kind, version, obj, f"json: cannot unmarshal {what} into Go value of type "
                                               f"{definition.rsplit('.', 2)[-2]}.{kind}", patched)
    sch = schemas.definitions()[definition]
    strict = opts.field_validation in ("Strict", "Warn")
    errs, unknown = structural.check(obj, sch, strict)
    while errs and patched.smp and structural.convert_number(errs[0], obj):
        errs, unknown = structural.check(obj, sch, strict)
    if errs:
        raise _undecodable(kind, version, obj, errs[0], patched)
    if (unknown or duplicates) and opts.field_validation == "Strict":
        raise _undecodable(kind, version, obj, patched.strict_error(unknown), patched)
    return obj, structural.unknown_field_warnings(unknown) if opts.field_validation == "Warn" else []


def _undecodable(kind: str, version: str, obj: Any, err: str, patched: _Patched | None) -> errors.APIError:
    """A body that does not decode into its kind: a 400 naming the kind; for a patch's result, the
    422 of upstream's patchers, `patch: Invalid value: <what was decoded>: <the error>` with an
    empty kind and name. The json and merge patchers decode the patched object's JSON (quoted
    here with its keys sorted, as Go marshals what the patch touched; untouched parts keep the
    struct's order upstream); the strategic merge patcher converts the patched map and quotes the
    patch, as %+v prints a map."""
    if patched is None:
        return errors.bad_request(structural.decode_error_message(kind, version, err))
    if patched.smp:
        value, err = gofmt.value(serializer.loads_json(patched.raw, lenient=True)), structural.unstructured_error(err)
    else:
        value = gofmt.marshal(obj)
    cause = invalid("patch", value, err)
    return errors.APIError(422, "Invalid", f' "" is invalid: {cause}',
                           {"causes": [{"reason": cause.reason, "message": cause.message, "field": cause.field}]})


def _precondition_failed(res: Resource, key: str, what: str, wanted: str, actual: str) -> str:
    """The storage layer's text for a failed precondition, as upstream's 409 quotes it."""
    return (f"StorageError: invalid object, Code: 4, Key: {res.etcd_key(key)}, ResourceVersion: 0, AdditionalErrorMsg: "
            f"Precondition failed: {what} in precondition: {wanted}, {what} in object meta: {actual}")


def _resource_version_required(res: Resource, name: str) -> errors.APIError:
    """Store.Update's refusal of an update without a resourceVersion where the strategy does not allow
    an unconditional one: an Invalid naming the resource (its "kind" is the plural) and the zero
    uint64 as Go's %#v prints it."""
    gr = f"{res.plural}.{res.group}" if res.group else res.plural
    why = "Invalid value: 0x0: must be specified for an update"
    return errors.APIError(422, "Invalid", f'{gr} "{name}" is invalid: metadata.resourceVersion: {why}',
                           {"name": name, **({"group": res.group} if res.group else {}), "kind": res.plural,
                            "causes": [{"reason": "FieldValueInvalid", "message": why, "field": "metadata.resourceVersion"}]})


def _too_large_resource_version(requested: int, current: int, retry: int = 1) -> errors.APIError:
    """Upstream's watch cache answer to a read from the future: 504, retry in a second (etcd's, to an
    exact revision: no retry hint, the field omitted as empty)."""
    details: dict[str, Any] = {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]}
    if retry:
        details["retryAfterSeconds"] = retry
    return errors.APIError(504, "Timeout", f"Timeout: Too large resource version: {requested}, current: {current}", details)


def _patch_error(e) -> errors.APIError:
    """PatchError (and ApplyConflict) carry the Status fields upstream returns."""
    return errors.APIError(e.code, e.reason, e.status_message, e.details)
