"""results.json (every metric of every run), summary.csv and series.csv (the
table and the lines over time, for a spreadsheet) and report.html: one page,
self-contained (Chart.js is vendored and inlined, the data embedded), one
series per scheduler configuration."""

from __future__ import annotations

import csv
import html
import json
import os

from .summary import PERCENTILES, arrival_points, duration, headline, ratio

CHART_JS = os.path.join(os.path.dirname(__file__), "static", "chart-4.4.7.umd.min.js")
#: points per line a chart draws at most (series are thinned evenly, keeping the last point)
MAX_POINTS = 1500


def results_doc(results, inputs: dict) -> dict:
    runs = [{"name": r.name, "interrupted": r.interrupted, "wall_s": r.wall_s, "cpu_s": r.cpu_s,
             "virtual_s": r.virtual_s, "events": r.events, "events_per_s": r.events / r.wall_s if r.wall_s else 0.0,
             "placement_hash": r.placement_hash, "placements": r.placements, "refused_writes": r.refused,
             **r.metrics} for r in results]
    for run in runs:
        run["summary"] = headline(run, arrival_points(inputs.get("inflate")))
    return {"inputs": inputs, "runs": runs}


def _thin(xs: list, ys: list) -> list[dict]:
    step = max(1, len(xs) // MAX_POINTS)
    idx = list(range(0, len(xs), step))
    if xs and idx[-1] != len(xs) - 1:
        idx.append(len(xs) - 1)
    return [{"x": xs[i], "y": ys[i]} for i in idx]


def _cdf(values: list[float]) -> list[dict]:
    n = len(values)
    return _thin(sorted(values), [(i + 1) / n for i in range(n)]) if n else []


#: the unit of the time axis, by the longest run's virtual span: the first whose span reads at most 120 of it
#: (an inflation's 11 virtual seconds were 0.00013 days, a day's replay is 24 hours, openb's 149 days are days)
TIME_UNITS = (("seconds", 1), ("minutes", 60), ("hours", 3600), ("days", 86400))


def time_unit(span: float) -> tuple[str, float]:
    return next((u for u in TIME_UNITS if span <= 120 * u[1]), TIME_UNITS[-1])


def chart_data(doc: dict) -> dict:
    """What the page plots, per run: lines over time (in the unit that suits the runs' span), over arrived
    workload, and the distributions."""
    unit, seconds = time_unit(max((r["virtual_s"] for r in doc["runs"]), default=0.0))
    out = []
    for r in doc["runs"]:
        s = r["series"]
        ts = [t / seconds for t in s["t"]]
        out.append({
            "name": r["name"],
            "alloc": _thin(ts, s["gpu_alloc_ratio"]), "frag": _thin(ts, s["fragmentation_ratio"]),
            "pending": _thin(ts, s["pending"]),
            "arrival": _thin(r["by_arrival"]["arrived_ratio"], r["by_arrival"]["gpu_alloc_ratio"]),
            "arrival_frag": _thin(r["by_arrival"]["arrived_ratio"], r["by_arrival"].get("fragmentation_ratio") or []),
            "delay": _cdf(r["scheduling_delay_s"]),
            "gang": r["gang_wait_s"], "evictions": len(r["evictions"]),
            "preemptions": sum(1 for e in r["evictions"] if e["reason"] == "PreemptionByScheduler"),
        })
    return {"runs": out, "time_unit": unit}


PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>nanokube simulate: {title}</title>
<style>body{{font-family:sans-serif;margin:1.5em;max-width:1200px}}.grid{{display:grid;grid-template-columns:1fr 1fr;gap:1.5em}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.2em .6em;text-align:right}}canvas{{max-height:320px}}</style>
<script>const pageErrors = []; window.addEventListener('error', e => pageErrors.push(String(e.message)));
const consoleError = console.error; console.error = (...a) => {{ pageErrors.push(a.join(' ')); consoleError(...a); }};</script>
<script>{chartjs}</script></head><body>
<h1>nanokube simulate</h1>
<p>cluster <code>{cluster}</code>{edits}, trace <code>{trace}</code>{how}, seed {seed}</p>
<table><tr><th>configuration</th><th>pods</th><th>scheduled</th><th>pending at end</th><th>deleted waiting</th>
<th>GPU alloc mean</th><th>GPU alloc max</th><th>GPU frag mean</th>{arrived_heads}<th>waited</th><th>delay p50</th><th>delay p90</th><th>delay p95</th><th>delay p99</th>
<th>delay max</th><th>makespan</th><th>evicted</th>
<th>virtual time</th><th>wall s</th><th>events/s</th><th>placements</th></tr>{rows}</table>
<p>deleted waiting: pods the trace deleted before any node took them (not in the delays); GPU alloc / frag:
share of the cluster's GPUs allocated / fragmented, time-weighted over the run; delay: a scheduled pod's creation
to its binding (waited: 1 s or more); makespan: first pod created to last pod ended (-: pods left running or
pending); all in virtual time.{arrived_note}</p>
<div class="grid">
<div><h3>GPU allocation ratio over time</h3><canvas id="alloc"></canvas></div>
<div><h3>GPU allocation ratio over arrived GPU workload</h3><canvas id="arrival"></canvas></div>
<div><h3>GPU fragmentation (share of all GPU capacity)</h3><canvas id="frag"></canvas></div>
<div><h3>GPU fragmentation over arrived GPU workload</h3><canvas id="arrival_frag"></canvas></div>
<div><h3>Pending pods</h3><canvas id="pending"></canvas></div>
<div><h3>Scheduling delay (CDF)</h3><canvas id="delay"></canvas></div>
<div><h3>Gang wait (first member created to last bound)</h3><canvas id="gang"></canvas></div>
<div><h3>Evictions and preemptions</h3><canvas id="evict"></canvas></div>
</div>
<h3>Evicted pods</h3><table><tr><th>configuration</th><th>pod</th><th>reason</th><th>ended (s)</th></tr>{evicted}</table>
<h3>Why pods were not scheduled, or waited: the scheduler's last reason (a pod counts under each reason a node gave it)</h3>
<table><tr><th>configuration</th><th>reason</th><th>pods never scheduled</th><th>pods that waited</th></tr>{why}</table>
<script id="data" type="application/json">{data}</script>
<script>
const D = JSON.parse(document.getElementById('data').textContent);
const colors = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];
const color = i => colors[i % colors.length];
function line(id, key, xTitle, yTitle, step) {{
  new Chart(document.getElementById(id), {{type: 'line', data: {{datasets: D.runs.map((r, i) => ({{
    label: r.name, data: r[key], borderColor: color(i), backgroundColor: color(i), pointRadius: 0,
    borderWidth: 1.5, stepped: step ? 'before' : false}}))}},
    options: {{animation: false, parsing: true, scales: {{x: {{type: 'linear', title: {{display: true, text: xTitle}}}},
      y: {{title: {{display: true, text: yTitle}}}}}}}}}});
}}
line('alloc', 'alloc', D.time_unit, 'GPU allocation ratio', true);
line('arrival', 'arrival', 'arrived GPU workload / cluster GPUs', 'GPU allocation ratio', false);
line('frag', 'frag', D.time_unit, 'fragmented GPU capacity', true);
line('arrival_frag', 'arrival_frag', 'arrived GPU workload / cluster GPUs', 'fragmented GPU capacity', false);
line('pending', 'pending', D.time_unit, 'pods', true);
line('delay', 'delay', 'seconds from creation to binding', 'fraction of pods', true);
const groups = [...new Set(D.runs.flatMap(r => Object.keys(r.gang)))].sort();
new Chart(document.getElementById('gang'), {{type: 'bar', data: {{labels: groups, datasets: D.runs.map((r, i) => ({{
  label: r.name, data: groups.map(g => r.gang[g] ?? null), backgroundColor: color(i)}}))}},
  options: {{animation: false, scales: {{y: {{title: {{display: true, text: 'seconds'}}}}}}}}}});
new Chart(document.getElementById('evict'), {{type: 'bar', data: {{labels: ['evicted pods', 'preempted pods'],
  datasets: D.runs.map((r, i) => ({{label: r.name, data: [r.evictions, r.preemptions], backgroundColor: color(i)}}))}},
  options: {{animation: false}}}});
// for a headless check: how many charts drew, and any error on the way
document.body.dataset.charts = Object.keys(Chart.instances).length;
document.body.dataset.errors = pageErrors.join(' | ');
</script></body></html>
"""


def render(doc: dict) -> str:
    with open(CHART_JS, encoding="utf-8") as f:
        chartjs = f.read()
    e = html.escape
    arrived = arrival_points(doc["inputs"].get("inflate"))
    rows = "".join(_row(r, arrived) for r in doc["runs"])
    evicted = "".join(f"<tr><td>{e(r['name'])}</td><td>{e(v['pod'])}</td><td>{e(v['reason'])}</td>"
                      f"<td>{'' if v['t'] is None else round(v['t'])}</td></tr>"
                      for r in doc["runs"] for v in r["evictions"])
    why = "".join(_why(r) for r in doc["runs"])
    data = json.dumps(chart_data(doc)).replace("</", "<\\/")
    inputs = doc["inputs"]
    return PAGE.format(title=e(os.path.basename(str(inputs.get("trace", "")))), chartjs=chartjs,
                       cluster=e(str(inputs.get("cluster"))), edits=e(_edits(inputs)), how=e(_how(inputs)), trace=e(str(inputs.get("trace"))),
                       seed=e(str(inputs.get("seed"))), rows=rows, evicted=evicted, why=why, data=data,
                       arrived_note=" GPU alloc / frag at N% arrived: the same shares when the GPUs the arrived pods "
                       "ask for reach N% of the cluster's (results.json adds the fragmented share of the unallocated "
                       "GPUs there, the paper's frag rate)." if arrived else "",
                       arrived_heads="".join(f"<th>{what} at {a:.0%} arrived</th>" for what in ("GPU alloc", "GPU frag")
                                             for a in arrived))


def _edits(inputs: dict) -> str:
    """The what-if edits of the cluster, as the options that made them."""
    parts = [f"--add-nodes {a}" for a in inputs.get("add_nodes") or []]
    if inputs.get("drop_nodes"):
        parts.append(f"--drop-nodes {inputs['drop_nodes']}")
    return f" with {' '.join(parts)}" if parts else ""


def _how(inputs: dict) -> str:
    """How the trace was run, as the options that said so."""
    parts = [f"--{k.replace('_', '-')} {inputs[k]}" for k in ("limit_pods", "arrival_rate", "inflate", "until",
                                                              "feature_gates") if inputs.get(k) is not None]
    parts += [f"--{k.replace('_', '-')}" for k in ("keep_run_times", "drain") if inputs.get(k)]
    return f" ({' '.join(parts)})" if parts else ""


def _row(r: dict, arrived: tuple[float, ...]) -> str:
    h = r.get("summary") or headline(r, arrived)
    d = h["scheduling_delay_s"]
    cells = [html.escape(r["name"]) + (" (interrupted)" if r.get("interrupted") else ""), h["pods"], h["scheduled"],
             h["pending_at_end"], h["deleted_waiting"], ratio(h["gpu_alloc_ratio_mean"]), ratio(h["gpu_alloc_ratio_max"]),
             ratio(h["fragmentation_ratio_mean"]),
             *(ratio(h[f"{key}_at_arrived"].get(str(a))) for key in ("gpu_alloc_ratio", "fragmentation_ratio")
               for a in arrived),
             h["waited"],
             *(duration(d[f"p{p}"]) for p in PERCENTILES), duration(d["max"]),
             duration(h["makespan_s"]), h["evicted"],
             duration(r["virtual_s"]), f"{r['wall_s']:.1f}", f"{r['events_per_s']:,.0f}",
             f"<code>{r['placement_hash']}</code>"]
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def _why(r: dict) -> str:
    h = r.get("summary") or headline(r)
    never, waited = h["unschedulable_reasons"], h["waited_reasons"]
    return "".join(f"<tr><td>{html.escape(r['name'])}</td><td>{html.escape(why)}</td><td>{never.get(why, 0)}</td>"
                   f"<td>{waited.get(why, 0)}</td></tr>" for why in dict.fromkeys([*never, *waited]))


def summary_rows(doc: dict) -> list[dict]:
    """summary.csv: a row per configuration, the table's numbers unformatted (ratios 0-1, seconds), for a
    spreadsheet; an empty cell where the table has '-'."""
    arrived = arrival_points(doc["inputs"].get("inflate"))
    rows = []
    for r in doc["runs"]:
        h = r["summary"]
        row = {"configuration": r["name"], "interrupted": r["interrupted"]}
        row |= {k: h[k] for k in ("pods", "scheduled", "pending_at_end", "deleted_waiting", "running_at_end",
                                  "gpu_alloc_ratio_mean", "gpu_alloc_ratio_max", "fragmentation_ratio_mean")}
        for key in ("gpu_alloc_ratio", "fragmentation_ratio", "fragmentation_rate"):
            row |= {f"{key}_at_{a:.0%}_arrived": h[f"{key}_at_arrived"][str(a)] for a in arrived}
        row["waited"] = h["waited"]
        row |= {f"scheduling_delay_{k}_s": v for k, v in h["scheduling_delay_s"].items()}
        row |= {"makespan_s": h["makespan_s"], "evicted": h["evicted"], "virtual_s": r["virtual_s"],
                "wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "placement_hash": r["placement_hash"]}
        rows.append(row)
    return rows


def series_rows(doc: dict):
    """series.csv: every configuration's GPU allocation, fragmentation and pending pods over virtual time, a
    row per change (each value holds until the configuration's next row)."""
    for r in doc["runs"]:
        s = r["series"]
        for t, alloc, frag, pending in zip(s["t"], s["gpu_alloc_ratio"], s["fragmentation_ratio"], s["pending"]):
            yield {"configuration": r["name"], "t_s": t, "gpu_alloc_ratio": alloc, "fragmentation_ratio": frag,
                   "pending": pending}


def _write_csv(path: str, rows) -> None:
    rows = iter(rows)
    first = next(rows, None)
    with open(path, "w", encoding="utf-8", newline="") as f:
        if first is None:
            return
        w = csv.DictWriter(f, fieldnames=list(first))
        w.writeheader()
        w.writerow(first)
        w.writerows(rows)


def write_report(out: str, results, inputs: dict) -> dict:
    """results.json, summary.csv, series.csv and report.html in `out`; returns results.json's document."""
    os.makedirs(out, exist_ok=True)
    doc = results_doc(results, inputs)
    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f)
    _write_csv(os.path.join(out, "summary.csv"), summary_rows(doc))
    _write_csv(os.path.join(out, "series.csv"), series_rows(doc))
    with open(os.path.join(out, "report.html"), "w", encoding="utf-8") as f:
        f.write(render(doc))
    return doc
