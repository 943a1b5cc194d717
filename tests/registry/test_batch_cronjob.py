"""CronJobs through the in-process API: defaults, schedule and time-zone
validation with upstream's messages, the jobTemplate rules and columns."""

import pytest

from nanokube.machinery.errors import APIError
from nanokube.registry.base import all_resources
from tests.controllers import make_stack


def cronjob(name="tick", **spec):
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}}, **spec}}


@pytest.fixture
async def cronjobs():
    s = await make_stack()
    yield s.client.resource("batch", "v1", "cronjobs")
    await s.close()


async def invalid(res, body) -> str:
    with pytest.raises(APIError) as e:
        await res.create(body)
    assert e.value.code == 422
    return e.value.message


async def test_defaults_and_columns(cronjobs):
    got = await cronjobs.create(cronjob(timeZone="Europe/Berlin"))
    spec = got["spec"]
    assert (spec["concurrencyPolicy"], spec["suspend"], spec["successfulJobsHistoryLimit"],
            spec["failedJobsHistoryLimit"]) == ("Allow", False, 3, 1)
    assert "completions" not in spec["jobTemplate"]["spec"], "a template is not defaulted as a Job"
    strategy = next(r for r in all_resources() if r.plural == "cronjobs").strategy
    cols = strategy.columns
    assert [c.name for c in cols] == ["Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule", "Age",
                                      "Containers", "Images", "Selector"]
    assert [cols[i].fn(got) for i in (1, 2, 3, 4, 5)] == ["*/5 * * * *", "Europe/Berlin", "False", 0, "<none>"]
    assert [cols[i].fn(got) for i in (7, 8, 9)] == ["c", "busybox", "<none>"]


@pytest.mark.parametrize("schedule,message", [
    ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
    ("60 * * * *", "end of range (60) above maximum (59): 60"),
    ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
    ("*/0 * * * *", "step of range should be a positive number: */0"),
    ("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
    ("@fortnightly", "unrecognized descriptor: @fortnightly"),
    ("*/99999999999999999999 * * * *",  # past int64: accepted before fuzz50
     'failed to parse int from 99999999999999999999: strconv.Atoi: parsing "99999999999999999999": value out of range'),
])
async def test_bad_schedules(cronjobs, schedule, message):
    msg = await invalid(cronjobs, cronjob(schedule=schedule))
    assert f'spec.schedule: Invalid value: "{schedule}": {message}' in msg


async def test_tz_in_schedule_and_time_zones(cronjobs):
    msg = await invalid(cronjobs, cronjob(schedule="TZ=UTC 0 * * * *"))
    assert "cannot use TZ or CRON_TZ in schedule, use timeZone field instead" in msg
    msg = await invalid(cronjobs, cronjob(timeZone="Mars/Olympus_Mons"))
    assert 'spec.timeZone: Invalid value: "Mars/Olympus_Mons": unknown time zone Mars/Olympus_Mons' in msg
    for zone in ("America", "Etc"):  # a directory of zones: a 500 (IsADirectoryError) before fuzz50
        msg = await invalid(cronjobs, cronjob(timeZone=zone))
        assert f'spec.timeZone: Invalid value: "{zone}": unknown time zone {zone}' in msg
    msg = await invalid(cronjobs, cronjob(timeZone=""))
    assert "timeZone must be nil or non-empty string" in msg
    msg = await invalid(cronjobs, cronjob(timeZone="Local"))
    assert "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones" in msg
    for i, ok in enumerate(("@hourly", "0 9 * * MON-FRI", "0 0 1,15 * ?", "@every 1h30m")):
        await cronjobs.create(cronjob(name=f"ok{i}", schedule=ok))


async def test_job_template_and_limits(cronjobs):
    body = cronjob(concurrencyPolicy="Sometimes", successfulJobsHistoryLimit=-1, startingDeadlineSeconds=-5)
    body["spec"]["jobTemplate"]["spec"]["selector"] = {"matchLabels": {"a": "b"}}
    body["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    msg = await invalid(cronjobs, body)
    for part in ('spec.concurrencyPolicy: Unsupported value: "Sometimes"',
                 "spec.successfulJobsHistoryLimit: Invalid value: -1: must be greater than or equal to 0",
                 "spec.startingDeadlineSeconds: Invalid value: -5",
                 "spec.jobTemplate.spec.selector: Invalid value", "`selector` will be auto-generated",
                 "spec.jobTemplate.spec.template.spec.restartPolicy: Required value"):
        assert part in msg
    msg = await invalid(cronjobs, cronjob(name="a" * 53))
    assert "metadata.name: Invalid value" in msg and "must be no more than 52 characters" in msg


async def test_update_keeps_a_legacy_tz_schedule(cronjobs):
    await cronjobs.create(cronjob())
    got = await cronjobs.patch("tick", {"spec": {"suspend": True, "schedule": "@daily"}}, namespace="default")
    assert got["spec"]["suspend"] is True and got["metadata"]["generation"] == 2
