"""`nanokube fault`: break and heal simulated nodes of a running cluster.

The command only edits the Node's `sim.nanokube.io/fault` annotation over
HTTPS with the kubeconfig's client certificate; the node agent inside
`nanokube up` acts on it (see nanokube/node/faults.py for the format).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from .client import kubeconfig
from .machinery import logs
from .node.dra.driver import FAULT_EFFECTS
from .node.faults import ANNOTATION, LEASE_STOP, NODE_FAULTS, NOT_READY, PRESSURES, SHUTDOWN, edit, gpu_token, token

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration(text: str) -> float:
    """Seconds from `30s`, `1.5m`, `500ms`, `2h` or a bare number of seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)?\s*", text)
    if not m or float(m[1]) <= 0:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: expected a positive number with ms, s, m or h")
    return float(m[1]) * _UNITS[m[2] or "s"]


def add_parser(sub) -> None:
    common = argparse.ArgumentParser(add_help=False)
    kubeconfig.add_arguments(common)
    logs.add_arguments(common)
    timing = argparse.ArgumentParser(add_help=False)
    timing.add_argument("--for", dest="duration", type=duration, metavar="DURATION",
                        help="heal by itself after this long (e.g. 30s, 2m)")
    timing.add_argument("--flap", type=duration, metavar="PERIOD",
                        help="toggle the fault on and off every PERIOD, starting on (until --for runs out, if given)")
    p = sub.add_parser("fault", help="inject or clear faults on simulated nodes and devices")
    what = p.add_subparsers(dest="target", required=True)
    node = what.add_parser("node", parents=[common, timing],
                           help="a node's kubelet: stop its lease, report NotReady or resource pressure, shut down, or heal")
    node.add_argument("name")
    mode = node.add_mutually_exclusive_group(required=True)
    mode.add_argument("--lease-stop", action="store_true", help="stop renewing the Lease and posting status")
    mode.add_argument("--not-ready", action="store_true", help="keep heartbeating but report Ready=False")
    for fault, condition in PRESSURES.items():
        mode.add_argument(f"--{fault}", dest="fault", action="store_const", const=fault,
                          help=f"report {condition}=True; the kubelet then refuses the pods its eviction manager would")
    mode.add_argument("--shutdown", action="store_const", dest="fault", const=SHUTDOWN,
                      help="begin a graceful node shutdown: its pods are stopped and new ones refused")
    mode.add_argument("--clear", action="store_true",
                      help="heal the node's lease, readiness and pressure faults, or cancel its shutdown")
    gpu = what.add_parser("gpu", parents=[common, timing], help="a device on a node goes unhealthy (its ResourceSlice entry is tainted)")
    gpu.add_argument("node")
    gpu.add_argument("device")
    gpu.add_argument("--kind", choices=list(FAULT_EFFECTS), help="fault kind (default xid)")
    gpu.add_argument("--clear", action="store_true", help="recover the device (all kinds unless --kind is given)")


class _API:
    """Plain requests to the server of the chosen kubeconfig context."""

    def __init__(self, creds: kubeconfig.Credentials):
        self.creds = creds

    def request(self, method: str, path: str, body: dict | None = None, content_type: str = "") -> dict:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        if self.creds.token:
            headers["Authorization"] = f"Bearer {self.creds.token}"
        req = urllib.request.Request(self.creds.server + path, method=method, headers=headers,
                                     data=json.dumps(body).encode() if body is not None else None)
        with urllib.request.urlopen(req, context=self.creds.ssl, timeout=30) as r:
            return json.loads(r.read())


def _edit(args: argparse.Namespace, value: str | None, now: float) -> str:
    """The annotation with this command's change. Timed faults are anchored
    at `now`, this machine's clock, which `nanokube up` shares."""
    if args.target == "node":
        if args.clear:
            return edit(value, remove=lambda f: f in NODE_FAULTS)
        fault = LEASE_STOP if args.lease_stop else args.fault or NOT_READY
    else:
        prefix = f"gpu:{args.device}:"
        if args.clear:
            kind = args.kind
            return edit(value, remove=lambda f: f == gpu_token(args.device, kind) if kind else f.startswith(prefix))
        fault = gpu_token(args.device, args.kind or "xid")
    return edit(value, add=(token(fault, now, args.duration, args.flap),))


def run(args: argparse.Namespace) -> int:
    """Read the Node, then merge-patch the new annotation guarded by its resourceVersion."""
    name = args.name if args.target == "node" else args.node
    if args.clear and (args.duration or args.flap):
        print("nanokube: --for and --flap apply to injecting a fault, not to --clear", file=sys.stderr)
        return 2
    path = f"/api/v1/nodes/{urllib.parse.quote(name)}"
    try:
        kc = _API(kubeconfig.load(args.kubeconfig, args.context))
        for _ in range(5):
            node = kc.request("GET", path)
            md = node["metadata"]
            value = _edit(args, (md.get("annotations") or {}).get(ANNOTATION), time.time())
            patch = {"metadata": {"resourceVersion": md["resourceVersion"], "annotations": {ANNOTATION: value or None}}}
            try:
                kc.request("PATCH", path, patch, "application/merge-patch+json")
            except urllib.error.HTTPError as e:
                if e.code == 409:
                    continue
                raise
            print(f"node/{name} {ANNOTATION}={value or '(none)'}")
            return 0
        print(f"nanokube: node/{name} kept changing; try again", file=sys.stderr)
        return 1
    except urllib.error.HTTPError as e:
        detail = json.loads(e.read() or b"{}").get("message", e.reason)
        print(f"nanokube: {detail}", file=sys.stderr)
        return 1
    except kubeconfig.KubeconfigError as e:
        print(f"nanokube: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"nanokube: cannot reach the API server: {e}", file=sys.stderr)
        return 1
