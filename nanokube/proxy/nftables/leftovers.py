"""The rules an iptables- or ipvs-mode kube-proxy left behind, removed as
upstream's platformCleanup removes them when it starts in nftables mode (and
`--cleanup` for every mode): otherwise a node moved from iptables mode keeps
its stale KUBE-SERVICES DNATs in front of the new `kube-proxy` table.

iptables-nft (the iptables of every current distribution) keeps those rules
as nftables tables of its own (`ip nat`, `ip filter`, `ip mangle` and the ip6
ones), so they are read and removed here with nft itself: the rules in other
chains that jump to a kube-proxy chain, then kube-proxy's chains. Chains of
the kubelet's (KUBE-MARK-DROP, KUBE-FIREWALL, KUBE-KUBELET-CANARY) and
anyone else's stay. Rules written with iptables-legacy are not nftables
rules; nanokube, having no iptables binary of its own, leaves those."""

from __future__ import annotations

from .nft import Nft

TABLES = ("nat", "filter", "mangle")
FAMILIES = ("ip", "ip6")
#: kube-proxy's fixed chains in iptables and ipvs modes
CHAINS = frozenset({
    "KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ",
    "KUBE-FORWARD", "KUBE-PROXY-FIREWALL", "KUBE-PROXY-CANARY", "KUBE-LOAD-BALANCER", "KUBE-IPVS-FILTER",
    "KUBE-IPVS-OUT-FILTER", "KUBE-FIREWALL-IPVS"})
#: the per-service and per-endpoint chains' prefixes
PREFIXES = ("KUBE-SVC-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-", "KUBE-SEP-", "KUBE-XLB-")


def proxy_chain(name: str) -> bool:
    return name in CHAINS or name.startswith(PREFIXES)


def _jump_target(rule: dict) -> str | None:
    for e in rule.get("expr") or ():
        for verdict in ("jump", "goto"):
            if isinstance(e, dict) and verdict in e:
                return e[verdict].get("target")
    return None


def transaction(ruleset: list[dict]) -> str:
    """nft commands that remove kube-proxy's iptables-mode rules from `ruleset`
    (`nft -j list ruleset`'s objects): jumps into them first, then the chains."""
    chains = [c["chain"] for c in ruleset if "chain" in c]
    doomed = [c for c in chains if c["family"] in FAMILIES and c["table"] in TABLES and proxy_chain(c["name"])]
    gone = {(c["family"], c["table"], c["name"]) for c in doomed}
    lines = []
    for o in ruleset:
        r = o.get("rule")
        if r is None or (r["family"], r["table"], r["chain"]) in gone:
            continue
        target = _jump_target(r)
        if target and (r["family"], r["table"], target) in gone:
            lines.append(f"delete rule {r['family']} {r['table']} {r['chain']} handle {r['handle']}")
    lines += [f"flush chain {c['family']} {c['table']} {c['name']}" for c in doomed]
    lines += [f"delete chain {c['family']} {c['table']} {c['name']}" for c in doomed]
    return "".join(line + "\n" for line in lines)


def remove(netns: str | None, binary: str = "nft") -> int:
    """Remove them in `netns`; the number of chains removed."""
    nft = Nft(netns, binary)
    tx = transaction(nft.list_ruleset())
    if tx:
        nft.apply(tx)
    return tx.count("delete chain ")
