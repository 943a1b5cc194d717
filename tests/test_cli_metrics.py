"""`nanokube metrics`: its editing of the external metrics ConfigMap values, and its errors."""

import socket
import subprocess
import sys

import orjson
import pytest

from nanokube.cli_metrics import parse_labels, with_series
from nanokube.metrics.provider import parse_series


def test_one_unlabelled_series_stays_a_plain_quantity():
    assert with_series(None, {}, "12") == "12"
    assert with_series("12", {}, "0") == "0"


def test_labelled_series_replace_only_their_own_labels():
    raw = with_series("5", {"queue": "a"}, "7")
    assert orjson.loads(raw) == [{"labels": {}, "value": "5"}, {"labels": {"queue": "a"}, "value": "7"}]
    raw = with_series(raw, {"queue": "a"}, "1500m")
    assert {tuple(s.labels.items()): s.value for s in parse_series(raw)} == {(): 5000, (("queue", "a"),): 1500}


def test_labels_must_be_key_value_pairs():
    assert parse_labels("queue=jobs, tier=gpu") == {"queue": "jobs", "tier": "gpu"}
    with pytest.raises(ValueError, match="'tier' is not key=value"):
        parse_labels("queue=jobs,tier")


def test_an_unreachable_server_is_one_error_line_and_closes_the_client(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kc = tmp_path / "kubeconfig"
    kc.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{port}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
""")
    done = subprocess.run([sys.executable, "-c", "import sys; from nanokube.cli import main; sys.exit(main())",
                           "metrics", "get", "queue-depth", "--kubeconfig", str(kc)], capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [done.stderr.strip()]
    assert done.stderr.startswith("error: cannot reach the API server:")
