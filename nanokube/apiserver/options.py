"""Request options (query parameters and DeleteOptions bodies) decoded and
validated as kube-apiserver does before any storage is touched.

Query parameters that do not convert are a 400 (`strconv.ParseInt: parsing
"abc": invalid syntax`); options that convert but are not allowed are a 422
on the options kind, e.g. `DeleteOptions.meta.k8s.io "" is invalid: dryRun:
Unsupported value: ["Bogus"]: supported values: "All"` (apimachinery's
`ValidateDeleteOptions`, `ValidateFieldManager`, `ValidateDryRun`, `ValidateFieldValidation`), and
pods/log's PodLogOptions (`ValidatePodLogOptions`).
"""

from __future__ import annotations

import random
from typing import Any, Mapping

from ..machinery import errors, featuregates, goduration, gotime
from ..machinery import validation as v
from ..machinery.queryparams import integer
from ..machinery.streaming import log_stream_errors
from . import structural

_PROPAGATION = ("Foreground", "Background", "Orphan", "nil")
#: the DeleteOptions field that deletes a corrupt object unread (encryption/corrupt.py)
IGNORE_READ_ERROR = "ignoreStoreReadErrorWithClusterBreakingPotential"
_DELETE_OPTIONS = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"
#: metav1.Time's zero, as RFC 3339 formats it
_ZERO_TIME = "0001-01-01T00:00:00Z"
#: kube-apiserver's --min-request-timeout default, in seconds
MIN_REQUEST_TIMEOUT = 1800
#: kube-apiserver's --request-timeout default, in seconds
REQUEST_TIMEOUT = 60.0


def options_invalid(kind: str, errs: list[v.FieldError]) -> errors.APIError:
    """The 422 for invalid request options (`<Kind>.meta.k8s.io "" is invalid: ...`)."""
    return errors.invalid("meta.k8s.io", kind, "", errs)


def watch_timeout(timeout_seconds: int | None, min_request_timeout: float, draw=random.random) -> float:
    """The seconds a watch is served (upstream's request.GetTimeoutForWatch): its timeoutSeconds, or
    when that is absent or 0 a random time in [min, 2*min) of --min-request-timeout, so that the
    watches clients opened together do not all end, and come back, together. A negative one, or 0
    with a zero --min-request-timeout, ends the watch at once, as upstream's; so does one whose
    seconds wrap past an int64 of nanoseconds to a negative duration (goduration.seconds)."""
    timeout = goduration.seconds(timeout_seconds) if timeout_seconds else 0.0
    if timeout:
        return timeout
    return min_request_timeout * (draw() + 1.0)


def request_deadline(query: Mapping[str, str]) -> float:
    """The seconds a request that is not long-running may take (WithRequestDeadline): the `timeout`
    query parameter (a Go duration) where it is above 0 and below --request-timeout's 60 s, else 60 s.
    One that does not parse is a 400 in upstream's words, whatever the request."""
    value = query.get("timeout") or ""
    if not value:
        return REQUEST_TIMEOUT
    try:
        seconds = goduration.parse(value)
    except ValueError as e:
        raise errors.bad_request(f"invalid timeout specified in the request URL - {e}") from None
    return seconds if 0 < seconds < REQUEST_TIMEOUT else REQUEST_TIMEOUT


def boolean(query: Mapping[str, str], name: str) -> bool | None:
    """A bool query parameter as Go's strconv.ParseBool reads it."""
    raw = query.get(name)
    if raw is None:
        return None
    if raw in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if raw in ("", "0", "f", "F", "false", "FALSE", "False"):
        return False
    raise errors.bad_request(f'strconv.ParseBool: parsing "{raw}": invalid syntax')


def pod_log_options(query: Mapping[str, str], name: str) -> dict[str, str]:
    """A pods/log query as kube-apiserver reads it, before it looks the pod up: converted into
    PodLogOptions in its fields' order (a number or time that does not convert is a 400 in
    strconv's or time.Parse's words; a bool is false only as "0" or "false", any case), then
    ValidatePodLogOptions, every error at once (tailLines, limitBytes, then sinceSeconds or both
    since options, then stream: forbidden while PodLogsQuerySplitStreams is off, else defaulted to
    All and checked), a 422 on PodLogOptions named after the pod. Returns the query LogLocation
    hands the kubelet: true bools as "true", numbers as they parsed, sinceTime in RFC 3339; and
    insecureSkipTLSVerifyBackend, which the kubelet client takes out (its dial's, not the kubelet's)."""
    flags = {k: k in query and query[k] != "0" and query[k].lower() != "false"
             for k in ("follow", "previous", "timestamps", "insecureSkipTLSVerifyBackend")}
    since_seconds = integer(query, "sinceSeconds")
    since_time = None
    if "sinceTime" in query:
        raw = query["sinceTime"]
        try:  # metav1.Time.UnmarshalQueryParameter: empty or "null" is the zero time
            since_time = _ZERO_TIME if raw in ("", "null") else gotime.format_rfc3339(gotime.parse_rfc3339(raw))
        except gotime.TimeParseError as e:
            raise errors.bad_request(str(e)) from None
    tail_lines, limit_bytes = integer(query, "tailLines"), integer(query, "limitBytes")
    errs = []
    if tail_lines is not None and tail_lines < 0:
        errs.append(v.invalid("tailLines", tail_lines, "must be greater than or equal to 0"))
    if limit_bytes is not None and limit_bytes < 1:
        errs.append(v.invalid("limitBytes", limit_bytes, "must be greater than 0"))
    if since_seconds is not None and since_time is not None:
        # field.NewPath(""): an empty name prints as an empty subscript
        errs.append(v.forbidden("[]", "at most one of `sinceTime` or `sinceSeconds` may be specified"))
    elif since_seconds is not None and since_seconds < 1:
        errs.append(v.invalid("sinceSeconds", since_seconds, "must be greater than 0"))
    stream = query.get("stream")
    if featuregates.enabled("PodLogsQuerySplitStreams"):
        stream = "All" if stream is None else stream  # SetDefaults_PodLogOptions
        errs.extend(log_stream_errors(stream, tail_lines))
    elif stream is not None:
        errs.append(v.forbidden("stream", "may not be specified"))
    if errs:
        raise errors.invalid("", "PodLogOptions", name, errs)
    out = {k: "true" for k, on in flags.items() if on}
    for key, value in (("sinceSeconds", since_seconds), ("sinceTime", since_time), ("tailLines", tail_lines),
                       ("limitBytes", limit_bytes), ("stream", stream)):
        if value is not None:
            out[key] = str(value)
    return out


def field_manager_errors(manager: str) -> list[v.FieldError]:
    """ValidateFieldManager of the fieldManager query parameter."""
    return v.field_manager_errors(manager, "fieldManager")


def dry_run_errors(values: list[Any]) -> list[v.FieldError]:
    if any(d != "All" for d in values):
        return [v.not_supported("dryRun", values, ["All"])]
    return []


_FIELD_VALIDATIONS = ("", "Ignore", "Strict", "Warn")  # upstream's sorted set: the empty value allowed too


def field_validation_errors(value: str) -> list[v.FieldError]:
    """ValidateFieldValidation."""
    return [] if value in _FIELD_VALIDATIONS else [v.not_supported("fieldValidation", value, _FIELD_VALIDATIONS)]


APPLY_PATCH = "application/apply-patch+yaml"


def write_options_errors(manager: str, dry_run: list[str], field_validation: str,
                         patch_type: str | None = None, force: str | None = None) -> list[v.FieldError]:
    """ValidateCreateOptions and ValidateUpdateOptions, or ValidatePatchOptions when a patch type is
    given: the patch type's own rule (an apply needs a fieldManager, any other patch may not carry
    force, even force=false) comes first, then the options every write shares."""
    errs = []
    if patch_type == APPLY_PATCH:
        if not manager:
            errs.append(v.required("fieldManager", "is required for apply patch"))
    elif patch_type is not None and force is not None:
        errs.append(v.forbidden("force", "may not be specified for non-apply patch"))
    return errs + field_manager_errors(manager) + dry_run_errors(dry_run) + field_validation_errors(field_validation)


#: the scheme the DELETE handler decodes its body with (named as Go names a scheme: where it was made)
_META_SCHEME = "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme/register.go:27"


def delete_body_kind_errors(body: Any) -> None:
    """A DELETE body's kind and apiVersion as the meta decoder reads them: DeleteOptions is
    unversioned there, so any group/version of it is taken (meta.k8s.io/v1 fills what is left
    out); another kind is not registered, a 400 with the decoder's words."""
    if type(body) is not dict or not isinstance(body.get("kind", ""), str) \
            or not isinstance(body.get("apiVersion", ""), str):
        return  # delete_options reports the types
    api = body.get("apiVersion") or ""
    if api.count("/") > 1:
        raise errors.bad_request(f"unexpected GroupVersion string: {api}")
    kind = body.get("kind") or "DeleteOptions"
    if kind != "DeleteOptions":
        raise errors.bad_request(
            f'no kind "{kind}" is registered for version "{api or "meta.k8s.io/v1"}" in scheme "{_META_SCHEME}"')


def delete_options(query: Mapping[str, str], body: Any, dry_run_query: list[str]) -> dict:
    """DeleteOptions from a DELETE's body and query, type-checked and validated."""
    if body is None:
        body = {}
    if type(body) is not dict:
        kind = "array" if type(body) is list else type(body).__name__
        raise errors.bad_request(f"json: cannot unmarshal {kind} into Go value of type v1.DeleteOptions")
    errs = structural.definition_errors(body, _DELETE_OPTIONS)
    if errs:
        raise errors.bad_request(errs[0])
    options = dict(body)
    grace = integer(query, "gracePeriodSeconds")
    if grace is not None:
        options["gracePeriodSeconds"] = grace
    orphan = boolean(query, "orphanDependents")
    if orphan is not None:
        options["orphanDependents"] = orphan
    if query.get("propagationPolicy") is not None:  # (named but empty: a policy of "", refused below)
        options["propagationPolicy"] = query["propagationPolicy"]
    if dry_run_query:
        options["dryRun"] = list(dry_run_query)
    problems = dry_run_errors(options.get("dryRun") or [])
    policy = options.get("propagationPolicy")
    if options.get("orphanDependents") is not None and policy is not None:
        problems.append(v.invalid("propagationPolicy", policy, "orphanDependents and deletionPropagation cannot be both set"))
    elif policy is not None and policy not in _PROPAGATION:
        problems.append(v.not_supported("propagationPolicy", policy, _PROPAGATION))
    if options.get(IGNORE_READ_ERROR):  # what a delete of an object left unread cannot honour
        problems += [v.invalid(IGNORE_READ_ERROR, True, f"cannot be set together with .{other}")
                     for other in ("propagationPolicy", "orphanDependents", "gracePeriodSeconds", "preconditions")
                     if options.get(other) is not None]
    if problems:
        raise options_invalid("DeleteOptions", problems)
    return options


NOT_OLDER_THAN = "NotOlderThan"
_LIST_MATCHES = ("Exact", NOT_OLDER_THAN, "")
_MATCH = "resourceVersionMatch"


def watch_list_defaults(resource_version: str, match: str, send_initial_events: bool | None) -> tuple[str, bool | None]:
    """SetListOptionsDefaults with the WatchList gate on (1.34+): a watch that names neither
    sendInitialEvents nor resourceVersionMatch and starts from "" or "0" is a watch-list, as
    the API documents sendInitialEvents' default; returns (match, sendInitialEvents)."""
    if send_initial_events is None and not match and resource_version in ("", "0"):
        return NOT_OLDER_THAN, True
    return match, send_initial_events


def list_options_errors(watch: bool, resource_version: str, match: str, send_initial_events: bool | None,
                        continue_: str) -> list[v.FieldError]:
    """ValidateListOptions (WatchList on), in its order; a 422 on ListOptions.meta.k8s.io."""
    errs = []
    if watch:
        if send_initial_events is not None and match != NOT_OLDER_THAN:
            errs.append(v.forbidden(_MATCH, f"sendInitialEvents requires setting {_MATCH} to {NOT_OLDER_THAN}"))
        if match:
            if send_initial_events is None:
                errs.append(v.forbidden(_MATCH, f"{_MATCH} is forbidden for watch unless sendInitialEvents is provided"))
            if match != NOT_OLDER_THAN:
                errs.append(v.not_supported(_MATCH, match, [NOT_OLDER_THAN]))
            if continue_:
                errs.append(v.forbidden(_MATCH, f"{_MATCH} is forbidden when continue is provided"))
        return errs
    if match:
        if not resource_version:
            errs.append(v.forbidden(_MATCH, f"{_MATCH} is forbidden unless resourceVersion is provided"))
        if continue_:
            errs.append(v.forbidden(_MATCH, f"{_MATCH} is forbidden when continue is provided"))
        if match not in _LIST_MATCHES:
            errs.append(v.not_supported(_MATCH, match, _LIST_MATCHES))
        if match == "Exact" and resource_version == "0":
            errs.append(v.forbidden(_MATCH, f'{_MATCH} "exact" is forbidden for resourceVersion "0"'))
    if send_initial_events is not None:
        errs.append(v.forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    return errs
