"""An operator author's second week with kubectl against `nanokube up`: the generators,
`set`, `wait`, server-side printers and the other commands rounds one and two left,
checked against what kube-apiserver 1.37 answers them, on the session's shared cluster."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import own_namespace

NS = "week-two"


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster), in a namespace of this module's own."""
    with own_namespace(session_cluster, NS) as c:
        yield c


def _table(out: str) -> list[dict[str, str]]:
    """A printed table's rows as {column: cell}, cells cut at the header's column starts."""
    header, *rows = out.splitlines()
    starts = [i for i, ch in enumerate(header) if ch != " " and (i == 0 or header[i - 1] == " ")]
    bounds = list(zip(starts, [*starts[1:], None]))
    return [{header[a:b].strip(): row[a:b].strip() for a, b in bounds} for row in rows]


def test_get_ingress_hosts_leave_out_hostless_rules(cluster):
    """printIngress's formatHosts lists the hosts of the first three rules that have one; a
    rule without a host adds nothing ('*' only when no rule has a host). `kubectl create
    ingress --rule=/path=svc:http` makes such a rule, and HOSTS read 'foo.com,*'."""
    cluster.kubectl("-n", NS, "create", "ingress", "mixed", "--class=nginx",
                    "--rule=foo.com/bar*=svc1:8080,tls=cert", "--rule=/path=svc2:http")
    cluster.kubectl("-n", NS, "create", "ingress", "many", "--rule=/a=s:80", "--rule=a.io/=s:80",
                    "--rule=b.io/=s:80", "--rule=c.io/=s:80", "--rule=d.io/=s:80")
    cluster.kubectl("-n", NS, "create", "ingress", "hostless", "--rule=/=s:80")
    rows = {r["NAME"]: r for r in _table(cluster.kubectl("-n", NS, "get", "ingress").stdout)}
    assert (rows["mixed"]["HOSTS"], rows["mixed"]["PORTS"]) == ("foo.com", "80, 443")
    assert rows["many"]["HOSTS"] == "a.io,b.io,c.io + 2 more..."
    assert rows["hostless"]["HOSTS"] == "*"
