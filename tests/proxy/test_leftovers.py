"""Moving a node from iptables mode: what an iptables-mode kube-proxy left
(as iptables-nft writes it, nftables tables of its own) goes with
`nanokube proxy --cleanup`, and nothing of the kubelet's or anyone else's."""

import subprocess

from nanokube.cli import main

#: an iptables-mode kube-proxy's and kubelet's rules as iptables-nft keeps them
IPTABLES_MODE = """
table ip nat {
  chain PREROUTING {
    type nat hook prerouting priority dstnat; policy accept;
    counter jump KUBE-SERVICES comment "kubernetes service portals"
  }
  chain OUTPUT {
    type nat hook output priority -100; policy accept;
    jump KUBE-SERVICES
    ip daddr 192.0.2.1 accept
  }
  chain POSTROUTING {
    type nat hook postrouting priority srcnat; policy accept;
    jump KUBE-POSTROUTING
  }
  chain KUBE-SERVICES {
    ip daddr 10.96.0.10 tcp dport 53 jump KUBE-SVC-ERIFXISQEP7F7OF4
    jump KUBE-NODEPORTS
  }
  chain KUBE-NODEPORTS {
  }
  chain KUBE-SVC-ERIFXISQEP7F7OF4 {
    jump KUBE-SEP-IT2ZTR26TO4XFPTO
  }
  chain KUBE-SEP-IT2ZTR26TO4XFPTO {
    jump KUBE-MARK-MASQ
    meta l4proto tcp dnat to 10.244.0.5:53
  }
  chain KUBE-MARK-MASQ {
    meta mark set mark or 0x4000
  }
  chain KUBE-POSTROUTING {
    mark and 0x4000 == 0 return
    masquerade
  }
  chain KUBE-MARK-DROP {
    meta mark set mark or 0x8000
  }
  chain KUBE-KUBELET-CANARY {
  }
}
table ip filter {
  chain FORWARD {
    type filter hook forward priority 0; policy accept;
    jump KUBE-FORWARD
    jump KUBE-FIREWALL
  }
  chain KUBE-FORWARD {
    ct state invalid drop
  }
  chain KUBE-FIREWALL {
    ip saddr != 127.0.0.0/8 ip daddr 127.0.0.0/8 drop
  }
  chain KUBE-PROXY-CANARY {
  }
}
table ip6 nat {
  chain PREROUTING {
    type nat hook prerouting priority dstnat; policy accept;
    jump KUBE-SERVICES
  }
  chain KUBE-SERVICES {
  }
}
table inet mine {
  chain KUBE-SERVICES {
  }
}
"""


def chains(netns: str) -> dict[tuple[str, str, str], list[str]]:
    """(family, table, chain): its rules as nft prints them."""
    out = subprocess.run(["ip", "netns", "exec", netns, "nft", "list", "ruleset"], check=True,
                         capture_output=True, text=True).stdout
    got, family, table, chain = {}, "", "", None
    for line in (x.strip() for x in out.splitlines()):
        if line.startswith("table "):
            _, family, table, _ = line.split()
        elif line.startswith("chain "):
            chain = (family, table, line.split()[1])
            got[chain] = []
        elif line == "}":
            chain = None
        elif chain and line and not line.startswith("type "):
            got[chain].append(line)
    return got


def test_cleanup_removes_what_an_iptables_mode_kube_proxy_left(netns):
    subprocess.run(["ip", "netns", "exec", netns, "nft", "-f", "-"], input=IPTABLES_MODE.encode(), check=True)
    assert main(["proxy", "--cleanup", "--proxy-mode", "nftables", "--netns", netns]) == 0
    assert chains(netns) == {
        ("ip", "nat", "PREROUTING"): [],
        ("ip", "nat", "OUTPUT"): ["ip daddr 192.0.2.1 accept"],
        ("ip", "nat", "POSTROUTING"): [],
        ("ip", "nat", "KUBE-MARK-DROP"): ["meta mark set meta mark | 0x00008000"],
        ("ip", "nat", "KUBE-KUBELET-CANARY"): [],
        ("ip", "filter", "FORWARD"): ["jump KUBE-FIREWALL"],
        ("ip", "filter", "KUBE-FIREWALL"): ["ip saddr != 127.0.0.0/8 ip daddr 127.0.0.0/8 drop"],
        ("ip6", "nat", "PREROUTING"): [],
        ("inet", "mine", "KUBE-SERVICES"): [],
    }
    assert main(["proxy", "--cleanup", "--proxy-mode", "nftables", "--netns", netns]) == 0, "nothing left is no error"
