"""`nanokube metrics`: write and read the built-in metrics.

External metrics live in the `nanokube-external-metrics` ConfigMap of a
namespace (see nanokube/metrics/provider.py); this command edits it over
HTTPS with the kubeconfig's credentials and reads values back through
`external.metrics.k8s.io`, as an HPA sees them. `usage` sets what simulated
pods use (the `sim.nanokube.io/cpu-usage` and `-memory-usage` annotations
of the usage model, nanokube/metrics/usage.py), as `kubectl top` and CPU
HPAs then see it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import orjson

from .client import kubeconfig
from .client.http import HTTPClient
from .machinery import logs
from .machinery.errors import APIError
from .metrics.provider import EXTERNAL_CONFIGMAP, MetricsUnavailable, from_milli, milli, parse_series
from .metrics.usage import CPU_ANNOTATION, MEMORY_ANNOTATION


def add_parser(sub) -> None:
    common = argparse.ArgumentParser(add_help=False)
    kubeconfig.add_arguments(common)
    logs.add_arguments(common)
    common.add_argument("-n", "--namespace", default="default")
    p = sub.add_parser("metrics", help="set or read external metrics HPAs scale on")
    what = p.add_subparsers(dest="action", required=True)
    s = what.add_parser("set", parents=[common], help="set one series of an external metric")
    s.add_argument("name")
    s.add_argument("value", help="a quantity, e.g. 12 or 1500m")
    s.add_argument("--labels", default="", help="the series' labels, e.g. queue=jobs,tier=gpu")
    g = what.add_parser("get", parents=[common], help="read an external metric as the metrics API serves it")
    g.add_argument("name")
    g.add_argument("-l", "--selector", default="", help="label selector over the series")
    u = what.add_parser("usage", parents=[common], help="set the CPU/memory a simulated pod uses (metrics.k8s.io)")
    u.add_argument("pod", nargs="?", default="", help="a pod name (or use -l)")
    u.add_argument("-l", "--selector", default="", help="every pod matching this label selector")
    u.add_argument("--cpu", default=None, help="the pod's CPU usage, e.g. 900m")
    u.add_argument("--memory", default=None, help="the pod's memory usage, e.g. 1Gi")
    u.add_argument("--reset", action="store_true", help="back to the usage model's share of the requests")


def parse_labels(text: str) -> dict[str, str]:
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = part.partition("=")
        if not eq or not key:
            raise ValueError(f"--labels: {part!r} is not key=value")
        out[key] = value
    return out


def with_series(raw: str | None, labels: dict[str, str], value: str) -> str:
    """The ConfigMap value after setting the series with `labels` to `value`:
    a plain quantity while the metric has one unlabelled series, else the
    JSON list form."""
    series = [] if raw is None else [{"labels": s.labels, "value": from_milli(s.value)} for s in parse_series(raw)]
    series = [s for s in series if s["labels"] != labels] + [{"labels": labels, "value": value}]
    if len(series) == 1 and not labels:
        return value
    return orjson.dumps(series).decode()


async def _set(client: HTTPClient, args: argparse.Namespace) -> str:
    milli(args.value)
    labels = parse_labels(args.labels)
    cms = client.resource("", "v1", "configmaps")
    for _ in range(5):
        try:
            cm = await cms.get(EXTERNAL_CONFIGMAP, args.namespace)
        except APIError as e:
            if e.code != 404:
                raise
            data = {args.name: with_series(None, labels, args.value)}
            try:
                await cms.create({"metadata": {"name": EXTERNAL_CONFIGMAP, "namespace": args.namespace},
                                  "data": data})
                break
            except APIError as e2:
                if e2.code == 409:
                    continue
                raise
        data = dict(cm.get("data") or {})
        data[args.name] = with_series(data.get(args.name), labels, args.value)
        try:
            await cms.update({**cm, "data": data})
            break
        except APIError as e:
            if e.code != 409:
                raise
    else:
        raise APIError(409, "Conflict", "the metrics ConfigMap kept changing; try again")
    return f"metric {args.name} set to {args.value}" + (f" for {args.labels}" if labels else "")


async def _get(client: HTTPClient, args: argparse.Namespace) -> str:
    path = f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{args.namespace}/{args.name}"
    out = await client.request("GET", path, params={"labelSelector": args.selector} if args.selector else None)
    rows = [("LABELS", "VALUE")] + [(",".join(f"{k}={v}" for k, v in sorted(i["metricLabels"].items())) or "<none>",
                                     i["value"]) for i in out["items"]]
    width = max(len(r[0]) for r in rows) + 3
    return "\n".join(f"{a:<{width}}{b}" for a, b in rows)


async def _usage(client: HTTPClient, args: argparse.Namespace) -> str:
    if bool(args.pod) == bool(args.selector):
        raise ValueError("name one pod or give a label selector (-l)")
    if not args.reset and args.cpu is None and args.memory is None:
        raise ValueError("give --cpu, --memory or --reset")
    for q in (args.cpu, args.memory):
        if q is not None:
            milli(q)
    pods = client.resource("", "v1", "pods")
    names = [args.pod] if args.pod else [p["metadata"]["name"] for p in
                                         (await pods.list(args.namespace, label_selector=args.selector))[0]]
    if not names:
        raise ValueError(f"no pods match {args.selector!r} in namespace {args.namespace}")
    ann = {CPU_ANNOTATION: None, MEMORY_ANNOTATION: None} if args.reset else {}
    if args.cpu is not None:
        ann[CPU_ANNOTATION] = args.cpu
    if args.memory is not None:
        ann[MEMORY_ANNOTATION] = args.memory
    for name in names:
        await pods.patch(name, {"metadata": {"annotations": ann}}, namespace=args.namespace)
    return "\n".join(f"pod/{name} usage set" for name in names)


async def _main(args: argparse.Namespace) -> str:
    client = HTTPClient.from_kubeconfig(args.kubeconfig, args.context, field_manager="nanokube-metrics")
    try:
        await client.start()
        return await {"set": _set, "get": _get, "usage": _usage}[args.action](client, args)
    finally:
        await client.close()


def run(args: argparse.Namespace) -> int:
    try:
        print(asyncio.run(_main(args)))
    except kubeconfig.KubeconfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except (ValueError, MetricsUnavailable) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except APIError as e:
        print(f"Error from server ({e.reason}): {e.message}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: cannot reach the API server: {e}", file=sys.stderr)
        return 1
    return 0
