"""A seeded, bounded run of scripts/fuzz_patch.py (fuzz58) against an in-process server: strategic merge
patches of directives, JSON patches, applies and their conflicts, subresources, fieldValidation, stale
updates and creates, each answer judged by upstream's contract (no 5xx, a 4xx a Status of upstream's
shape, a refused write changing nothing, an accepted object re-validating). No answer is timed here
(the script's --slow is for long runs)."""

from __future__ import annotations

import argparse
import asyncio

from scripts import fuzz_patch
from tests.served import served

#: kinds of lists keyed by merge keys (a pod's, a workload's template), a custom resource of CEL rules, and one
#: of a status and scale subresource
KINDS = "configmaps,pods,deployments,serviceaccounts,widgets"
#: the families that write (the reads' watches each take their timeoutSeconds: the long runs read them)
FAMILIES = "strategic,json,apply,conflict,merge,subresource,validation,create,update,cbor,stale,accept"
#: a seed whose first cases draw every family and reach every judgement the run makes (seed 54 by its 60th
#: case, where seed 58 needed 200 for the unknown-field ones): 200 cases of seeds 50-69 found no more
SEED, CASES = 54, 60


async def test_patch_fuzz_breaks_no_answer(tmp_path):
    args = argparse.Namespace(kubeconfig=str(tmp_path / "kubeconfig"), minutes=60.0, cases=CASES, seed=SEED, slow=float("inf"),
                              kinds=KINDS, families=FAMILIES, failures=str(tmp_path / "broken.jsonl"), stop=False)
    async with served(tmp_path):
        broken, fz = await asyncio.to_thread(fuzz_patch.fuzz, args)
    assert not broken, (tmp_path / "broken.jsonl").read_text()[:3000]
    # (the run judged what it is for: refused writes, re-validated objects, conflicts, Status shapes)
    assert set(fz.families) == set(FAMILIES.split(","))
    assert {"refused write changes nothing", "accepted re-validates", "conflicting apply", "status shape",
            "stale update's Conflict", "Strict unknown field", "Warn unknown field"} <= set(fz.judged), fz.judged
