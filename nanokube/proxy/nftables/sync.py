"""Full and partial syncs of the `kube-proxy` table.

The syncer remembers what it last wrote (chains and every map element), so a
partial sync diffs only the services whose structures changed and never lists
the kernel table. Each sync is one nft transaction, so the kernel never holds
half a ruleset; a failed partial sync is retried at once as a full sync.
Chains and elements are counted by the services using them (the `lb-`
chains, ClusterIPs and hairpin pairs are shared), so a change writes only
what appears or disappears.

A full sync (the first, the periodic one, the retry) does as upstream's: it
lists the table's chains and sets, declares and empties the fixed chains,
sets and maps, writes every service again, flushes every other chain it
found (one a previous kube-proxy or anyone else left there included) and
deletes the sets nobody declares; with nodePortAddresses CIDRs it fills `nodeport-ips` with the
namespace's addresses in them as they are then. The table itself stays, so the affinity
sets keep their clients across full syncs and restarts; an affinity set
whose timeout changed is re-created there. The first full sync of a syncer
also re-creates the base chains (one of another priority cannot be changed
in place), and the full sync after a failed one deletes and re-creates the
whole table, whatever the kernel holds that kept the other from loading.

Chains a sync drops are flushed at once and, as upstream's staleChains,
deleted only by a sync more than `STALE_CHAIN_DELAY` later: on kernels
before 6.2 a chain whose last vmap element was just deleted counts as
referenced a moment longer, and deleting it then fails (EBUSY). The deletion
is a transaction of its own before the sync's; a failed one is counted
(`cleanup_failures`), its chains wait another delay before the next try, and
the sync goes on. A stale chain a sync writes again is kept. Stale affinity
sets are deleted at once, after the flushes that drop the rules using them.
A partial sync leaves an affinity set's timeout as it was until the next full
sync.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from ...clock import REAL, Clock
from ..nodeport_addresses import nodeport_ips
from .layout import (
    BASE_CHAINS,
    TABLE,
    Config,
    ServicePort,
    ServiceRules,
    maps,
    service_rules,
    static_chains,
)
from .nft import Nft, NftError

log = logging.getLogger(__name__)

_ELEMENTS_PER_LINE = 1000
#: seconds a flushed chain stays before a sync deletes it (upstream's one second)
STALE_CHAIN_DELAY = 1.0


@dataclass
class SyncReport:
    """What one sync wrote; `full` is true when the table was rebuilt."""

    full: bool = False
    ok: bool = True
    failures: int = 0
    #: failed stale-chain deletions (kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total)
    cleanup_failures: int = 0
    #: the last failed transaction's message (also when a full retry then succeeded)
    error: str = ""
    services_changed: list[str] = field(default_factory=list)
    chains_written: list[str] = field(default_factory=list)
    chains_deleted: list[str] = field(default_factory=list)
    elements_added: dict[str, list[str]] = field(default_factory=dict)
    elements_deleted: dict[str, list[str]] = field(default_factory=dict)
    lines: int = 0


class Syncer:
    def __init__(self, nft: Nft, cfg: Config | None = None, clock: Clock = REAL):
        self.nft = nft
        self.cfg = cfg or Config()
        self.clock = clock
        self.need_full = True
        #: no full sync has succeeded yet: the next one re-creates the base chains
        self._fresh = True
        #: a full sync failed: the next one deletes and re-creates the table, whatever it holds
        self._recreate = False
        self._reset()

    def _reset(self) -> None:
        self._services: dict[str, ServicePort] = {}
        self._rules: dict[str, ServiceRules] = {}
        self._chains: dict[str, list] = {}  # name -> [rules, users]; lb- chains are shared
        self._sets: dict[str, str] = {}  # affinity sets
        self._elems: dict[tuple[str, str], list] = {}  # (map, key) -> [value, refcount]
        self._stale: dict[str, float] = {}  # chain -> when a sync flushed it (monotonic)

    def sync(self, services: Mapping[str, ServicePort], full: bool = False) -> SyncReport:
        """Make the kernel match `services` (service-port key -> structure)."""
        failures, error = 0, ""
        cleanup_failures = self._delete_stale()
        if not (full or self.need_full):
            report, text = self._plan(services, full=False)
            report.cleanup_failures = cleanup_failures
            try:
                if report.lines:
                    self.nft.apply(text)
                return report
            except NftError as e:
                failures, error = 1, str(e)
                log.warning("partial nftables sync failed, retrying as a full sync: %s", e)
        kernel = None if self._recreate else self._kernel()
        report, text = self._plan(services, full=True, kernel=kernel)
        report.failures, report.error, report.cleanup_failures = failures, error, cleanup_failures
        try:
            self.nft.apply(text)
            self.need_full = self._fresh = self._recreate = False
        except NftError as e:
            report.failures += 1
            report.ok, report.error = False, str(e)
            self.need_full = self._recreate = True
            self._stale.clear()  # not flushed after all; the next full sync deletes the table anyway
            log.error("full nftables sync failed (the next one re-creates the table): %s", e)
        return report

    def _kernel(self) -> _Kernel:
        """The table's chains and sets as the kernel has them (none when it has no table); a failed
        listing is logged and the sync goes on, leaving what it did not see (as upstream)."""
        kernel = _Kernel()
        try:
            for o in self.nft.declarations("chains", self.cfg.family):
                if o["chain"]["table"] == TABLE:
                    kernel.chains.add(o["chain"]["name"])
            for what in ("sets", "maps"):
                for o in self.nft.declarations(what, self.cfg.family):
                    decl = o[what[:-1]]
                    if decl["table"] == TABLE:
                        kernel.sets[decl["name"]] = decl.get("timeout")
        except NftError as e:
            log.error("unable to list the nftables table's chains and sets: stale ones stay: %s", e)
        return kernel

    def _delete_stale(self) -> int:
        """The chains flushed more than STALE_CHAIN_DELAY ago, deleted in a transaction of their
        own; 1 when it failed (they are stale from now, for a sync a delay later to try again)."""
        now = self.clock.monotonic()
        due = [name for name, at in self._stale.items() if now - at > STALE_CHAIN_DELAY]
        if not due:
            return 0
        t = f"{self.cfg.family} {TABLE}"
        try:
            self.nft.apply("".join(f"delete chain {t} {name}\n" for name in due))
        except NftError as e:
            log.warning("unable to delete %d stale nftables chains, will retry later: %s", len(due), e)
            self._stale.update(dict.fromkeys(due, now))
            return 1
        for name in due:
            del self._stale[name]
        return 0

    def _plan(self, services: Mapping[str, ServicePort], full: bool,
              kernel: _Kernel | None = None) -> tuple[SyncReport, str]:
        """Update the remembered state to `services` and return the transaction that gets there;
        a full one keeps the table `kernel` lists, or re-creates it when there is no listing."""
        report = SyncReport(full=full)
        stale_since = self._stale
        if full:
            self._reset()
        t = f"{self.cfg.family} {TABLE}"
        head = self._head(kernel) if full else []
        touched: dict[tuple[str, str], object] = {}  # (map, key) -> value before this sync
        chains_before: dict[str, tuple[str, ...] | None] = {}  # chain -> rules before this sync
        new_sets: list[str] = []
        removed_sets: list[str] = []

        def account(rules: ServiceRules, delta: int) -> None:
            for m, elems in rules.elements.items():
                for k, v in elems.items():
                    _count(self._elems, touched, (m, k), v, delta)
            for name, chain in rules.chains.items():
                _count(self._chains, chains_before, name, chain, delta)

        for key in [k for k in self._services if k not in services]:
            old = self._rules.pop(key)
            del self._services[key]
            account(old, -1)
            for name in old.sets:
                del self._sets[name]
                removed_sets.append(name)
            report.services_changed.append(key)
        for key, sp in services.items():
            last = self._services.get(key)
            if last is sp or last == sp:
                continue
            report.services_changed.append(key)
            new = service_rules(self.cfg, sp)
            old = self._rules.get(key)
            account(new, +1)
            if old is not None:
                account(old, -1)
                for name in old.sets:
                    if name not in new.sets:
                        del self._sets[name]
                        removed_sets.append(name)
            for name, body in new.sets.items():
                if name not in self._sets:
                    new_sets.append(f"add set {t} {name} {{ {body} }}")
                self._sets[name] = body
            self._services[key], self._rules[key] = sp, new

        new_chains: list[str] = []
        rule_lines: list[str] = []
        removed_chains: list[str] = []
        for name, before in chains_before.items():
            cur = self._chains.get(name)
            after = cur[0] if cur else None
            if before == after:
                continue
            if after is None:
                removed_chains.append(name)
                continue
            if before is None:
                new_chains.append(name)
                self._stale.pop(name, None)
            else:
                rule_lines.append(f"flush chain {t} {name}")
            rule_lines += [f"add rule {t} {name} {r}" for r in after]
            report.chains_written.append(name)

        adds: dict[str, list[str]] = {}
        dels: dict[str, list[str]] = {}
        for (m, k), before in touched.items():
            cur = self._elems.get((m, k))
            after = cur[0] if cur else None
            if before == after:
                continue
            if before is not None:
                dels.setdefault(m, []).append(k if before == "" else f"{k} : {before}")
            if after is not None:
                adds.setdefault(m, []).append(k if after == "" else f"{k} : {after}")
        report.elements_added = {m: [e.split(" : ")[0] for e in v] for m, v in adds.items()}
        report.elements_deleted = {m: [e.split(" : ")[0] for e in v] for m, v in dels.items()}
        report.chains_deleted = removed_chains

        now = self.clock.monotonic()
        if full:
            # everything else in the kernel's table is stale: its chains flushed now (deleted a
            # delay later, or when already stale, a delay after they first were), sets no one
            # declares and affinity sets of another timeout deleted once the flushes dropped their users
            static = {name for name, *_ in BASE_CHAINS} | set(static_chains(self.cfg))
            removed_chains = sorted(c for c in (kernel.chains if kernel else ()) if c not in static and c not in self._chains)
            report.chains_deleted = removed_chains
            self._stale = {c: stale_since.get(c, now) for c in removed_chains}
            declared = maps(self.cfg)
            removed_sets = [name for name, timeout in (kernel.sets.items() if kernel else ()) if name not in declared
                            and not (name in self._sets and f"timeout {timeout}s ;" in self._sets[name])]
            lines = head + [f"add chain {t} {name}\nflush chain {t} {name}" for name in new_chains]
            lines += [f"flush chain {t} {name}" for name in removed_chains]
            lines += [f"delete set {t} {name}" for name in removed_sets] + new_sets
            lines += [f"add rule {t} {name} {r}" for name, rules in static_chains(self.cfg).items() for r in rules]
            if self.cfg.nodeport_cidrs and (ips := nodeport_ips(self.nft.netns, self.cfg.nodeport_cidrs)):
                lines.append(f"add element {t} nodeport-ips {{ {', '.join(ips)} }}")
            lines += rule_lines + _element_lines("add", t, adds)
            report.lines = len(lines)
            return report, "\n".join(lines) + "\n"
        lines = new_sets + [f"add chain {t} {name}" for name in new_chains] + rule_lines
        lines += _element_lines("delete", t, dels) + _element_lines("add", t, adds)
        lines += [f"flush chain {t} {name}" for name in removed_chains]
        lines += [f"delete set {t} {name}" for name in removed_sets]
        self._stale.update((name, now) for name in removed_chains)
        report.lines = len(lines)
        return report, "\n".join(lines) + "\n"

    def _head(self, kernel: _Kernel | None) -> list[str]:
        """A full sync's table, sets, maps and fixed chains, declared and emptied. With `kernel`
        the table stays (the affinity sets keep their clients, as upstream's full sync keeps them)
        and the Syncer's first full sync deletes its base chains before declaring them again,
        so that one of another priority or hook is re-created; without, the table is deleted and
        re-created, whatever it held."""
        t = f"{self.cfg.family} {TABLE}"
        lines = [f"add table {t}", f"delete table {t}"] if kernel is None else []
        lines.append(f"add table {t} {{ comment \"rules for kube-proxy\" ; }}")
        if kernel is not None and self._fresh:
            lines += [f"add chain {t} {name}\ndelete chain {t} {name}" for name, *_ in BASE_CHAINS]
        for name, body in maps(self.cfg).items():
            kind = "map" if " : " in body else "set"
            lines.append(f"add {kind} {t} {name} {{ {body} }}")
            if kernel is not None:
                lines.append(f"flush {kind} {t} {name}")
        chains = [f"{name} {{ type {typ} hook {hook} priority {prio} ; }}" for name, typ, hook, prio in BASE_CHAINS]
        chains += [name for name in static_chains(self.cfg) if not name.startswith(("filter-", "nat-"))]
        for chain in chains:
            lines.append(f"add chain {t} {chain}")
            if kernel is not None:
                lines.append(f"flush chain {t} {chain.split()[0]}")
        return lines


@dataclass
class _Kernel:
    """What a full sync lists of its table: chain names, and set and map names with their timeouts."""

    chains: set[str] = field(default_factory=set)
    sets: dict[str, int | None] = field(default_factory=dict)


def _count(live: dict, before: dict, key, value, delta: int) -> None:
    """Add `delta` users of `key` with `value`, noting the value it had
    before this sync the first time the sync touches it."""
    cur = live.get(key)
    if key not in before:
        before[key] = cur[0] if cur else None
    if cur is None:
        live[key] = [value, delta]
        return
    cur[1] += delta
    if delta > 0:
        cur[0] = value
    if cur[1] <= 0:
        del live[key]


def _element_lines(verb: str, table: str, elems: dict[str, list[str]]) -> list[str]:
    out = []
    for m, items in elems.items():
        if verb == "delete":
            items = [e.split(" : ")[0] for e in items]
        for i in range(0, len(items), _ELEMENTS_PER_LINE):
            out.append(f"{verb} element {table} {m} {{ {', '.join(items[i:i + _ELEMENTS_PER_LINE])} }}")
    return out
