"""PodGroup bad input through kubectl gets upstream's field errors, and the
object stays as it was: minCount zero or negative, `disruptionMode: all`
on a basic group, switching basic<->gang, editing immutable fields, an
unknown preemptionPolicy, and a priority that disagrees with its class.
(A pod whose priority differs from its group's is a scheduling error, not
an API one: tests/scheduler/test_gang.py covers its SchedulerError.)"""

from __future__ import annotations

import json

import pytest
import yaml


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster): this module adds a PriorityClass and
    PodGroups of its own, no pods."""
    return session_cluster


def podgroup(name: str, **spec) -> str:
    spec.setdefault("schedulingPolicy", {"gang": {"minCount": 2}})
    return yaml.safe_dump({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                           "metadata": {"name": name, "namespace": "default"}, "spec": spec})


def refused(cluster, *args: str, input: str | None = None) -> str:
    r = cluster.kubectl(*args, input=input, check=False)
    assert r.returncode != 0, r.stdout
    return r.stderr.strip()


@pytest.mark.parametrize("spec, message", [
    ({"schedulingPolicy": {"gang": {"minCount": 0}}}, "spec.schedulingPolicy.gang.minCount: Required value"),
    ({"schedulingPolicy": {"gang": {"minCount": -1}}},
     "spec.schedulingPolicy.gang.minCount: Invalid value: -1: must be greater than zero"),
    ({"schedulingPolicy": {}}, 'spec.schedulingPolicy: Invalid value: "": must specify one of: `basic`, `gang`'),
    ({"schedulingPolicy": {"basic": {}, "gang": {"minCount": 1}}},
     "exactly one of `basic`, `gang` is required, but multiple fields are set"),
    ({"schedulingPolicy": {"basic": {}}, "disruptionMode": {"all": {}}}, 'spec.disruptionMode: Invalid value: "all"'),
    ({"preemptionPolicy": "Always"}, 'spec.preemptionPolicy: Unsupported value: "Always"'),
])
def test_create_is_refused_with_the_field_error(cluster, spec, message):
    err = refused(cluster, "create", "-f", "-", input=podgroup("bad", **spec))
    assert err.startswith('The PodGroup "bad" is invalid: ') and message in err, err
    assert cluster.kubectl("get", "podgroup", "bad", "-n", "default", check=False).returncode != 0


@pytest.fixture(scope="module")
def existing(cluster):
    cluster.kubectl("create", "-f", "-", input=yaml.safe_dump({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "bad-input-high"},
        "value": 500}))
    cluster.kubectl("create", "-f", "-", input=podgroup("kept", priorityClassName="bad-input-high"))
    return cluster.kubectl_json("get", "podgroup", "kept", "-n", "default")


@pytest.mark.parametrize("patch, field", [
    ({"spec": {"schedulingPolicy": {"gang": None, "basic": {}}}}, "spec.schedulingPolicy"),
    ({"spec": {"disruptionMode": {"single": None, "all": {}}}}, "spec.disruptionMode"),
    ({"spec": {"priorityClassName": "system-cluster-critical"}}, "spec.priorityClassName"),
    ({"spec": {"preemptionPolicy": "Never"}}, "spec.preemptionPolicy"),
    ({"spec": {"schedulingConstraints": {"topology": [{"key": "nanokube.io/rack"}]}}}, "spec.schedulingConstraints"),
])
def test_immutable_fields_cannot_change(cluster, existing, patch, field):
    err = refused(cluster, "patch", "podgroup", "kept", "-n", "default", "--type=merge", "-p", json.dumps(patch))
    assert err.startswith('The PodGroup "kept" is invalid: ') and f"{field}: Invalid value: " in err, err
    assert err.endswith("field is immutable"), err
    assert cluster.kubectl_json("get", "podgroup", "kept", "-n", "default")["spec"] == existing["spec"]


def test_min_count_may_change_and_priority_comes_from_the_class(cluster, existing):
    assert existing["spec"]["priority"] == 500 and existing["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    cluster.kubectl("patch", "podgroup", "kept", "-n", "default", "--type=merge",
                    "-p", json.dumps({"spec": {"schedulingPolicy": {"gang": {"minCount": 5}}}}))
    assert cluster.kubectl_json("get", "podgroup", "kept", "-n", "default")["spec"]["schedulingPolicy"] == {
        "gang": {"minCount": 5}}


def test_priority_disagreeing_with_its_class_is_forbidden(cluster, existing):
    err = refused(cluster, "create", "-f", "-",
                  input=podgroup("pinned", priorityClassName="bad-input-high", priority=7))
    assert 'is forbidden: the integer value of priority (7) must not be provided' in err, err
