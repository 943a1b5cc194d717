"""`nanokube metrics`: write and read the built-in external metrics store.

External metrics live in the `nanokube-external-metrics` ConfigMap of a
namespace (see nanokube/metrics/provider.py); this command edits it over
HTTPS with the kubeconfig's credentials and reads values back through
`external.metrics.k8s.io`, as an HPA sees them.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import orjson

from .client import kubeconfig
from .client.http import HTTPClient
from .machinery.errors import APIError
from .metrics.provider import EXTERNAL_CONFIGMAP, MetricsUnavailable, from_milli, milli, parse_series


def add_parser(sub) -> None:
    common = argparse.ArgumentParser(add_help=False)
    kubeconfig.add_arguments(common)
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


async def _main(args: argparse.Namespace) -> str:
    client = HTTPClient.from_kubeconfig(args.kubeconfig, args.context, field_manager="nanokube-metrics")
    await client.start()
    try:
        return await (_set if args.action == "set" else _get)(client, args)
    finally:
        await client.close()


def run(args: argparse.Namespace) -> int:
    try:
        print(asyncio.run(_main(args)))
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
