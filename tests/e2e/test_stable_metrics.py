"""Every component's /metrics against upstream's list of STABLE and BETA metrics
(tests/e2e/stable_metrics.py): after a little load (a Deployment, a pod no node fits, a
watch, a request at a Limited priority level), each family is served under upstream's name
and type, with its label names and bucket bounds."""

from __future__ import annotations

import json
import re

import pytest

from .conftest import wait_for
from .stable_metrics import STABLE

BIG = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "too-big", "namespace": "default"},
       "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "5000"}}}]}}


def families(text: str) -> dict[str, dict]:
    """The text format's families: type, the label names their series carry (`le` apart), and
    the `le` bounds of a histogram's first series, in order."""
    out: dict[str, dict] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            out[name] = {"type": kind, "labels": set(), "le": None, "series": 0}
        elif line and not line.startswith("#"):
            m = re.match(r"([a-zA-Z_:][\w:]*)(?:\{(.*)\})? ", line)
            name = m.group(1)
            fam = out.get(name) or out.get(re.sub(r"_(bucket|sum|count|total)$", "", name))
            if fam is None:
                continue
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
            le = labels.pop("le", None)
            fam["labels"] |= labels.keys()
            fam["series"] += 1
            if le is not None:
                key = tuple(sorted(labels.items()))
                if fam.get("first", key) == key:
                    fam["first"], fam["le"] = key, (fam["le"] or []) + [le]
    return out


@pytest.fixture(scope="module")
def loaded(cluster):
    """The cluster after the load: a Deployment's pods running, one pod unschedulable, a watch."""
    cluster.kubectl("create", "deployment", "web", "--image=pause", "--replicas=2")
    cluster.kubectl("apply", "-f", "-", input=json.dumps(BIG))
    cluster.kubectl("get", "--raw", "/api/v1/namespaces/default/pods?watch=1&timeoutSeconds=1")
    cluster.kubectl("--as=alice", "get", "pods", check=False)  # global-default, a Limited level
    wait_for(lambda: cluster.kubectl("get", "deployment", "web", "-o", "jsonpath={.status.readyReplicas}").stdout == "2",
             60, "the Deployment's pods")
    wait_for(lambda: 'scheduler_pending_pods{queue="unschedulable"} 1' in cluster.kubectl("get", "--raw", "/metrics").stdout,
             60, "the unschedulable pod")
    return cluster


def test_stable_and_beta_metrics_match_upstreams_list(loaded):
    node = loaded.kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}").stdout
    scraped = {path: families(loaded.kubectl("get", "--raw", path.format(node=node)).stdout)
               for path in {path for path, *_ in STABLE.values()}}
    for name, (path, kind, labels, bounds) in STABLE.items():
        fam = scraped[path].get(name)
        assert fam is not None and fam["series"], f"{name}: not served at {path}"
        assert (name, fam["type"]) == (name, kind)
        assert (name, sorted(fam["labels"])) == (name, sorted(labels.split()))
        if bounds is not None:
            assert (name, fam["le"]) == (name, [f"{b:g}" for b in bounds] + ["+Inf"])
