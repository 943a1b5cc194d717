"""batch/v1: Jobs.

The Job's selector is generated from its uid at create time (the
`batch.kubernetes.io/controller-uid` label), so pods of one Job never match
another's; `manualSelector: true` opts out.
"""

from __future__ import annotations

import re
import time
from typing import Callable

from ..clock import REAL
from .apps import (
    age_column,
    api_doc,
    containers_column,
    default_pod_template,
    ensure_template,
    images_column,
    name_column,
    nonnegative,
    pod_template_errors,
    selector_column,
    selector_matches,
    template_ips,
)
from .base import Column, Obj, Resource, Strategy, register
from .gated_fields import drop_job_fields
from .core_printing import human_duration, parse_time
from ..machinery.conditions import is_condition_true
from ..machinery.gofmt import Struct, quote
from ..machinery.jobindexes import first_overlap
from ..machinery.validation import (
    FieldError,
    OMIT,
    Stringer,
    dns1123_label,
    dns1123_subdomain,
    duplicate,
    immutable,
    invalid,
    label_selector_value,
    not_supported,
    qualified_name,
    required,
    too_long,
    too_many,
    validate_label_selector,
)
from . import pod_warnings

Clock = Callable[[], float]

CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID = "controller-uid"
LEGACY_JOB_NAME = "job-name"

_MAX_INT32 = 2**31 - 1
_MAX_PARALLELISM_INDEXED = 100_000
_MAX_FAILED_INDEXES = 100_000
_COMPLETIONS_SOFT_LIMIT = 100_000
_PARALLELISM_FOR_HIGH_COMPLETIONS = 10_000
_MAX_MANAGED_BY = 63
_MAX_PFP_RULES = 20
_MAX_EXIT_CODES = 255
_MAX_POD_CONDITION_PATTERNS = 20
_MAX_SUCCESS_RULES = 20
_MAX_SUCCEEDED_INDEXES_LEN = 64 * 1024
_MAX_SCHEDULING_CLAIMS = 4
_HTTP_PATH = re.compile(r"^[A-Za-z0-9/\-._~%!$&'()*+,;=:]+\Z")


def job_status(job: Obj) -> str:
    """The STATUS column of kubectl 1.32's job printer."""
    conds = (job.get("status") or {}).get("conditions")
    if is_condition_true(conds, "Complete"):
        return "Complete"
    if is_condition_true(conds, "Failed"):
        return "Failed"
    if (job.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    for ctype in ("Suspended", "FailureTarget", "SuccessCriteriaMet"):
        if is_condition_true(conds, ctype):
            return ctype
    return "Running"


def job_completions(job: Obj) -> str:
    spec, succeeded = job.get("spec") or {}, (job.get("status") or {}).get("succeeded", 0)
    if spec.get("completions") is not None:
        return f"{succeeded}/{spec['completions']}"
    parallelism = spec.get("parallelism") or 0
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def job_duration(job: Obj, clock: Clock) -> str:
    status = job.get("status") or {}
    start = parse_time(status.get("startTime"))
    if start is None:
        return ""
    end = parse_time(status.get("completionTime"))
    return human_duration((clock() if end is None else end) - start)


def parse_indexes(text: str, completions: int) -> int:
    """validateIndexesFormat: count the indexes of '1,3-5,7' (strictly increasing, below completions)."""
    total, last = 0, None
    for interval in text.split(",") if text else ():
        limits = interval.split("-")
        if len(limits) > 2:
            raise ValueError(f'the fragment "{interval}" violates the requirement that an index interval can have '
                             "at most two parts separated by '-'")
        bounds = [_index(x, completions) for x in limits]
        for b in bounds:
            if last is not None and last >= b:
                raise ValueError(f"non-increasing order, previous: {last}, current: {b}")
            last = b
        total += bounds[-1] - bounds[0] + 1
    return total


def _index(text: str, completions: int) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ValueError(f'cannot convert string to integer for index: "{text}"')
    if int(text) >= completions:
        raise ValueError(f'too large index: "{text}"')
    return int(text)


class JobStrategy(Strategy):
    field_selectors = {"status.successful": lambda o: str((o.get("status") or {}).get("succeeded", 0))}

    def unsupported_field_label(self, label: str, version: str) -> str:
        return f"field label {quote(label)} not supported for batchv1.Job"

    def __init__(self, clock: Clock = REAL.now) -> None:
        self.clock = clock
        self.columns = [
            name_column(),
            Column("Status", "string", job_status, "Status of the job."),
            Column("Completions", "string", job_completions, api_doc("io.k8s.api.batch.v1.JobStatus", "succeeded")),
            Column("Duration", "string", lambda o: job_duration(o, self.clock), "Time required to complete the job."),
            age_column(),
            containers_column(),
            images_column(),
            selector_column(api_doc("io.k8s.api.batch.v1.JobSpec", "selector")),
        ]

    def default(self, obj: Obj, version: str) -> None:
        """SetDefaults_Job (batch/v1)."""
        spec = obj.setdefault("spec", {})
        if spec.get("completions") is None and spec.get("parallelism") is None:
            spec["completions"] = 1
        spec.setdefault("parallelism", 1)
        if spec.get("backoffLimit") is None:
            spec["backoffLimit"] = _MAX_INT32 if spec.get("backoffLimitPerIndex") is not None else 6
        _labels_from_template(obj)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        pfp = spec.get("podFailurePolicy")
        for rule in (pfp or {}).get("rules") or []:
            for pattern in rule.get("onPodConditions") or []:
                if not pattern.get("status"):  # a string without omitempty: "" when left out
                    pattern["status"] = "True"
        spec.setdefault("podReplacementPolicy", "Failed" if pfp is not None else "TerminatingOrFailed")
        default_pod_template(ensure_template(spec))

    def prepare_for_create(self, obj: Obj) -> None:
        drop_job_fields(obj.get("spec") or {})
        if not (obj.get("spec") or {}).get("manualSelector"):
            _generate_selector(obj)
        _labels_from_template(obj)

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        drop_job_fields(new.get("spec") or {}, old.get("spec"))

    def warnings_on_create(self, obj):
        return pod_warnings.job_create(obj)

    def warnings_on_update(self, new, old):
        return pod_warnings.job_update(new, old)

    def validate(self, obj: Obj) -> list[FieldError]:
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        errs = _validate_generated_selector(obj)
        errs += validate_job_spec(spec, "spec")
        completions = spec.get("completions")
        if spec.get("completionMode") == "Indexed" and completions and completions > 0:
            hostname = f"{meta.get('name', '')}-{completions - 1}"
            if dns1123_label(hostname):
                errs.append(invalid("metadata.name", meta.get("name", ""),
                                    f"will not able to create pod with invalid DNS label: {hostname}"))
        return errs

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        errs = validate_job_spec(spec, "spec", old_ips=template_ips(old.get("spec"))) + _validate_completions_update(spec, old_spec)
        if spec.get("selector") != old_spec.get("selector"):
            errs.append(immutable("spec.selector", label_selector_value(spec.get("selector"))))
        if _pruned(spec.get("template") or {}) != _pruned(_old_template_for_comparison(new, old)):
            errs.append(immutable("spec.template", spec.get("template")))
        for f in ("completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy", "successPolicy"):
            if spec.get(f) != old_spec.get(f):
                errs.append(immutable(f"spec.{f}", _INTERNAL.get(f, _same)(spec.get(f))))
        claims = (spec.get("scheduling") or {}).get("resourceClaims")
        if claims != (old_spec.get("scheduling") or {}).get("resourceClaims"):
            errs.append(immutable("spec.scheduling.resourceClaims", claims))
        return errs

    def validate_status_update(self, new: Obj, old: Obj) -> list[FieldError]:
        status = new.get("status") or {}
        errs: list[FieldError] = []
        for f in ("active", "succeeded", "failed", "ready", "terminating"):
            errs += nonnegative(status, f, "status")
        seen: set[str] = set()
        for kind in ("succeeded", "failed"):
            for i, uid in enumerate((status.get("uncountedTerminatedPods") or {}).get(kind) or []):
                p = f"status.uncountedTerminatedPods.{kind}[{i}]"
                if not uid:
                    errs.append(invalid(p, uid, "must not be empty"))
                elif uid in seen:
                    errs.append(duplicate(p, uid))
                else:
                    seen.add(uid)
        old_status = old.get("status") or {}
        errs += _validate_outcome(new, old_status) + _validate_index_lists(new, old_status)
        errs += _validate_pod_counts(status, old_status) + _validate_success_criteria(new)
        for ctype in ("Failed", "Complete", "FailureTarget"):
            if is_condition_true(old_status.get("conditions"), ctype) and \
                    not is_condition_true(status.get("conditions"), ctype):
                errs.append(invalid("status.conditions", OMIT, f"cannot disable the terminal {ctype}=True condition"))
        spec = new.get("spec") or {}
        scalable = spec.get("completionMode") == "Indexed" and spec.get("completions") == spec.get("parallelism")
        for f in ("failed",) if scalable else ("failed", "succeeded"):  # an elastic Indexed Job may scale down
            if status.get(f, 0) < old_status.get(f, 0):
                errs.append(invalid(f"status.{f}", status.get(f, 0), f"cannot decrease the {f} counter"))
        done, was_done = status.get("completionTime"), old_status.get("completionTime")
        if done and was_done and _at(done) != _at(was_done):
            errs.append(invalid("status.completionTime", _time(done), "completionTime cannot be mutated"))
        started, was_started = _at(status.get("startTime")), _at(old_status.get("startTime"))
        resuming = _true(old_status, "Suspended") and _false(status, "Suspended")
        if was_started is not None and started != was_started and not resuming and not spec.get("suspend"):
            # (kubernetes#136585, 1.36: Invalid with the new value, where it was a Required "cannot be removed")
            errs.append(invalid("status.startTime", _time(status["startTime"]) if started is not None else None,
                                "field is immutable for unsuspended job once set"))
        met, was_met = _true(status, "SuccessCriteriaMet"), _true(old_status, "SuccessCriteriaMet")
        if was_met and not met:
            errs.append(invalid("status.conditions", OMIT, "cannot disable the SuccessCriteriaMet=True condition"))
        if _true(old_status, "Complete") and not was_met and met:
            errs.append(invalid("status.conditions", OMIT,
                                "cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions"))
        return errs


def _true(status: dict, ctype: str) -> bool:
    return is_condition_true(status.get("conditions"), ctype)


def _false(status: dict, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "False" for c in status.get("conditions") or [])


def _at(t: str | None) -> float | None:
    return parse_time(t) if t else None


def _time(t: str) -> Stringer:
    """A metav1.Time bad value, which ErrorBody prints with time.Time's String."""
    return Stringer(time.strftime("%Y-%m-%d %H:%M:%S +0000 UTC", time.gmtime(parse_time(t))))


def _validate_outcome(job: Obj, old: dict) -> list[FieldError]:
    """JobManagedBy's status rules on a Job's end (an external controller, MultiKueue's, writes the
    status): each checked only when a field it reads changed, so a status written before the rules
    existed can still be updated."""
    st = job.get("status") or {}
    complete, failed, target = _true(st, "Complete"), _true(st, "Failed"), _true(st, "FailureTarget")
    finished = complete or failed
    changed = {f for f in ("active", "startTime", "completionTime", "uncountedTerminatedPods")
               if (st.get(f) or None) != (old.get(f) or None)}
    complete_changed = complete != _true(old, "Complete")
    finished_changed = finished != (_true(old, "Complete") or _true(old, "Failed"))
    spec = job.get("spec") or {}
    errs: list[FieldError] = []
    if complete and failed and (complete_changed or failed != _true(old, "Failed")):
        errs.append(invalid("status.conditions", OMIT, "cannot set Complete=True and Failed=true conditions"))
    if complete and target and (complete_changed or target != _true(old, "FailureTarget")):
        errs.append(invalid("status.conditions", OMIT, "cannot set Complete=True and FailureTarget=true conditions"))
    if complete_changed or "completionTime" in changed:
        if st.get("completionTime") and not complete:
            errs.append(invalid("status.completionTime", _time(st["completionTime"]),
                                "cannot set completionTime when there is no Complete=True condition"))
        if not st.get("completionTime") and complete:
            errs.append(required("status.completionTime", "completionTime is required for Complete jobs"))
    if changed & {"startTime", "completionTime"} and st.get("startTime") and st.get("completionTime") \
            and parse_time(st["completionTime"]) < parse_time(st["startTime"]):
        errs.append(invalid("status.completionTime", _time(st["completionTime"]),
                            "completionTime cannot be set before startTime"))
    if failed and not target and (failed != _true(old, "Failed") or st.get("failedIndexes") != old.get("failedIndexes")):
        errs.append(invalid("status.conditions", OMIT,
                            "cannot set Failed=True condition without the FailureTarget=true condition"))
    if complete and not _true(st, "SuccessCriteriaMet") and \
            (complete_changed or _true(old, "SuccessCriteriaMet")):
        errs.append(invalid("status.conditions", OMIT,
                            "cannot set Complete=True condition without the SuccessCriteriaMet=true condition"))
    if finished and (finished_changed or "active" in changed) and st.get("active", 0) > 0:
        errs.append(invalid("status.active", st["active"], "active>0 is invalid for finished job"))
    if finished and (finished_changed or "startTime" in changed) and not st.get("startTime") \
            and not (spec.get("suspend") and spec.get("completions") == 0):
        errs.append(required("status.startTime", "startTime is required for finished job"))
    uncounted = st.get("uncountedTerminatedPods") or {}
    if finished and (finished_changed or "uncountedTerminatedPods" in changed) and \
            (uncounted.get("succeeded") or uncounted.get("failed")):
        errs.append(invalid("status.uncountedTerminatedPods", Struct(
            {k: uncounted[k] for k in ("succeeded", "failed") if uncounted.get(k)}),
            "uncountedTerminatedPods needs to be empty for finished job"))
    return errs


def _validate_pod_counts(st: dict, old: dict) -> list[FieldError]:
    """A finished Job has no terminating pods, and no Job more ready pods than active ones; each checked
    only when a field it reads changed (ready and terminating as pointers: unset is not 0)."""
    errs: list[FieldError] = []
    finished = _true(st, "Complete") or _true(st, "Failed")
    finished_changed = finished != (_true(old, "Complete") or _true(old, "Failed"))
    terminating, ready, active = st.get("terminating"), st.get("ready"), st.get("active", 0)
    if finished and (finished_changed or terminating != old.get("terminating")) and (terminating or 0) > 0:
        errs.append(invalid("status.terminating", terminating, "terminating>0 is invalid for finished job"))
    if (ready != old.get("ready") or active != old.get("active", 0)) and ready is not None and ready > active:
        errs.append(invalid("status.ready", ready, "cannot set more ready pods than active"))
    return errs


def _validate_success_criteria(job: Obj) -> list[FieldError]:
    """validateJobStatus' SuccessCriteriaMet rules, checked on every status write."""
    st = job.get("status") or {}
    met, errs = _true(st, "SuccessCriteriaMet"), []
    if met and _true(st, "Failed"):
        errs.append(invalid("status.conditions", OMIT, "cannot set SuccessCriteriaMet=True and Failed=true conditions"))
    if met and _true(st, "FailureTarget"):
        errs.append(invalid("status.conditions", OMIT,
                            "cannot set SuccessCriteriaMet=True and FailureTarget=true conditions"))
    if (job.get("spec") or {}).get("successPolicy") is not None and not met and _true(st, "Complete"):
        errs.append(invalid("status.conditions", OMIT,
                            "cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True"))
    return errs


def _validate_index_lists(job: Obj, old_status: dict) -> list[FieldError]:
    """completedIndexes and failedIndexes, checked only when they change so
    that a status written before these rules existed can still be updated."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    completions, indexed = spec.get("completions"), spec.get("completionMode") == "Indexed"
    completed, failed = status.get("completedIndexes", ""), status.get("failedIndexes")
    completed_changed = completed != old_status.get("completedIndexes", "")
    failed_changed = failed != old_status.get("failedIndexes")
    errs: list[FieldError] = []
    for name, value, check in (("completedIndexes", completed, completed_changed and completions is not None),
                               ("failedIndexes", failed, failed_changed and completions is not None
                                and spec.get("backoffLimitPerIndex") is not None and failed is not None)):
        if check:
            try:
                parse_indexes(value, completions)
            except ValueError as e:
                errs.append(invalid(f"status.{name}", value, f"error parsing {name}: {e}"))
    if completed_changed and completed and not indexed:
        errs.append(invalid("status.completedIndexes", completed,
                            "cannot set non-empty completedIndexes when non-indexed completion mode"))
    if failed_changed and failed is not None and spec.get("backoffLimitPerIndex") is None:
        errs.append(invalid("status.failedIndexes", failed,
                            "cannot set non-null failedIndexes when backoffLimitPerIndex is null"))
    if (completed_changed or failed_changed) and completions is not None and failed \
            and (at := _first_overlap(completed, failed, completions)) is not None:
        errs.append(invalid("status.failedIndexes", failed, f"failedIndexes and completedIndexes overlap at index: {at}"))
    return errs


def _first_overlap(completed: str, failed: str, completions: int) -> int | None:
    """validateFailedIndexesNotOverlapCompleted: the two lists walked interval by interval, as their
    format keeps them sorted, to the first pair that overlaps; an interval that does not parse is
    skipped (its format is reported on its own). Linear in the intervals, not the indexes: two
    intervals of 3,000,000 indexes, made into sets, held the event loop 2.2 s."""
    if not completed or not failed:
        return None
    def parsed(text: str) -> list[tuple[int, int]]:
        return [i for part in text.split(",") if (i := _interval(part, completions)) is not None]
    return first_overlap(parsed(completed), parsed(failed))


def _interval(text: str, completions: int) -> tuple[int, int] | None:
    """parseIndexInterval: the first and last index of `a` or `a-b`, None where it does not parse."""
    if not text:
        return None
    try:
        parse_indexes(text, completions)
    except ValueError:
        return None
    bounds = text.split("-")
    return int(bounds[0]), int(bounds[-1])


def _labels_from_template(obj: Obj) -> None:
    """A Job without labels takes its template's (batch/v1 defaulting, applied on every decode)."""
    meta = obj.setdefault("metadata", {})
    tlabels = ((obj.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels")
    if tlabels is not None and not meta.get("labels"):
        meta["labels"] = dict(tlabels)


def _generate_selector(obj: Obj) -> None:
    """generateSelector: label the template with the job's name and uid and select on the uid."""
    meta = obj.get("metadata") or {}
    template = obj["spec"].setdefault("template", {})
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    for key in (LEGACY_JOB_NAME, JOB_NAME):
        labels.setdefault(key, meta.get("name", ""))
    for key in (LEGACY_CONTROLLER_UID, CONTROLLER_UID):
        labels.setdefault(key, meta.get("uid", ""))
    selector = obj["spec"].get("selector") or {}
    selector.setdefault("matchLabels", {}).setdefault(CONTROLLER_UID, meta.get("uid", ""))
    obj["spec"]["selector"] = selector


def _validate_generated_selector(obj: Obj) -> list[FieldError]:
    spec, meta = obj.get("spec") or {}, obj.get("metadata") or {}
    if spec.get("manualSelector") or spec.get("selector") is None:
        return []
    errs: list[FieldError] = []
    uid, name = meta.get("uid", ""), meta.get("name", "")
    if (spec["selector"].get("matchLabels") or {}).get(CONTROLLER_UID) != uid:
        errs.append(invalid("spec.selector", label_selector_value(spec["selector"]), "`selector` not auto-generated"))
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if labels.get(CONTROLLER_UID) != uid:
        errs.append(required(f"spec.template.metadata.labels[{CONTROLLER_UID}]", f"must be '{uid}'"))
    if labels.get(JOB_NAME) != name:
        errs.append(required(f"spec.template.metadata.labels[{JOB_NAME}]", f"must be '{name}'"))
    return errs


def validate_job_spec(spec: dict, path: str, with_selector: bool = True, old_ips: tuple[str, ...] = ()) -> list[FieldError]:
    """ValidateJobSpec: counts, completion modes, policies, template and selector
    (a CronJob's jobTemplate has none yet: `with_selector=False`); `old_ips`, the old template's,
    stand unchecked."""
    errs: list[FieldError] = []
    for f in ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit", "ttlSecondsAfterFinished",
              "backoffLimitPerIndex", "maxFailedIndexes"):
        errs += nonnegative(spec, f, path)
    if spec.get("maxFailedIndexes") is not None and spec.get("backoffLimitPerIndex") is None:
        errs.append(required(f"{path}.backoffLimitPerIndex", "when maxFailedIndexes is specified"))
    errs += _validate_managed_by(spec.get("managedBy"), f"{path}.managedBy")
    errs += _validate_completion_mode(spec, path)
    if spec.get("podFailurePolicy") is not None:
        errs += _validate_pod_failure_policy(spec, f"{path}.podFailurePolicy")
    errs += _validate_pod_replacement_policy(spec, f"{path}.podReplacementPolicy")
    if spec.get("successPolicy") is not None:
        errs += _validate_success_policy(spec, f"{path}.successPolicy")
    claims = (spec.get("scheduling") or {}).get("resourceClaims") or []
    if len(claims) > _MAX_SCHEDULING_CLAIMS:
        errs.append(too_many(f"{path}.scheduling.resourceClaims", len(claims), _MAX_SCHEDULING_CLAIMS))
    template = spec.get("template") or {}
    errs += pod_template_errors(template, f"{path}.template", old_ips)
    rp = (template.get("spec") or {}).get("restartPolicy", "")
    if rp in ("Always", ""):
        errs.append(required(f"{path}.template.spec.restartPolicy", 'valid values: "OnFailure", "Never"'))
    elif rp not in ("OnFailure", "Never"):
        errs.append(not_supported(f"{path}.template.spec.restartPolicy", rp, ["OnFailure", "Never"]))
    elif spec.get("podFailurePolicy") is not None and rp != "Never":
        errs.append(invalid(f"{path}.template.spec.restartPolicy", rp,
                            'only "Never" is supported when podFailurePolicy is specified'))
    sel = spec.get("selector")
    if not with_selector:
        return errs
    if sel is None:
        errs.append(required(f"{path}.selector"))
    else:
        errs += validate_label_selector(sel, f"{path}.selector")
        labels = (template.get("metadata") or {}).get("labels")
        if not selector_matches(sel, labels):
            errs.append(invalid(f"{path}.template.metadata.labels", labels, "`selector` does not match template `labels`"))
    return errs


def _validate_managed_by(v: str | None, path: str) -> list[FieldError]:
    """IsDomainPrefixedPath plus the 63-character limit."""
    if v is None:
        return []
    errs: list[FieldError] = []
    host, _, rest = v.partition("/")
    if not v:
        errs.append(required(path))
    elif not host or not rest:
        errs.append(invalid(path, v, 'must be a domain-prefixed path (such as "acme.io/foo")'))
    else:
        errs += [invalid(path, host, m) for m in dns1123_subdomain(host)]
        if not _HTTP_PATH.match(rest):
            errs.append(invalid(path, rest, "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')"))
    if len(v) > _MAX_MANAGED_BY:
        errs.append(too_long(path, _MAX_MANAGED_BY))
    return errs


def _validate_completion_mode(spec: dict, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    mode = spec.get("completionMode")
    completions, parallelism = spec.get("completions"), spec.get("parallelism")
    bopi, mfi = spec.get("backoffLimitPerIndex"), spec.get("maxFailedIndexes")
    if mode is not None and mode not in ("NonIndexed", "Indexed"):
        errs.append(not_supported(f"{path}.completionMode", mode, ["NonIndexed", "Indexed"]))
    if mode == "Indexed":
        if completions is None:
            errs.append(required(f"{path}.completions", "when completion mode is Indexed"))
        if parallelism is not None and parallelism > _MAX_PARALLELISM_INDEXED:
            errs.append(invalid(f"{path}.parallelism", parallelism,
                                f"must be less than or equal to {_MAX_PARALLELISM_INDEXED} when completion mode is Indexed"))
        if completions is not None and mfi is not None and mfi > completions:
            errs.append(invalid(f"{path}.maxFailedIndexes", mfi, "must be less than or equal to completions"))
        if mfi is not None and mfi > _MAX_FAILED_INDEXES:
            errs.append(invalid(f"{path}.maxFailedIndexes", mfi, f"must be less than or equal to {_MAX_FAILED_INDEXES}"))
        high = completions is not None and bopi is not None and completions > _COMPLETIONS_SOFT_LIMIT
        if high and (parallelism or 0) > _PARALLELISM_FOR_HIGH_COMPLETIONS:
            errs.append(invalid(f"{path}.parallelism", parallelism,
                                f"must be less than or equal to {_PARALLELISM_FOR_HIGH_COMPLETIONS} when completions are "
                                f"above {_COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"))
        if high and mfi is None:
            errs.append(required(f"{path}.maxFailedIndexes", f"must be specified when completions are above "
                                 f"{_COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"))
    if mode in (None, "NonIndexed"):
        if bopi is not None:
            errs.append(invalid(f"{path}.backoffLimitPerIndex", bopi, "requires indexed completion mode"))
        if mfi is not None:
            errs.append(invalid(f"{path}.maxFailedIndexes", mfi, "requires indexed completion mode"))
    return errs


_PFP_ACTIONS = ["Count", "FailIndex", "FailJob", "Ignore"]


def _validate_pod_failure_policy(spec: dict, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    rules = spec["podFailurePolicy"].get("rules") or []
    if len(rules) > _MAX_PFP_RULES:
        errs.append(too_many(f"{path}.rules", len(rules), _MAX_PFP_RULES))
    tspec = (spec.get("template") or {}).get("spec") or {}
    names = {c.get("name") for key in ("containers", "initContainers") for c in tspec.get(key) or []}
    for i, rule in enumerate(rules):
        p = f"{path}.rules[{i}]"
        action = rule.get("action", "")
        if action == "FailIndex" and spec.get("backoffLimitPerIndex") is None:
            errs.append(invalid(f"{p}.action", action, "requires the backoffLimitPerIndex to be set"))
        if action not in _PFP_ACTIONS:
            errs.append(not_supported(f"{p}.action", action, _PFP_ACTIONS))
        on_exit, on_conds = rule.get("onExitCodes"), rule.get("onPodConditions") or []
        if on_exit is not None:
            errs += _validate_on_exit_codes(on_exit, f"{p}.onExitCodes", names)
        if on_conds:
            errs += _validate_on_pod_conditions(on_conds, f"{p}.onPodConditions")
        if on_exit is not None and on_conds:
            errs.append(invalid(p, OMIT, "specifying both OnExitCodes and OnPodConditions is not supported"))
        if on_exit is None and not on_conds:
            errs.append(invalid(p, OMIT, "specifying one of OnExitCodes and OnPodConditions is required"))
    return errs


def _validate_on_exit_codes(req: dict, path: str, containers: set) -> list[FieldError]:
    errs: list[FieldError] = []
    op = req.get("operator", "")
    if not op:
        errs.append(required(f"{path}.operator", 'valid values: ["In" "NotIn"]'))
    elif op not in ("In", "NotIn"):
        errs.append(not_supported(f"{path}.operator", op, ["In", "NotIn"]))
    name = req.get("containerName")
    if name is not None and name not in containers:
        errs.append(invalid(f"{path}.containerName", name, "must be one of the container or initContainer names in the pod template"))
    values = req.get("values") or []
    vpath = f"{path}.values"
    if not values:
        errs.append(invalid(vpath, values, "at least one value is required"))
    elif len(values) > _MAX_EXIT_CODES:
        errs.append(too_many(vpath, len(values), _MAX_EXIT_CODES))
    else:
        seen: set[int] = set()
        for j, v in enumerate(values):
            if op == "In" and v == 0:
                errs.append(invalid(f"{vpath}[{j}]", v, "must not be 0 for the In operator"))
            if v in seen:
                errs.append(duplicate(f"{vpath}[{j}]", v))
            seen.add(v)
        if any(a > b for a, b in zip(values, values[1:])):
            errs.append(invalid(vpath, values, "must be ordered"))
    return errs


def _validate_on_pod_conditions(patterns: list, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if len(patterns) > _MAX_POD_CONDITION_PATTERNS:
        errs.append(too_many(path, len(patterns), _MAX_POD_CONDITION_PATTERNS))
    for j, pattern in enumerate(patterns):
        p = f"{path}[{j}]"
        ctype = pattern.get("type", "")
        errs += [invalid(f"{p}.type", ctype, m) for m in qualified_name(ctype)]
        status = pattern.get("status", "")
        if not status:
            errs.append(required(f"{p}.status", 'valid values: ["False" "True" "Unknown"]'))
        elif status not in ("False", "True", "Unknown"):
            errs.append(not_supported(f"{p}.status", status, ["False", "True", "Unknown"]))
    return errs


def _validate_pod_replacement_policy(spec: dict, path: str) -> list[FieldError]:
    prp = spec.get("podReplacementPolicy")
    if prp is None:
        return []
    if spec.get("podFailurePolicy") is not None:
        return [] if prp == "Failed" else [not_supported(path, prp, ["Failed"])]
    return [] if prp in ("Failed", "TerminatingOrFailed") else [not_supported(path, prp, ["Failed", "TerminatingOrFailed"])]


def _validate_success_policy(spec: dict, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    policy = spec["successPolicy"]
    if spec.get("completionMode") != "Indexed":
        errs.append(invalid(path, policy, "requires indexed completion mode"))
    rules = policy.get("rules") or []
    if not rules:
        errs.append(required(f"{path}.rules", "at least one rules must be specified when the successPolicy is specified"))
    if len(rules) > _MAX_SUCCESS_RULES:
        errs.append(too_many(f"{path}.rules", len(rules), _MAX_SUCCESS_RULES))
    completions = spec.get("completions") or 0
    for i, rule in enumerate(rules):
        p = f"{path}.rules[{i}]"
        count, indexes = rule.get("succeededCount"), rule.get("succeededIndexes")
        if count is None and indexes is None:
            errs.append(required(p, "at least one of succeededCount or succeededIndexes must be specified"))
        total = 0
        if indexes is not None:
            if len(indexes) > _MAX_SUCCEEDED_INDEXES_LEN:
                errs.append(too_long(f"{p}.succeededIndexes", _MAX_SUCCEEDED_INDEXES_LEN))
            try:
                total = parse_indexes(indexes, completions)
            except ValueError as e:
                errs.append(invalid(f"{p}.succeededIndexes", indexes, f"error parsing succeededIndexes: {e}"))
        if count is not None:
            errs += nonnegative(rule, "succeededCount", p)
            if count > completions:
                errs.append(invalid(f"{p}.succeededCount", count,
                                    f"must be less than or equal to {completions} (the number of specified completions)"))
            if indexes is not None and count > total:
                errs.append(invalid(f"{p}.succeededCount", count, f"must be less than or equal to {total} "
                                    "(the number of indexes in the specified succeededIndexes field)"))
    return errs


def _same(v):
    return v


def _pod_failure_policy(p: dict | None) -> Struct | None:
    """batch.PodFailurePolicy (internal: no JSON tags) as json.Marshal prints it in a field error."""
    if p is None:
        return None
    rules = []
    for r in p.get("rules") or []:
        codes, conds = r.get("onExitCodes"), r.get("onPodConditions")
        rules.append(Struct(
            Action=r.get("action") or "",
            OnExitCodes=None if codes is None else Struct(ContainerName=codes.get("containerName"),
                                                          Operator=codes.get("operator") or "", Values=codes.get("values")),
            OnPodConditions=None if conds is None else [Struct(Type=c.get("type") or "", Status=c.get("status") or "")
                                                        for c in conds]))
    return Struct(Rules=rules if p.get("rules") is not None else None)


def _success_policy(p: dict | None) -> Struct | None:
    """batch.SuccessPolicy, likewise."""
    if p is None:
        return None
    rules = p.get("rules")
    return Struct(Rules=None if rules is None else [
        Struct(SucceededIndexes=r.get("succeededIndexes"), SucceededCount=r.get("succeededCount")) for r in rules])


#: the immutable JobSpec fields whose error value is an internal struct
_INTERNAL: dict[str, Callable] = {"podFailurePolicy": _pod_failure_policy, "successPolicy": _success_policy}


def _validate_completions_update(spec: dict, old_spec: dict) -> list[FieldError]:
    """completions is immutable, except that elastic Indexed Jobs scale it with parallelism."""
    new, old = spec.get("completions"), old_spec.get("completions")
    if new == old:
        return []
    if spec.get("completionMode") != "Indexed":
        return [immutable("spec.completions", new)]
    if new is not None and new != spec.get("parallelism"):
        return [invalid("spec.completions", new, "can only be modified in tandem with spec.parallelism")]
    return []


def _old_template_for_comparison(new: Obj, old: Obj) -> dict:
    """The old template with the fields a suspended, never-started Job may change taken from new.

    Upstream (JobMutableNodeSchedulingDirectives) lets node affinity, node
    selector, tolerations, scheduling gates, labels and annotations change
    while the Job is suspended and has not started.
    """
    old_t = (old.get("spec") or {}).get("template") or {}
    if not ((new.get("spec") or {}).get("suspend") and not (old.get("status") or {}).get("startTime")):
        return old_t
    new_t = (new.get("spec") or {}).get("template") or {}
    new_meta, new_spec = new_t.get("metadata") or {}, new_t.get("spec") or {}
    adj = {**old_t, "metadata": dict(old_t.get("metadata") or {}), "spec": dict(old_t.get("spec") or {})}
    for f in ("labels", "annotations"):
        _copy(adj["metadata"], new_meta, f)
    for f in ("nodeSelector", "tolerations", "schedulingGates"):
        _copy(adj["spec"], new_spec, f)
    new_aff, old_aff = new_spec.get("affinity"), adj["spec"].get("affinity")
    if new_aff is not None or old_aff is not None:
        aff = {k: v for k, v in (old_aff or {}).items() if k != "nodeAffinity"}
        if new_aff is not None:
            _copy(aff, new_aff, "nodeAffinity")
        if aff or new_aff is not None:
            adj["spec"]["affinity"] = aff
        else:
            adj["spec"].pop("affinity")
    return adj


def _copy(dst: dict, src: dict, field: str) -> None:
    if field in src:
        dst[field] = src[field]
    else:
        dst.pop(field, None)


def _pruned(v):
    """Drop empty values so `{}`, `[]` and absent compare equal, as Go's zero values do."""
    if isinstance(v, dict):
        out = {k: _pruned(x) for k, x in v.items()}
        return {k: x for k, x in out.items() if x not in (None, {}, [])}
    if isinstance(v, list):
        return [_pruned(x) for x in v]
    return v


register(Resource("batch", "jobs", "Job", ["v1"], namespaced=True, categories=("all",), subresources=("status",),
                  strategy=JobStrategy()))
