"""The kubelet's container lifecycle Events as a user reads them: `kubectl describe pod` and
`kubectl events` show the pull, the creation and start of each container in order, and the
Killing of each one a deletion stops, on the containers' fieldPaths."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from tests.e2e.conftest import running_cluster, wait_for


@pytest.fixture(scope="module")
def events_cluster(store_url):
    with running_cluster("kevents", store=store_url) as c:
        yield c


def event_lines(text: str) -> list[list[str]]:
    """The rows under `kubectl describe`'s Events: header, each as [type, reason, message]."""
    rows = []
    for line in text.split("Events:", 1)[1].splitlines()[3:]:
        parts = line.split()
        if len(parts) >= 5:
            rows.append([parts[0], parts[1], line.split("  ")[-1].strip()])
    return rows


def test_describe_and_events_show_pull_create_start_then_killing(events_cluster):
    c = events_cluster
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "web", "namespace": "default", "annotations": {"sim.nanokube.io/pull-seconds": "1.5"}},
           "spec": {"terminationGracePeriodSeconds": 5,
                    "initContainers": [{"name": "setup", "image": "nginx:1.27"}],
                    "containers": [{"name": "app", "image": "nginx:1.27"}]}}
    c.kubectl("create", "-f", "-", input=json.dumps(pod))
    c.kubectl("wait", "pod/web", "--for=condition=Ready", "--timeout=60s")

    def described():
        rows = event_lines(c.kubectl("describe", "pod", "web").stdout)
        return rows if len(rows) >= 8 else None
    rows = wait_for(described)
    init, app = "spec.initContainers{setup}: ", "spec.containers{app}: "
    assert [r[1] for r in rows].count("Scheduled") == 1  # in time order, though within its second (see below)
    rows = [r for r in rows if r[1] != "Scheduled"]
    took = rows[1][2]
    pulled = re.fullmatch(re.escape(init + 'Successfully pulled image "nginx:1.27" in ')
                          + r"([0-9.]+)m?s \(([0-9.]+)m?s including waiting\)\. Image size: \d+ bytes\.", took)
    assert pulled and 1.5 <= float(pulled[1]) <= float(pulled[2]), took  # (the pull-seconds, and whatever load adds)
    assert [r for r in rows if r is not rows[1]] == [
        ["Normal", "Pulling", init + 'Pulling image "nginx:1.27"'],
        ["Normal", "Created", init + "Container created"],
        ["Normal", "Started", init + "Container started"],
        ["Normal", "Pulled", app + 'Container image "nginx:1.27" already present on machine and can be accessed by '
                                   "the pod"],
        ["Normal", "Created", app + "Container created"],
        ["Normal", "Started", app + "Container started"],
    ]
    c.kubectl("delete", "pod", "web", "--wait=false")

    def killed():
        table = c.kubectl("events", "--for", "pod/web").stdout
        return table if "Killing" in table else None
    table = wait_for(killed)
    # the scheduler's Scheduled (an events.k8s.io eventTime, to the microsecond) may sort after the
    # kubelet's first Event of the same second (lastTimestamp, to the second), as on any cluster
    lines = [line for line in table.splitlines()[1:] if line.strip() and line.split()[2] != "Scheduled"]
    assert [line.split()[2] for line in lines] == ["Pulling", "Pulled", "Created", "Started", "Pulled",
                                                   "Created", "Started", "Killing"], table
    assert lines[-1].split()[1] == "Normal" and lines[-1].endswith("Pod/web   Stopping container app"), table


def test_a_pull_that_fails_is_err_image_pull_then_image_pull_back_off_until_fixed(events_cluster):
    c = events_cluster
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "typo", "namespace": "default", "annotations": {"sim.nanokube.io/pull-error": "not-found"}},
           "spec": {"containers": [{"name": "app", "image": "nginx:1.99-does-not-exist"}]}}
    c.kubectl("create", "-f", "-", input=json.dumps(pod))

    def status(want):
        def check():
            row = c.kubectl("get", "pod", "typo", "--no-headers").stdout.split()
            return row if row[2] == want else None
        return check
    assert wait_for(status("ImagePullBackOff"))[1] == "0/1"
    # the kubelet writes its Events from a queue, maybe after the status above
    out = wait_for(lambda: "Error: ImagePullBackOff" in (o := c.kubectl("describe", "pod", "typo").stdout) and o,
                   30, "the ImagePullBackOff Event in describe")
    ref = "docker.io/library/nginx:1.99-does-not-exist"
    assert "Reason:       ImagePullBackOff" in out
    waiting = c.kubectl("get", "pod", "typo", "-o", "jsonpath={.status.containerStatuses[0].state.waiting.message}")
    assert waiting.stdout.startswith('Back-off pulling image "nginx:1.99-does-not-exist": ErrImagePull: rpc error: '
                                     "code = NotFound"), waiting.stdout
    rows = [r for r in event_lines(out) if r[1] != "Scheduled"]
    app = "spec.containers{app}: "
    assert rows[:5] == [
        ["Normal", "Pulling", app + 'Pulling image "nginx:1.99-does-not-exist"'],
        ["Warning", "Failed", app + f'Failed to pull image "nginx:1.99-does-not-exist": rpc error: code = NotFound '
                                    f'desc = failed to pull and unpack image "{ref}": failed to resolve reference '
                                    f'"{ref}": {ref}: not found'],
        ["Warning", "Failed", app + "Error: ErrImagePull"],
        ["Normal", "BackOff", app + 'Back-off pulling image "nginx:1.99-does-not-exist"'],
        ["Warning", "Failed", app + "Error: ImagePullBackOff"]], out
    c.kubectl("annotate", "pod", "typo", "sim.nanokube.io/pull-error-")  # the registry has it now
    c.kubectl("wait", "pod/typo", "--for=condition=Ready", "--timeout=30s")  # at the retry, 10 s after the failure


def test_set_image_on_a_running_pod_kills_the_container_and_starts_the_new_image(events_cluster):
    """computePodActions: a container whose image changed is killed (`definition changed, will be
    restarted`) and started again with the new image, pulled first; RESTARTS counts it."""
    c = events_cluster
    c.kubectl("run", "swap", "--image=nginx:1.27")
    c.kubectl("wait", "pod/swap", "--for=condition=Ready", "--timeout=60s")
    c.kubectl("set", "image", "pod/swap", "swap=nginx:1.28")

    def restarted():
        s = c.kubectl_json("get", "pod", "swap")["status"]["containerStatuses"][0]
        return s if s["restartCount"] == 1 and "running" in s["state"] else None
    s = wait_for(restarted, 30, "swap restarted")
    assert s["image"] == "docker.io/library/nginx:1.28" and "terminated" in s["lastState"]

    def events():  # a repeated event is counted on one (the recorder's aggregation)
        items = c.kubectl_json("get", "events", "--field-selector", "involvedObject.name=swap")["items"]
        seen = {(e["reason"], e["message"]): e.get("count", 1) for e in items}
        return seen if seen.get(("Started", "Container started")) == 2 else None
    seen = wait_for(events, 30, "the new image's start")
    assert seen[("Killing", "Container swap definition changed, will be restarted")] == 1, seen
    assert seen[("Pulling", 'Pulling image "nginx:1.28"')] == 1 and seen[("Created", "Container created")] == 2, seen


def test_a_node_lists_the_images_it_pulled_at_their_registry_sizes(events_cluster):
    """status.images, as `kubectl get node -o yaml` shows it, and the Pulled message give an image's
    compressed size roughly as its registry has it: busybox about 2 MB, nginx's alpine variant
    about 20 MB, the Pause image a third of a MB, not made-up ones."""
    c = events_cluster
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sizes", "namespace": "default"},
           "spec": {"containers": [{"name": "shell", "image": "busybox:1.36", "command": ["sleep", "infinity"]},
                                   {"name": "web", "image": "nginx:1.27-alpine"},
                                   {"name": "idle", "image": "registry.k8s.io/pause:3.10"}]}}
    c.kubectl("create", "-f", "-", input=json.dumps(pod))
    c.kubectl("wait", "pod/sizes", "--for=condition=Ready", "--timeout=60s")
    node = c.kubectl_json("get", "pod", "sizes")["spec"]["nodeName"]
    want = {"docker.io/library/busybox:1.36": (1_500_000, 5_000_000),
            "docker.io/library/nginx:1.27-alpine": (15_000_000, 30_000_000),
            "registry.k8s.io/pause:3.10": (250_000, 800_000)}

    def listed():
        images = yaml.safe_load(c.kubectl("get", "node", node, "-o", "yaml").stdout)["status"].get("images") or []
        sizes = {name: i["sizeBytes"] for i in images for name in i["names"] if name in want}
        return sizes if len(sizes) == len(want) else None
    sizes = wait_for(listed, 60, "the pulled images in the node's status")
    assert all(low <= sizes[name] <= high for name, (low, high) in want.items()), sizes
    messages = [e["message"] for e in c.kubectl_json("get", "events", "--field-selector",
                                                     "involvedObject.name=sizes,reason=Pulled")["items"]]
    assert any(m.endswith(f"Image size: {sizes['docker.io/library/busybox:1.36']} bytes.") for m in messages), messages
