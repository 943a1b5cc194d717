"""DaemonSet, StatefulSet, ControllerRevision, CronJob, ReplicationController
and PodTemplate through the official `kubernetes` client's typed API and
`kubernetes.utils.create_from_yaml` with one multi-document file, plus the
kubectl views of CronJobs, ReplicationControllers and PodTemplates."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from kubernetes import client, utils

from tests.e2e.conftest import wait_for

NS = "sets"

TEMPLATE = {"metadata": {"labels": {"app": "x"}},
            "spec": {"terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "infinity"]}]}}
JOB_TEMPLATE = {"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
                                               "containers": [{"name": "c", "image": "busybox:1.36",
                                                               "command": ["sleep", "infinity"]}]}}}}


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster): the module works in a namespace of its own,
    deleted with what it holds (the DaemonSets' pods on every node among it) once the module ends."""
    yield session_cluster
    session_cluster.kubectl("delete", "namespace", NS, "--wait=false", check=False)


@pytest.fixture(scope="module")
def api(cluster):
    c = cluster.client()
    client.CoreV1Api(c).create_namespace({"metadata": {"name": NS}})
    return c


def _labelled(app: str) -> dict:
    return {**TEMPLATE, "metadata": {"labels": {"app": app}}}


def test_typed_round_trips(api):
    apps, core, batch = client.AppsV1Api(api), client.CoreV1Api(api), client.BatchV1Api(api)
    ds = apps.create_namespaced_daemon_set(NS, {
        "metadata": {"name": "ds"}, "spec": {"selector": {"matchLabels": {"app": "ds"}}, "template": _labelled("ds")}})
    assert isinstance(ds, client.V1DaemonSet)
    assert ds.spec.update_strategy.rolling_update.max_unavailable == 1 and ds.status.desired_number_scheduled == 0
    sts = apps.create_namespaced_stateful_set(NS, {
        "metadata": {"name": "db"}, "spec": {"serviceName": "db", "replicas": 2,
                                             "selector": {"matchLabels": {"app": "db"}}, "template": _labelled("db")}})
    assert sts.spec.pod_management_policy == "OrderedReady"
    assert sts.spec.persistent_volume_claim_retention_policy.when_deleted == "Retain"
    scale = apps.patch_namespaced_stateful_set_scale("db", NS, {"spec": {"replicas": 3}})
    assert scale.spec.replicas == 3 and scale.status.selector == "app=db"
    cr = apps.create_namespaced_controller_revision(NS, {"metadata": {"name": "manual-1"}, "data": {"k": "v"},
                                                         "revision": 7})
    assert cr.revision == 7 and cr.data == {"k": "v"}
    cj = batch.create_namespaced_cron_job(NS, {"metadata": {"name": "nightly"}, "spec": {
        "schedule": "0 3 * * *", "timeZone": "Europe/Paris", "jobTemplate": JOB_TEMPLATE}})
    assert isinstance(cj, client.V1CronJob) and cj.spec.concurrency_policy == "Allow"
    assert (cj.spec.successful_jobs_history_limit, cj.spec.failed_jobs_history_limit) == (3, 1)
    rc = core.create_namespaced_replication_controller(NS, {
        "metadata": {"name": "legacy"}, "spec": {"replicas": 2, "template": _labelled("legacy")}})
    assert rc.spec.selector == {"app": "legacy"} and rc.status.replicas == 0
    pt = core.create_namespaced_pod_template(NS, {"metadata": {"name": "tpl"}, "template": _labelled("tpl")})
    assert pt.template.spec.restart_policy == "Always"

    wait_for(lambda: (core.read_namespaced_replication_controller_status("legacy", NS).status.ready_replicas or 0) == 2,
             what="RC ready")
    scale = core.replace_namespaced_replication_controller_scale("legacy", NS, {
        "metadata": {"name": "legacy", "namespace": NS}, "spec": {"replicas": 1}})
    assert scale.status.selector == "app=legacy"
    wait_for(lambda: core.read_namespaced_replication_controller("legacy", NS).status.replicas == 1, what="RC scaled")
    wait_for(lambda: (apps.read_namespaced_stateful_set("db", NS).status.ready_replicas or 0) == 3, what="db ready")
    wait_for(lambda: (apps.read_namespaced_daemon_set("ds", NS).status.number_ready or 0) >= 1, what="ds ready")
    revs = apps.list_namespaced_controller_revision(NS, label_selector="app=ds").items
    assert [r.revision for r in revs] == [1] and revs[0].metadata.owner_references[0].kind == "DaemonSet"
    assert {c.metadata.name for c in batch.list_namespaced_cron_job(NS).items} == {"nightly"}
    assert [p.metadata.name for p in core.list_namespaced_pod_template(NS).items] == ["tpl"]
    for delete in (lambda: apps.delete_namespaced_daemon_set("ds", NS),
                   lambda: apps.delete_namespaced_stateful_set("db", NS),
                   lambda: core.delete_namespaced_replication_controller("legacy", NS)):
        delete()
    wait_for(lambda: not [p for p in core.list_namespaced_pod(NS).items
                          if p.metadata.labels.get("app") in ("ds", "db", "legacy")],
             what="the garbage collector removes the owned pods")
    wait_for(lambda: not apps.list_namespaced_controller_revision(NS, label_selector="app=ds").items,
             what="the DaemonSet's revisions collected")


MULTI = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: yaml-ds}
spec:
  selector: {matchLabels: {app: yaml-ds}}
  template:
    metadata: {labels: {app: yaml-ds}}
    spec: {containers: [{name: c, image: busybox:1.36, command: [sleep, infinity]}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: yaml-sts}
spec:
  serviceName: yaml-sts
  replicas: 1
  selector: {matchLabels: {app: yaml-sts}}
  template:
    metadata: {labels: {app: yaml-sts}}
    spec: {containers: [{name: c, image: busybox:1.36, command: [sleep, infinity]}]}
---
apiVersion: apps/v1
kind: ControllerRevision
metadata: {name: yaml-rev}
data: {note: hand-made}
revision: 1
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: yaml-cj}
spec:
  schedule: "@hourly"
  jobTemplate:
    spec:
      template:
        spec: {restartPolicy: Never, containers: [{name: c, image: busybox:1.36}]}
---
apiVersion: v1
kind: ReplicationController
metadata: {name: yaml-rc}
spec:
  replicas: 1
  template:
    metadata: {labels: {app: yaml-rc}}
    spec: {containers: [{name: c, image: busybox:1.36, command: [sleep, infinity]}]}
---
apiVersion: v1
kind: PodTemplate
metadata: {name: yaml-pt}
template:
  metadata: {labels: {app: yaml-pt}}
  spec: {containers: [{name: c, image: busybox:1.36}]}
"""


def test_create_from_yaml_multi_document(api, tmp_path):
    path = tmp_path / "sets.yaml"
    path.write_text(MULTI)
    created = utils.create_from_yaml(api, str(path), namespace=NS)
    kinds = [objs[0].kind for objs in created]
    assert kinds == [d["kind"] for d in yaml.safe_load_all(MULTI)]
    apps, core, batch = client.AppsV1Api(api), client.CoreV1Api(api), client.BatchV1Api(api)
    assert apps.read_namespaced_daemon_set("yaml-ds", NS).metadata.annotations[
        "deprecated.daemonset.template.generation"] == "1"
    assert apps.read_namespaced_controller_revision("yaml-rev", NS).data == {"note": "hand-made"}
    assert batch.read_namespaced_cron_job("yaml-cj", NS).spec.schedule == "@hourly"
    assert core.read_namespaced_replication_controller("yaml-rc", NS).spec.selector == {"app": "yaml-rc"}
    assert core.read_namespaced_pod_template("yaml-pt", NS).template.metadata.labels == {"app": "yaml-pt"}
    wait_for(lambda: [p.metadata.name for p in core.list_namespaced_pod(NS, label_selector="app=yaml-sts").items]
             == ["yaml-sts-0"], what="yaml-sts-0")
    with pytest.raises(utils.FailToCreateError) as e:
        utils.create_from_yaml(api, str(path), namespace=NS)
    assert all(exc.status == 409 for exc in e.value.api_exceptions)


def test_kubectl_views_of_cronjobs_rcs_and_pod_templates(cluster, api):
    cluster.kubectl("create", "cronjob", "tick", "-n", NS, "--image=busybox:1.36", "--schedule=*/5 * * * *")
    table = cluster.kubectl("get", "cj", "tick", "-n", NS, "-o", "wide").stdout.splitlines()
    assert table[0].split() == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE",
                                "CONTAINERS", "IMAGES", "SELECTOR"]
    row = table[1].split()
    assert row[:10] == ["tick", "*/5", "*", "*", "*", "*", "<none>", "False", "0", "<none>"]
    assert row[-3:] == ["tick", "busybox:1.36", "<none>"]
    out = cluster.kubectl("create", "job", "manual", "--from=cronjob/tick", "-n", NS).stdout
    assert out == "job.batch/manual created\n"
    job = cluster.kubectl_json("get", "job", "manual", "-n", NS)
    assert job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
    assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    bad = cluster.kubectl("create", "cronjob", "bad", "-n", NS, "--image=busybox", "--schedule=61 * * * *",
                          check=False)
    assert bad.returncode != 0
    assert 'spec.schedule: Invalid value: "61 * * * *": end of range (61) above maximum (59): 61' in bad.stderr
    described = cluster.kubectl("describe", "cronjob", "tick", "-n", NS).stdout
    assert "Schedule:" in described and "*/5 * * * *" in described
    assert "KIND:       CronJob" in cluster.kubectl("explain", "cronjob.spec.timeZone").stdout
    metrics = cluster.kubectl("get", "--raw", "/metrics").stdout
    assert "# TYPE cronjob_controller_job_creation_skew_duration_seconds histogram" in metrics
    assert "# TYPE job_controller_job_pods_creation_total counter" in metrics
    # the in-process controllers' work queues, under upstream's queue names
    assert re.search(r'^workqueue_adds_total\{name="cronjob"\} [1-9]', metrics, re.M), metrics
    cluster.kubectl("delete", "cronjob", "tick", "-n", NS)
    wait_for(lambda: cluster.kubectl("get", "job", "manual", "-n", NS, check=False).returncode != 0,
             what="the CronJob's job collected with it")

    rc = {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "kube-rc", "namespace": NS},
          "spec": {"replicas": 2, "template": _labelled("kube-rc")}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(rc))
    wait_for(lambda: cluster.kubectl_json("get", "rc", "kube-rc", "-n", NS)["status"].get("readyReplicas") == 2,
             what="kube-rc ready")
    table = cluster.kubectl("get", "rc", "kube-rc", "-n", NS, "-o", "wide").stdout.splitlines()
    assert table[0].split() == ["NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    assert table[1].split()[:4] == ["kube-rc", "2", "2", "2"] and table[1].split()[-1] == "app=kube-rc"
    assert cluster.kubectl("scale", "rc", "kube-rc", "-n", NS, "--replicas=3").stdout == \
        "replicationcontroller/kube-rc scaled\n"
    wait_for(lambda: cluster.kubectl_json("get", "rc", "kube-rc", "-n", NS)["status"].get("readyReplicas") == 3,
             what="kube-rc scaled up")
    assert "Pods Status:" in cluster.kubectl("describe", "rc", "kube-rc", "-n", NS).stdout

    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {
        "name": "view-pt", "namespace": NS}, "template": _labelled("view-pt")}))
    table = cluster.kubectl("get", "podtemplate", "view-pt", "-n", NS).stdout.splitlines()
    assert table[0].split() == ["NAME", "CONTAINERS", "IMAGES", "POD", "LABELS"]
    assert table[1].split() == ["view-pt", "c", "busybox:1.36", "app=view-pt"]
    assert "KIND:       PodTemplate" in cluster.kubectl("explain", "podtemplate.template").stdout
