"""Workload-aware preemption (KEP-5710), DefaultPreemption's PodGroupPostFilter.

When a whole PodGroup fails its workload cycle, each candidate domain (the
whole cluster, or one topology placement) is tried: every strictly
lower-priority unit on it is removed in memory and the group's placement
algorithm reruns. A unit is a PodGroup with `disruptionMode: all` (all its
running pods, evicted or kept together) or a single pod (a lone pod, or a
member of a `single`-mode group). With the group placed, victims are
reprieved most important first (PDB-breaking units in a first pass) while
every preemptor pod still passes Filter where it was put. The domain whose
victims cost least wins; victims get DisruptionTarget and are deleted, then
the preemptor pods' failure reports (the workload cycle's) write their
nominatedNodeName with PodScheduled=False. While that preemption is still
going on (its victims being evicted, or terminating on the members'
nominated nodes) the group's retries preempt nothing more: they answer
"ongoing preemption on nominated nodes" with the nominations as they are.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from ...machinery.conditions import observed_generation
from ..api import SCHEDULER_FIELD_MANAGER, reference
from ..cache import NodeInfo
from ..framework import Code, CycleState, Framework, PodInfo, Status, unschedulable
from ...machinery.conditions import find_condition, remove_condition, transition_time
from ...machinery.podgroups import group_key, group_priority

#: upstream's PodGroupPostFilter prefixes each message of the group evaluator with this
PREFIX = "pod group preemption: "
NEVER = "not eligible due to preemptionPolicy=Never."
NO_VICTIMS = "No preemption victims found for incoming preemptor"
ONGOING = "ongoing preemption on nominated nodes"
DISRUPTION_TARGET = "DisruptionTarget"
REASON = "PreemptionByScheduler"
#: keeps summed priorities positive so fewer victims always cost less (upstream's MaxInt32 + 1)
PRIORITY_SHIFT = 2**31
#: single units tried alone as candidate placements, cheapest first (a bound on one cycle's work)
MAX_SINGLE_CANDIDATES = 32


def disruption_all(pg: dict | None) -> bool:
    return "all" in ((pg or {}).get("spec") or {}).get("disruptionMode") or {}


@dataclass
class Unit:
    """What is evicted or kept as one: an `all` group's running pods, or one pod."""

    pods: list[PodInfo]
    priority: int
    group: str = ""  # `ns/name` of an `all`-mode PodGroup
    start: str = ""

    def importance(self) -> tuple:
        """Most important first: higher priority, groups before lone pods, running longer."""
        return -self.priority, 0 if self.group else 1, self.start


@dataclass
class GroupPreemptor:
    """The failed group as the PodGroupPostFilter sees it."""

    key: str
    pg: dict
    pods: list[PodInfo]  # pending members, in scheduling order
    domains: list[list[NodeInfo]]
    fwk: Framework
    #: the group's placement algorithm on a node subset; returns an Attempt (rolled back)
    place: Callable[[list[NodeInfo]], object]
    #: other groups' nominated pods and their nodes: space already promised
    held: list[tuple[PodInfo, str]] = field(default_factory=list)
    #: this group's own nominations from its last preemption (pod uid -> node), which its
    #: pods' nominatedNodeName may not show yet
    nominations: dict[str, str] = field(default_factory=dict)
    #: set by the plugin that preempted once its victims are marked and deleted; the members'
    #: failure reports carry the nominations and wait for it, so a nomination is never seen
    #: before the evictions it counts on
    evicted: asyncio.Event | None = None


@dataclass
class Plan:
    """The victims and nominations chosen for one domain."""

    victims: list[Unit]
    nominations: dict[str, str] = field(default_factory=dict)  # preemptor pod uid -> node
    pdb_violations: int = 0

    def cost(self) -> tuple:
        """Upstream's candidate order (fewest PDB violations, the lowest most
        important victim, the smallest priority sum, the fewest pods) with
        the fewest units (groups or lone pods) before the sum: evicting one
        whole gang costs less than breaking into two."""
        top = max((u.priority for u in self.victims), default=-PRIORITY_SHIFT)
        return (self.pdb_violations, top, len(self.victims),
                sum((u.priority + PRIORITY_SHIFT) * len(u.pods) for u in self.victims),
                sum(len(u.pods) for u in self.victims))


def terminating_by_preemption(pod: dict) -> bool:
    """Upstream's PodTerminatingByPreemption: being deleted after a
    scheduler marked it DisruptionTarget=True (PreemptionByScheduler)."""
    if not pod["metadata"].get("deletionTimestamp"):
        return False
    cond = find_condition((pod.get("status") or {}).get("conditions"), DISRUPTION_TARGET)
    return cond is not None and cond.get("status") == "True" and cond.get("reason") == REASON


def _start(info: PodInfo) -> str:
    return (info.pod.get("status") or {}).get("startTime") or info.pod["metadata"].get("creationTimestamp") or ""


def _terminating(info: PodInfo) -> bool:
    return bool(info.pod["metadata"].get("deletionTimestamp"))


def victim_units(nodes: list[NodeInfo], all_nodes: list[NodeInfo], below: int, own: str, groups,
                 going: set[str] = frozenset()) -> list[Unit]:
    """Units with a pod on `nodes` whose priority is below `below`, the
    preemptor's own group and pods already on their way out (terminating,
    or in `going`) left out. An `all` group's unit holds its running pods
    on every node, so it goes whole. One walk over every pod of the
    cluster (each group looked up once) finds the groups and, where
    the domain is the whole cluster, the single pods too."""
    whole: dict[str, Unit] = {}
    #: each group met: whether it is the preemptor's own, its PodGroup and priority, its unit if `all`
    met: dict[str, tuple[bool, dict | None, int, Unit | None]] = {}
    #: pods out of the running (terminating, going, the preemptor's own group) and members of `all` groups
    skip: set[str] = set()
    #: the group (None for a lone pod) of each other pod, for a pass over a smaller domain
    lone: dict[str, dict | None] = {}
    singles: list[Unit] = []
    everywhere = nodes is all_nodes
    for n in all_nodes:
        for uid, p in n.pods.items():
            pod = p.pod
            md = pod["metadata"]
            if uid in going or md.get("deletionTimestamp"):
                skip.add(uid)
                continue
            name = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
            pg, prio = None, p.priority
            if name:
                key = f"{md.get('namespace', '')}/{name}"
                found = met.get(key)
                if found is None:
                    pg = groups.get(key)
                    unit = None
                    if key != own and disruption_all(pg):
                        unit = whole[key] = Unit([], group_priority(pg), key)
                    found = met[key] = (key == own, pg, group_priority(pg) if pg else 0, unit)
                mine, pg, group_prio, unit = found
                if mine or unit is not None:
                    skip.add(uid)
                    if unit is not None:
                        unit.pods.append(p)
                    continue
                if pg:
                    prio = group_prio
            lone[uid] = pg
            if everywhere and prio < below:
                singles.append(Unit([p], prio, start=_start(p)))
    here = set() if everywhere else {uid for n in nodes for uid in n.pods}
    units = []
    for u in whole.values():
        if u.priority < below and (everywhere or any(p.uid in here for p in u.pods)):
            u.start = min([_start(p) for p in u.pods])
            units.append(u)
    if everywhere:
        return units + singles
    for n in nodes:
        for uid, p in n.pods.items():
            if uid in skip:
                continue
            if uid in lone:
                pg = lone[uid]
            else:  # a node `all_nodes` did not list
                key = group_key(p.pod)
                if _terminating(p) or uid in going or (key and (key == own or key in whole)):
                    continue
                pg = groups.get(key) if key else None
            prio = group_priority(pg) if pg else p.priority
            if prio < below:
                units.append(Unit([p], prio, start=_start(p)))
    return units


class _Nodes:
    """A domain's NodeInfos by name, in domain order; `own` swaps in a copy
    of a node the first time it is changed, so the snapshot's NodeInfos (and
    the copies of the view it was derived from) are never changed."""

    def __init__(self, nodes: list[NodeInfo]) -> None:
        self.infos = {n.name: n for n in nodes}
        self.owned: set[str] = set()

    def own(self, name: str) -> NodeInfo:
        if name in self.owned:
            return self.infos[name]
        self.owned.add(name)
        ni = self.infos[name] = self.infos[name].clone()
        return ni

    def drop(self, name: str, uids: set[str]) -> None:
        """Takes pods off a node: off its copy, made here without them if there is none yet."""
        if name in self.owned:
            for uid in uids:
                self.infos[name].remove_pod(uid)
        else:
            self.owned.add(name)
            self.infos[name] = self.infos[name].without(uids)

    def derive(self) -> _Nodes:
        """A view of the same nodes whose changes stay its own."""
        return _Nodes(list(self.infos.values()))


class PodGroupPreemption:
    """The PodGroupPostFilter algorithm; `plugin` is DefaultPreemption (its
    handle, PDB view, Filter check and quiet API writes). Victims already
    chosen are never chosen again and count as gone until the cache drops
    them, so a retry while their deletions are still landing does not pick
    more; the space they leave is held by their preemptor's nominated pods,
    which the workload cycle counts for every other group."""

    def __init__(self, plugin) -> None:
        self.plugin = plugin
        self.handle = plugin.handle
        self.going: dict[str, set[str]] = {}  # preemptor group -> its victims not yet gone
        #: preemptor group -> set once its victims are marked and deleted (upstream's executor
        #: `preempting` set: the preemption is running until then)
        self.actuating: dict[str, asyncio.Event] = {}
        self.unfit = ""  # the message of the last placement `_try` found infeasible

    def run(self, g: GroupPreemptor) -> tuple[dict[str, str] | None, Status]:
        """Chooses and evicts victims; each run is counted by its status, and
        a preemption's victims by pods and by units."""
        nominations, st, plan = self._run(g)
        victims = plan.victims if plan is not None else []
        self.handle.metrics.workload_preemption(st.code.name.title().replace("_", ""),
                                                sum(len(u.pods) for u in victims), len(victims), "podgroup")
        return nominations, st

    def _run(self, g: GroupPreemptor) -> tuple[dict[str, str] | None, Status, Plan | None]:
        spec = g.pg.get("spec") or {}
        if spec.get("preemptionPolicy") == "Never" or any(p.spec.get("preemptionPolicy") == "Never" for p in g.pods):
            return None, unschedulable(PREFIX + NEVER), None
        below = group_priority(g.pg)
        all_nodes = self.handle.snapshot.nodes
        for key in list(self.going):
            self.going[key] &= self.handle.cache.pod_nodes.keys()
            if not self.going[key]:
                del self.going[key]
        for key in [k for k, done in self.actuating.items() if done.is_set()]:
            del self.actuating[key]
        current = self._nominations(g)
        if self._ongoing(g, current.values(), below):
            # as upstream (kubernetes#140641): Success with the nominations as they are, so
            # the group waits for its victims instead of preempting more or losing its nodes
            return current, Status(Code.SUCCESS, [PREFIX + ONGOING]), None
        pdbs = self.plugin._pdbs(None)
        outcomes = [self._plan(g, nodes, all_nodes, below, pdbs) for nodes in g.domains]
        plans = [o for o in outcomes if isinstance(o, Plan)]
        if not plans:
            # as upstream: no lower-priority pod at all, else why the group does not fit without them
            why = next((o for o in outcomes if o), NO_VICTIMS)
            return None, unschedulable(PREFIX + why), None
        best = min(plans, key=Plan.cost)
        self.going.setdefault(g.key, set()).update(p.uid for u in best.victims for p in u.pods)
        g.evicted = self.actuating[g.key] = asyncio.Event()
        self.handle.spawn(self._actuate(g, best))
        victims = sum(len(u.pods) for u in best.victims)
        return best.nominations, Status(Code.SUCCESS, [
            f"{PREFIX}found a placement for podgroup, preempting {victims} victims"]), best

    @staticmethod
    def _nominations(g: GroupPreemptor) -> dict[str, str]:
        """The members' nominated nodes (pod uid -> node): their
        nominatedNodeName, or the nomination not yet written."""
        out = {i.uid: (i.pod.get("status") or {}).get("nominatedNodeName") for i in g.pods}
        out.update((uid, node) for uid, node in g.nominations.items() if uid in out)
        return {uid: node for uid, node in out.items() if node}

    def _ongoing(self, g: GroupPreemptor, nodes, below: int) -> bool:
        """Upstream's isOngoingPreemption: a node a member is nominated to
        holds a lower-priority pod terminating by preemption. Also while
        this scheduler is still marking and deleting the group's victims
        (upstream's executor keeps such a group out of its cycle); once that
        is done, only what the API shows counts, so a failed eviction does
        not hold the group back for ever."""
        if g.key in self.actuating:
            return True
        infos = self.handle.snapshot.infos
        for name in set(nodes):
            ni = infos.get(name)
            for p in (ni.pods.values() if ni is not None else ()):
                if terminating_by_preemption(p.pod):
                    key = group_key(p.pod)
                    pg = self.handle.podgroups.get(key) if key else None
                    if (group_priority(pg) if pg else p.priority) < below:
                        return True
        return False

    def _plan(self, g: GroupPreemptor, nodes: list[NodeInfo], all_nodes, below: int, pdbs) -> Plan | str:
        """Takes pods already on their way out off the domain and keeps the
        space other groups were promised (on copies of the nodes that
        changes); then tries candidate placements and keeps the one whose
        victims cost least. If the group fits with no new victim, that is the
        plan. Otherwise upstream's: every potential victim removed, the group
        placed, victims reprieved greedily. Where that leaves more than one
        victim, the placement it found is only one of many: the group is also
        placed with each single unit removed alone (cheapest first, while one
        could still cost less) and, if that does not do, with only the least
        important units removed (the fewest that let it fit, found by
        bisection, then reprieved). Without a plan, why: "" where no unit
        could be removed, else the group's failure with all of them removed."""
        chosen = set().union(*self.going.values())
        units = victim_units(nodes, all_nodes, below, g.key, self.handle.podgroups, chosen)
        base = _Nodes(nodes)
        for n in nodes:
            freed = [uid for uid, p in n.pods.items() if uid in chosen or (_terminating(p) and p.priority < below)]
            for uid in freed:
                base.own(n.name).remove_pod(uid)
        for info, node in g.held:
            if node in base.infos and info.uid not in base.infos[node].pods:
                base.own(node).add_pod(info)
        units.sort(key=Unit.importance)
        breaking = self._breaking(units, pdbs)
        free = self._try(g, base, [], breaking)
        if free is not None:  # the room earlier victims are leaving is enough
            return free
        best = self._try(g, base, units, breaking)
        if best is None:
            return self.unfit if units else ""
        if len(best.victims) <= 1:
            return best
        singles = sorted(units, key=lambda u: Plan([u], pdb_violations=int(id(u) in breaking)).cost())
        for u in singles[:MAX_SINGLE_CANDIDATES]:
            if Plan([u], pdb_violations=int(id(u) in breaking)).cost() >= best.cost():
                break
            plan = self._try(g, base, [u], breaking)
            if plan is not None:
                best = min(best, plan, key=Plan.cost)
                break
        if len(best.victims) > 1:
            lo, hi = 1, len(units)  # none removed failed above; all removed is upstream's plan
            while lo < hi:
                mid = (lo + hi) // 2
                plan = self._try(g, base, units[len(units) - mid:], breaking)
                if plan is None:
                    lo = mid + 1
                else:
                    hi = mid
                    best = min(best, plan, key=Plan.cost)
        return best

    def _try(self, g: GroupPreemptor, base: _Nodes, removed: list[Unit], breaking: set[int]) -> Plan | None:
        """One candidate: `removed` (most important first) taken off the
        domain, the group placed, then each unit reprieved (PDB-breaking
        ones first) while every preemptor pod still passes Filter where it
        was put. Works on its own copies of the nodes it changes, so `base`
        stays as it was; a reprieve only needs the nodes a preemptor pod
        was put on (Filter is checked nowhere else), so only they get
        reprieved pods back."""
        where = self.handle.cache.pod_nodes
        view = base.derive()
        off: dict[str, set[str]] = {}
        for u in removed:
            for p in u.pods:
                node = where.get(p.uid, "")
                if node in view.infos and p.uid in view.infos[node].pods:
                    off.setdefault(node, set()).add(p.uid)
        for node, uids in off.items():
            view.drop(node, uids)
        attempt = g.place(list(view.infos.values()))
        if not attempt.feasible:
            self.unfit = attempt.message
            return None
        placed = attempt.assigned
        for info, node, _ in placed:
            view.own(node).add_pod(info)
        hosts = {node for _, node, _ in placed}
        plan = Plan([], {info.uid: node for info, node, _ in placed})
        for pass_units in ([u for u in removed if id(u) in breaking], [u for u in removed if id(u) not in breaking]):
            for u in pass_units:
                if not self._reprieve(g.fwk, u, view.infos, hosts, placed):
                    plan.victims.append(u)
                    plan.pdb_violations += id(u) in breaking
        return plan

    def _breaking(self, units: list[Unit], pdbs) -> set[int]:
        """ids of the units with a pod whose eviction would break a PodDisruptionBudget."""
        if not pdbs:
            return set()
        violating, _ = self.plugin.split_by_pdb([p for u in units for p in u.pods], pdbs)
        bad = {p.uid for p in violating}
        return {id(u) for u in units if any(p.uid in bad for p in u.pods)}

    def _reprieve(self, fwk: Framework, unit: Unit, infos: dict[str, NodeInfo], hosts: set[str],
                  placed: list[tuple[PodInfo, str, CycleState]]) -> bool:
        """Puts the unit's pods back on the nodes holding preemptor pods; keeps
        them when every preemptor pod on a node the unit touches still passes
        Filter, else takes them out again."""
        where = self.handle.cache.pod_nodes
        back: list[tuple[NodeInfo, PodInfo]] = []
        touched = set()
        for p in unit.pods:
            node = where.get(p.uid, "")
            if node in infos:
                touched.add(node)
                if node in hosts:
                    infos[node].add_pod(p)
                    back.append((infos[node], p))
        for info, node, state in placed:
            if node not in touched:
                continue
            ni = infos[node]
            ni.remove_pod(info.uid)
            msg = self.plugin._fits(fwk, state, info, ni)
            ni.add_pod(info)
            if msg is not None:
                for ni2, p in back:
                    ni2.remove_pod(p.uid)
                return False
        return True

    async def _actuate(self, g: GroupPreemptor, plan: Plan) -> None:
        """Victim PodGroups and pods get DisruptionTarget, then the pods are
        deleted with a Preempted event naming the preemptor (as upstream,
        whose preemptor pods get only their FailedScheduling); then
        `g.evicted` lets the members' failure reports, with their
        nominations, go out. Victims are evicted concurrently, as upstream's
        parallel preemptPod: one at a time, each write would wait behind
        whatever scheduling cycle runs."""
        h = self.handle
        scheduler = g.fwk.profile.scheduler_name
        md = g.pg["metadata"]
        by = f"pod group {md.get('namespace', '')}/{md['name']}"
        preemptor = reference(g.pg, "PodGroup", "scheduling.k8s.io/v1beta1")

        async def unit(u: Unit) -> None:
            if u.group:
                await self.mark_group(u.group, scheduler)
            await asyncio.gather(*(self._evict(p, scheduler, f"Preempted by {by} ({md.get('uid', '')}) on node "
                                                             f"{h.cache.pod_nodes.get(p.uid, '')}", preemptor)
                                   for p in u.pods))

        try:
            await asyncio.gather(*(unit(u) for u in plan.victims))
        finally:
            g.evicted.set()

    async def _evict(self, p: PodInfo, scheduler: str, note: str, preemptor: dict) -> None:
        h = self.handle
        md = p.pod["metadata"]
        old = find_condition((p.pod.get("status") or {}).get("conditions"), DISRUPTION_TARGET)
        cond = {"type": DISRUPTION_TARGET, **observed_generation(p.pod), "status": "True", "reason": REASON,
                "message": f"{scheduler}: preempting to accommodate a higher priority pod group",
                "lastTransitionTime": transition_time(old, "True", h.clock.rfc3339())}
        await self.plugin._quiet(h.api.pods.patch(md["name"], {"status": {"conditions": [cond]}},
                                                  "application/strategic-merge-patch+json",
                                                  namespace=md.get("namespace"), subresource="status",
                                                  field_manager=SCHEDULER_FIELD_MANAGER))
        await self.plugin._quiet(h.api.pods.delete(md["name"], md.get("namespace"),
                                                   preconditions={"uid": md.get("uid")}))
        await self.plugin._quiet(h.api.event(p.pod, "Normal", "Preempted", note, related=preemptor))

    async def mark_group(self, key: str, scheduler: str, preemptor: str = "pod group") -> None:
        """DisruptionTarget=True on a victim PodGroup, other conditions kept
        (`preemptor`: what the message says took its place)."""
        h = self.handle
        pg = h.podgroups.get(key)
        if pg is None:
            return
        md = pg["metadata"]
        conds = remove_condition((pg.get("status") or {}).get("conditions"), DISRUPTION_TARGET)
        cond = {"type": DISRUPTION_TARGET, "status": "True", "reason": REASON,
                "message": f"{scheduler}: preempting to accommodate a higher priority {preemptor}",
                "lastTransitionTime": h.clock.rfc3339()}
        if md.get("generation"):
            cond["observedGeneration"] = md["generation"]
        await self.plugin._quiet(h.podgroup_client.patch(md["name"], {"status": {"conditions": conds + [cond]}},
                                                         "application/merge-patch+json", namespace=md.get("namespace"),
                                                         subresource="status", field_manager=SCHEDULER_FIELD_MANAGER))
