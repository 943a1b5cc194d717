"""A pod of DRA-backed extended resources whose claim a ResourceQuota refuses: PreBind's create of
the claim fails, and the pod's FailedScheduling Event says so in upstream's words (the framework's
`running PreBind plugin "DynamicResources": ` over the plugin's `create claim for extended
resources : `, the name of the empty claim its failed Create returned); the pod stays unbound."""

import re

from nanokube.scheduler.scheduler import Scheduler
from tests.controllers import eventually, make_stack
from tests.scheduler.test_dra_extended_leftover import fpga_node, fpga_pod


async def test_a_claim_refused_by_quota_fails_prebind_with_upstreams_message():
    s = await make_stack()
    client = s.client
    await fpga_node(client)
    quotas = client.resource("", "v1", "resourcequotas")
    hard = {"fpga.deviceclass.resource.k8s.io/devices": "0"}
    q = await quotas.create({"metadata": {"name": "q", "namespace": "default"}, "spec": {"hard": hard}})
    await quotas.update({**q, "status": {"hard": hard, "used": {k: "0" for k in hard}}}, subresource="status")
    pods = client.resource("", "v1", "pods")
    await pods.create(fpga_pod())
    sched = Scheduler(client, seed=1)
    await sched.start()
    try:
        async def failed():
            items, _ = await client.resource("", "v1", "events").list(namespace="default")
            return [e.get("note") or e.get("message") for e in items if e["reason"] == "FailedScheduling"]
        [said, *_] = await eventually(failed)
        assert re.fullmatch(
            r'running PreBind plugin "DynamicResources": create claim for extended resources : '
            r'resourceclaims\.resource\.k8s\.io "p-extended-resources-\w+" is forbidden: exceeded quota: q, '
            r"requested: fpga\.deviceclass\.resource\.k8s\.io/devices=1, used: fpga\.deviceclass\.resource\.k8s\.io/"
            r"devices=0, limited: fpga\.deviceclass\.resource\.k8s\.io/devices=0", said), said
        got = await pods.get("p", "default")
        assert not got["spec"].get("nodeName")
        [cond] = [c for c in got["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert (cond["status"], cond["reason"], cond["message"]) == ("False", "SchedulerError", said)
    finally:
        await sched.stop()
        await s.close()
