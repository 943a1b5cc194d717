"""results.json (every metric of every run) and report.html."""

from __future__ import annotations

import json
import os


def results_doc(results, inputs: dict) -> dict:
    return {"inputs": inputs, "runs": [
        {"name": r.name, "wall_s": r.wall_s, "virtual_s": r.virtual_s, "events": r.events,
         "events_per_s": r.events / r.wall_s if r.wall_s else 0.0, "placement_hash": r.placement_hash,
         "placements": r.placements, **r.metrics} for r in results]}


def write_report(out: str, results, inputs: dict) -> None:
    os.makedirs(out, exist_ok=True)
    doc = results_doc(results, inputs)
    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f)
