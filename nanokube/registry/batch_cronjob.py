"""batch/v1 CronJobs: Jobs from a template on a cron schedule.

Validation follows batch validation's validateCronJobSpec (robfig/cron's
parse errors for the schedule, IANA names for timeZone); the columns are
kubectl's cronjob printer.
"""

from __future__ import annotations

import re

from ..clock import REAL
from ..machinery import cron
from .apps import age_column, api_doc, default_pod_template, ensure_template, name_column, nonnegative, selector_string, template_ips
from .base import Column, Obj, Resource, Strategy, register
from .batch import Clock, validate_job_spec
from .gated_fields import drop_job_fields
from .core_printing import since
from ..machinery.validation import FieldError, invalid, label_selector_value, not_supported, required
from . import pod_warnings

_SPEC = "io.k8s.api.batch.v1.CronJobSpec"
_STATUS = "io.k8s.api.batch.v1.CronJobStatus"
_POLICIES = ("Allow", "Forbid", "Replace")
_ZONE_PART = re.compile(r"^[A-Za-z.\-_0-9+]{1,14}\Z")
#: the Job's name is `<cronjob>-<minutes since epoch>` (11 characters) within a DNS label
MAX_NAME = 52


def _job_template_containers(o: Obj) -> list[dict]:
    spec = ((o.get("spec") or {}).get("jobTemplate") or {}).get("spec") or {}
    return ((spec.get("template") or {}).get("spec") or {}).get("containers") or []


class CronJobStrategy(Strategy):
    def __init__(self, clock: Clock = REAL.now) -> None:
        self.clock = clock
        self.columns = [
            name_column(),
            Column("Schedule", "string", lambda o: (o.get("spec") or {}).get("schedule", ""), api_doc(_SPEC, "schedule")),
            Column("Timezone", "string", lambda o: (o.get("spec") or {}).get("timeZone") or "<none>",
                   api_doc(_SPEC, "timeZone")),
            Column("Suspend", "boolean", lambda o: _bool_text((o.get("spec") or {}).get("suspend")),
                   api_doc(_SPEC, "suspend")),
            Column("Active", "integer", lambda o: len((o.get("status") or {}).get("active") or []),
                   api_doc(_STATUS, "active")),
            Column("Last Schedule", "string", self._last_schedule, api_doc(_STATUS, "lastScheduleTime")),
            age_column(),
            Column("Containers", "string", lambda o: ",".join(c.get("name", "") for c in _job_template_containers(o)),
                   "Names of each container in the template.", priority=1),
            Column("Images", "string", lambda o: ",".join(c.get("image", "") for c in _job_template_containers(o)),
                   "Images referenced by each container in the template.", priority=1),
            Column("Selector", "string",
                   lambda o: selector_string((((o.get("spec") or {}).get("jobTemplate") or {}).get("spec") or {}).get("selector")),
                   api_doc("io.k8s.api.batch.v1.JobSpec", "selector"), priority=1),
        ]

    def _last_schedule(self, o: Obj) -> str:
        """`<none>` while unset (nil); a zero time, stored as a null key, is `<unknown>`."""
        status = o.get("status") or {}
        return since(status["lastScheduleTime"], self.clock) if "lastScheduleTime" in status else "<none>"

    def default(self, obj: Obj, version: str) -> None:
        """SetDefaults_CronJob (batch/v1)."""
        spec = obj.setdefault("spec", {})
        spec.setdefault("concurrencyPolicy", "Allow")
        spec.setdefault("suspend", False)
        spec.setdefault("successfulJobsHistoryLimit", 3)
        spec.setdefault("failedJobsHistoryLimit", 1)
        job_spec = ensure_template(ensure_template(spec, "jobTemplate"), "spec")
        default_pod_template(ensure_template(job_spec))

    def prepare_for_create(self, obj: Obj) -> None:
        drop_job_fields(_job_spec(obj))

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        drop_job_fields(_job_spec(new), _job_spec(old))

    def warnings_on_create(self, obj):
        return pod_warnings.cronjob_create(obj)

    def warnings_on_update(self, new, old):
        return pod_warnings.cronjob_update(new, old)

    def validate(self, obj: Obj) -> list[FieldError]:
        name = (obj.get("metadata") or {}).get("name", "")
        errs = [invalid("metadata.name", name, f"must be no more than {MAX_NAME} characters")] if len(name) > MAX_NAME else []
        return errs + validate_cronjob_spec(obj.get("spec") or {}, None, "spec")

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return validate_cronjob_spec(new.get("spec") or {}, old.get("spec") or {}, "spec")


def _bool_text(v) -> str:
    """printBoolPtr."""
    return "<unset>" if v is None else ("True" if v else "False")


def validate_cronjob_spec(spec: dict, old: dict | None, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    schedule, zone = spec.get("schedule") or "", spec.get("timeZone")
    if not schedule:
        errs.append(required(f"{path}.schedule"))
    else:
        try:
            cron.parse(schedule)
        except cron.ScheduleError as e:
            errs.append(invalid(f"{path}.schedule", schedule, str(e)))
        tz_allowed = old is not None and "TZ" in (old.get("schedule") or "")
        if tz_allowed and "TZ" in schedule and zone is not None:
            errs.append(invalid(f"{path}.schedule", schedule, "cannot use both timeZone field and TZ or CRON_TZ in schedule"))
        elif not tz_allowed and "TZ" in schedule:
            errs.append(invalid(f"{path}.schedule", schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
    errs += nonnegative(spec, "startingDeadlineSeconds", path)
    if old is None or old.get("timeZone") != zone:
        errs += _validate_time_zone(zone, f"{path}.timeZone")
    policy = spec.get("concurrencyPolicy")
    if not policy:
        errs.append(required(f"{path}.concurrencyPolicy"))
    elif policy not in _POLICIES:
        errs.append(not_supported(f"{path}.concurrencyPolicy", policy, _POLICIES))
    old_ips = template_ips(((old or {}).get("jobTemplate") or {}).get("spec"))
    errs += validate_job_template(spec.get("jobTemplate") or {}, f"{path}.jobTemplate", old_ips)
    errs += nonnegative(spec, "successfulJobsHistoryLimit", path)
    errs += nonnegative(spec, "failedJobsHistoryLimit", path)
    return errs


def validate_job_template(template: dict, path: str, old_ips: tuple[str, ...] = ()) -> list[FieldError]:
    """ValidateJobTemplateSpec: the selector is generated when each Job is made."""
    spec = template.get("spec") or {}
    errs = validate_job_spec(spec, f"{path}.spec", with_selector=False, old_ips=old_ips)
    if spec.get("selector") is not None:
        errs.append(invalid(f"{path}.spec.selector", label_selector_value(spec["selector"]), "`selector` will be auto-generated"))
    if spec.get("manualSelector"):
        errs.append(not_supported(f"{path}.spec.manualSelector", True, ["nil", "false"]))
    return errs


def _validate_time_zone(zone: str | None, path: str) -> list[FieldError]:
    if zone is None:
        return []
    if not zone:
        return [invalid(path, zone, "timeZone must be nil or non-empty string")]
    for part in zone.split("/"):
        if part in (".", "..") or part.startswith("-") or not _ZONE_PART.match(part):
            return [invalid(path, zone, f"unknown time zone {zone}")]
    errs: list[FieldError] = []
    if zone.lower() == "local":
        errs.append(invalid(path, zone, "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"))
    if zone != "Local":  # Go's LoadLocation knows "Local"; the check above refuses it
        try:
            cron.load_zone(zone)
        except cron.ScheduleError as e:
            errs.append(invalid(path, zone, str(e)))
    return errs


register(Resource("batch", "cronjobs", "CronJob", ["v1"], namespaced=True, short_names=("cj",), categories=("all",),
                  subresources=("status",), strategy=CronJobStrategy()))


def _job_spec(cronjob: Obj) -> dict:
    """The Job spec a CronJob's jobTemplate holds (empty where it holds none)."""
    spec = ((cronjob.get("spec") or {}).get("jobTemplate") or {}).get("spec")
    return spec if type(spec) is dict else {}
