"""`nanokube up --audit-log-maxsize/-maxbackup/-maxage/-compress`: the audit log rotated as
kube-apiserver's (lumberjack) rotates it, backups named after the time they were made, removed
past the count and age limits and gzipped, also with two API workers appending to the one file;
and the audit flags kube-apiserver validates refused with its messages."""

from __future__ import annotations

import gzip
import http.client
import json
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import pytest

from benchmarks.api import tls_context
from tests.e2e.conftest import start_cluster, wait_for

#: configmap creates by the admin at RequestResponse: each event holds the object twice
BODIES = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: RequestResponse
    users: ["kubernetes-super-admin"]
    verbs: ["create"]
    resources: [{group: "", resources: ["configmaps"]}]
"""
BACKUP = re.compile(r"audit-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3}\.log\.gz")


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H-%M-%S.") + f"{int(t * 1000) % 1000:03d}"


def test_two_workers_rotate_one_log_without_losing_splitting_or_overfilling(tmp_path):
    (tmp_path / "policy.yaml").write_text(BODIES)
    data = tmp_path / "data"
    c = start_cluster(data, "sqlite", ("--api-workers", "2", "--audit-policy-file", str(tmp_path / "policy.yaml"),
                                       "--audit-log-maxsize", "1", "--audit-log-maxbackup", "0", "--audit-log-compress"))
    try:
        ctx = tls_context(Path(c.kubeconfig), data)
        host, port = c.url.removeprefix("https://").rsplit(":", 1)
        payload = "x" * 60_000  # ~120 kB an event: a rotation every eight or so

        def create(i: int) -> int:
            conn = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=60)  # a connection each:
            try:  # the kernel spreads them over both workers
                conn.request("POST", "/api/v1/namespaces/default/configmaps",
                             json.dumps({"metadata": {"name": f"cm-{i}"}, "data": {"k": payload}}),
                             {"Content-Type": "application/json"})
                return conn.getresponse().status
            finally:
                conn.close()

        with ThreadPoolExecutor(8) as pool:
            assert set(pool.map(create, range(60))) == {201}
        wait_for(lambda: not [p for p in data.iterdir() if p.name.startswith("audit-") and p.suffix == ".log"],
                 30, "every backup compressed")
    finally:
        c.stop()
    backups = sorted(p for p in data.iterdir() if p.name.startswith("audit-"))
    assert len(backups) >= 5 and all(BACKUP.fullmatch(p.name) for p in backups), [p.name for p in backups]
    texts = [gzip.decompress(p.read_bytes()) for p in backups] + [(data / "audit.log").read_bytes()]
    assert all(len(t) <= 1024 * 1024 for t in texts)
    names = [e["objectRef"]["name"] for t in texts for e in map(json.loads, t.splitlines())
             if e["user"]["username"] == "kubernetes-super-admin" and e["objectRef"].get("namespace") == "default"]  # each line whole
    assert sorted(names) == sorted(f"cm-{i}" for i in range(60))  # each event once


def test_backups_past_the_count_and_age_are_removed_and_the_rest_compressed_at_start(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    now = time.time()
    recent = [_stamp(now - days * 86400) for days in (1, 2, 3)]
    made = {f"audit-{recent[0]}.log": b"one day\n", f"audit-{recent[1]}.log.gz": gzip.compress(b"two days\n"),
            f"audit-{recent[2]}.log": b"three days\n", "audit-2020-01-01T00-00-00.000.log": b"old\n",
            "audit-notes.log": b"not a backup\n", f"other-{recent[2]}.log": b"another log's\n"}
    for name, content in made.items():
        (data / name).write_bytes(content)
    c = start_cluster(data, "sqlite", ("--audit-log-maxbackup", "2", "--audit-log-compress"))
    try:
        wait_for(lambda: not (data / f"audit-{recent[0]}.log").exists(), 30, "the newest backup compressed")
    finally:
        c.stop()
    # the two newest kept (a file and its .gz counted once), one gzipped; past 366 days, past two: gone
    assert sorted(p.name for p in data.iterdir() if "-" in p.name and p.suffix in (".log", ".gz")) == sorted(
        [f"audit-{recent[0]}.log.gz", f"audit-{recent[1]}.log.gz", "audit-notes.log", f"other-{recent[2]}.log"])
    assert gzip.decompress((data / f"audit-{recent[0]}.log.gz").read_bytes()) == b"one day\n"
    assert (data / "audit.log").stat().st_mode & 0o777 == 0o600  # made as upstream's ensureLogFile makes it


def test_an_audit_log_path_that_cannot_be_opened_stops_up(tmp_path):
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "up", "--data-dir", str(tmp_path / "data"),
                        "--audit-log-path", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stderr) == (1, f"nanokube: ensureLogFile: open {tmp_path}: is a directory\n")


@pytest.mark.parametrize("flags,error", [
    (["--audit-log-maxsize", "-1"], "--audit-log-maxsize -1 can't be a negative number"),
    (["--audit-log-mode", "strict"], 'invalid audit log mode strict, allowed modes are "batch,blocking,blocking-strict"'),
    (["--audit-log-version", "audit.k8s.io/v1beta1"], 'invalid group version, allowed versions are ["audit.k8s.io/v1"]'),
    (["--audit-webhook-mode", "async"],
     'invalid audit webhook mode async, allowed modes are "batch,blocking,blocking-strict"'),
    (["--audit-webhook-batch-throttle-qps", "0"], "invalid audit batch webhook throttle QPS 0, must be a positive number"),
    (["--audit-webhook-batch-max-size", "0"], "invalid audit batch webhook max batch size 0, must be a positive number"),
    (["--audit-log-mode", "batch", "--audit-log-batch-throttle-enable"],
     "invalid audit batch log throttle QPS 0, must be a positive number"),
    (["--audit-webhook-truncate-max-batch-size", "10"],
     "invalid audit truncate webhook max batch size 10, must be greater than max event size (102400)"),
])
def test_audit_flags_upstream_refuses_stop_up(tmp_path, flags, error):
    (tmp_path / "webhook.yaml").write_text("apiVersion: v1\nkind: Config\n")
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "up", "--data-dir", str(tmp_path / "data"),
                        "--audit-webhook-config-file", str(tmp_path / "webhook.yaml"), *flags],
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stderr) == (2, f"nanokube: {error}\n")


def test_a_refused_audit_flag_stops_up_before_the_server_and_the_webhook_client_are_imported(tmp_path):
    """kube-apiserver validates its options before it builds anything: so does `up`, cheaply."""
    (tmp_path / "webhook.yaml").write_text("apiVersion: v1\nkind: Config\n")
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "nanokube.cli", "up", "--data-dir", str(tmp_path / "data"),
                        "--audit-webhook-config-file", str(tmp_path / "webhook.yaml"), "--audit-webhook-mode", "async"],
                       capture_output=True, text=True, timeout=60)
    imported = {line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    assert r.returncode == 2 and r.stderr.endswith(
        'nanokube: invalid audit webhook mode async, allowed modes are "batch,blocking,blocking-strict"\n')
    assert "nanokube.apiserver.audit_options" in imported  # (the listing is read right)
    assert not imported & {"nanokube.apiserver.app", "nanokube.apiserver.audit_webhook", "nanokube.apiserver.cache",
                           "nanokube.scheduler.plugins", "nanokube.metrics.prometheus", "nanokube.controllers.base",
                           "aiohttp"}
    assert not (tmp_path / "data").exists()
