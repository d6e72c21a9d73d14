"""CapacityScheduling: team quotas with borrowing and reclaim (ElasticQuota), as scheduler-plugins.

Each namespace may have an ElasticQuota (``scheduling.x-k8s.io/v1alpha1``): ``spec.min`` is what
its pods are guaranteed, ``spec.max`` what they may never exceed. Between the two a namespace
borrows what the other quotas' ``min`` leaves unused. Arithmetic: ``elasticquota``.

* Usage (``Usage``): the requests of every pod on a node and not terminated - bound by anyone, or
  assumed here (Reserve adds, Unreserve takes back) - per namespace. A pod a preemption chose as
  a victim is no longer charged (nor chosen again) while it terminates: each preemption then
  takes only what it needs (upstream charges it until it is gone, so preemptors arriving together
  may each take the same capacity again).
* PreFilter, for a pod whose namespace has a quota (others: no check), counting nominated pods as
  upstream (same quota and at least its priority; another quota's while that quota is within its
  min), rejects it (Unschedulable, so preemption runs):
  ``Pod ns/p is rejected in PreFilter because ElasticQuota ns is more than Max`` when its quota's
  use would pass ``max``, and ``Pod ns/p is rejected in PreFilter because total ElasticQuota used is
  more than min`` when every quota's use together would pass every quota's ``min`` together.
* PostFilter preempts, on one node, upstream's victims: a pod whose quota stays within its
  ``min`` reclaims from quotas over their ``min`` - any priority, least important first, only as
  long as that quota stays over its ``min`` - and never from its own; a pod whose quota would be
  over its ``min`` may only evict lower-priority pods of its own quota; pods of namespaces without a
  quota only evict each other, by priority. Every node that failed as Unschedulable is tried (no
  sampling); victims are reprieved (most important first, PDB-protected ones first) while the pod
  still fits and its quota rules still hold. The node is chosen as DefaultPreemption chooses.
* PodGroupPostFilter (the pod-group cycle): the same rules for a whole group, with the group's
  whole request - a gang reclaims only while all of it keeps its quota within ``min``, which is
  what keeps two teams from reclaiming from each other in a loop (``group_reclaim``).
* Several quotas in one namespace: the oldest applies (upstream keeps whichever it saw first).

A quota governs the resources it names: one naming only GPUs leaves cpu and memory alone, and the
total-min rule covers the resources some quota's ``min`` names. ``schedulerPluginsCompatible:
true`` gives upstream's arithmetic instead: cpu, memory and ephemeral-storage are always compared,
so a ``min`` that does not name memory makes every pod requesting memory count as over it, and a
present ``max`` that does not name it refuses such pods (``elasticquota``).

Reads: ElasticQuotas from the object store; pods from the engine's pod events (``PodWatcher``).
Metrics (``Handle.metrics``): ``pysched_quota_used``/``_min``/``_max`` per quota and resource,
``pysched_quota_preemption_victims_total``.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pysched.framework import (
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    Handle,
    NodeBatch,
    NodeInfo,
    PodInfo,
    PodWatcher,
    PostFilterPlugin,
    PostFilterResult,
    PreFilterPlugin,
    PreFilterResult,
    QuotaStatusSource,
    ReservePlugin,
    Status,
)
from pysched.framework.api import format_resource
from pysched.framework.podgroup_preemption import Feasibility, PodGroupEvaluator, PodGroupPostFilterResult
from pysched.framework.podgroups import WorkloadPodGroup
from pysched.framework.preemption import PDB, Evaluator, importance, split_by_pdb
from pysched.framework.status import Diagnosis
from pysched.plugins.capacity_scheduling.elasticquota import (
    UNLIMITED,
    QuotaSpec,
    Usage,
    UsageOverlay,
    add_into,
    countable_requests,
    exceeds,
    exceeds_named,
)
from pysched.plugins.capacity_scheduling.group_reclaim import GroupReclaim

_Overlay = UsageOverlay

log = logging.getLogger("pysched.plugins.capacity_scheduling")

NAME = "CapacityScheduling"
ELASTICQUOTAS = "elasticquotas"
STATE_KEY = "PreFilterCapacityScheduling"
TERMINATING = "not eligible due to a terminating pod on the nominated node."


@dataclass
class CapacitySchedulingArgs:
    KIND: ClassVar[str] = "CapacitySchedulingArgs"
    # scheduler-plugins' reading of a partial spec.max: cpu, memory, ephemeral-storage unnamed = 0.
    scheduler_plugins_compatible: bool = False


@dataclass
class PreFilterState:
    """What PreFilter computed for the pod (upstream's ``PreFilterState``)."""
    pod_req: dict[str, int]
    in_quota_with_pod: dict[str, int]    # + nominated pods of its quota with at least its priority
    with_pod: dict[str, int]             # + those and other quotas' nominated pods within their min
    quota: QuotaSpec | None


class CapacityScheduling(PreFilterPlugin[CapacitySchedulingArgs], PostFilterPlugin[CapacitySchedulingArgs],
                         ReservePlugin[CapacitySchedulingArgs], EnqueueExtensions, PodWatcher, QuotaStatusSource):
    name = NAME
    object_kinds = (ELASTICQUOTAS,)
    args: CapacitySchedulingArgs
    # Its verdict is re-judged by ``select_victims`` on the dry run's own usage, as upstream (whose
    # dry runs never run PreFilter again): a PreFilter re-run during a dry run passes.
    pre_filter_reads_other_pods = False

    def __init__(self, args: CapacitySchedulingArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)
        self.usage = Usage()
        self.evaluator = Evaluator(NAME, handle, self)
        self._quotas: dict[str, QuotaSpec] = {}
        self._quotas_version = -1
        self._parsed: dict[str, tuple[Any, QuotaSpec]] = {}   # key -> (generation, parsed): status writes skip it
        self._min_names: frozenset[str] = frozenset()          # resources some quota's min names
        self._counted: set[str] = set()                        # victims already counted in the metric
        self.rng = random.Random()
        self._state: CycleState | None = None
        self._dry_run = False
        self._group: GroupReclaim | None = None                # a pod group's reclaim under way
        # Called with a namespace whose usage changed (``watch_usage``: the ElasticQuota status controller's queue).
        self.on_usage_change: Callable[[str], None] | None = None
        self.handle.metrics.export_quotas(self)

    # -- quotas and usage ------------------------------------------------------------------------

    def quotas(self) -> dict[str, QuotaSpec]:
        """namespace -> the quota that applies there (the oldest when there are several)."""
        objects = self.handle.objects
        if objects is None:
            return {}
        version = objects.kind_version(ELASTICQUOTAS)
        if version != self._quotas_version:
            by_ns: dict[str, QuotaSpec] = {}
            parsed: dict[str, tuple[Any, QuotaSpec]] = {}
            compat = self.args.scheduler_plugins_compatible
            for obj in objects.list(ELASTICQUOTAS):
                meta = obj.get("metadata") or {}
                key = f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"
                generation = meta.get("generation") or meta.get("resourceVersion")
                cached = self._parsed.get(key)
                if cached is not None and cached[0] == generation and generation is not None:
                    q = cached[1]
                else:
                    q = QuotaSpec.from_dict(obj, scheduler_plugins_compatible=compat)
                    for problem in q.problems:
                        log.warning("elasticquota quantity ignored", extra={"elasticquota": key, "problem": problem})
                parsed[key] = (generation, q)
                old = by_ns.get(q.namespace)
                if old is None or (q.created, q.name) < (old.created, old.name):
                    by_ns[q.namespace] = q
            self._quotas, self._quotas_version, self._parsed = by_ns, version, parsed
            self._min_names = frozenset(r for q in by_ns.values() for r in q.min)
        return self._quotas

    def quota_of(self, namespace: str) -> QuotaSpec | None:
        return self.quotas().get(namespace)

    # -- QuotaStatusSource: what the ElasticQuota status controller publishes --------------------

    def bound_used(self, namespace: str) -> dict[str, int]:
        return dict(self.usage.bound_used.get(namespace) or {})

    def watch_usage(self, callback: Callable[[str], None]) -> None:
        self.on_usage_change = callback

    def _changed(self, namespace: str) -> None:
        if namespace and self.on_usage_change is not None:
            self.on_usage_change(namespace)

    def pod_seen(self, pod: PodInfo) -> None:
        if pod.node_name and self.usage.add(pod.uid, pod.namespace, pod.requests, True):
            self._changed(pod.namespace)

    def pod_gone(self, uid: str) -> None:
        self._changed(self.usage.remove(uid))

    # The three comparisons. scheduler-plugins' arithmetic (``exceeds``) with
    # schedulerPluginsCompatible; otherwise a quota governs what quotas name: ``max`` the resources
    # it names, ``min`` the resources any quota's min names (0 where this one does not), and the
    # total-min rule those of them the pod requests.

    def over_max(self, x1: dict[str, int], x2: dict[str, int], q: QuotaSpec) -> bool:
        if self.args.scheduler_plugins_compatible:
            return exceeds(x1, x2, q.max, UNLIMITED)
        return exceeds_named(x1, x2, q.max)

    def over_min(self, x1: dict[str, int], x2: dict[str, int], q: QuotaSpec) -> bool:
        if self.args.scheduler_plugins_compatible:
            return exceeds(x1, x2, q.min, 0)
        lo = q.min
        return any(x1.get(r, 0) + x2.get(r, 0) > lo.get(r, 0) for r in self._min_names)

    def aggregate_exceeds(self, extra: dict[str, int], used_of: Callable[[str], dict[str, int]],
                          req: dict[str, int]) -> bool:
        """Every quota's use together, plus ``extra``, over every quota's min together? (``req``:
        the pod's requests - pysched compares only the governed resources the pod asks for.)"""
        quotas = self.quotas()
        if self.args.scheduler_plugins_compatible:
            used: dict[str, int] = dict(extra)
            lo: dict[str, int] = {}
            for ns, q in quotas.items():
                add_into(used, used_of(ns))
                add_into(lo, q.min)
            return exceeds(used, {}, lo, 0)
        for r in self._min_names:
            if not req.get(r):
                continue
            total = extra.get(r, 0)
            bound = 0
            for ns, q in quotas.items():
                total += used_of(ns).get(r, 0)
                bound += q.min.get(r, 0)
            if total > bound:
                return True
        return False

    # -- PreFilter -------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        req = countable_requests(pod.requests)
        quotas = self.quotas()
        if self.usage.leaving:
            doomed = self.evaluator.doomed_victims
            for uid in [u for u in self.usage.leaving if u not in doomed]:
                self.usage.unmark_leaving(uid)    # its deletion failed: it stays, and is charged again
        q = quotas.get(pod.namespace)
        if q is None or self._dry_run:
            state.write(STATE_KEY, PreFilterState(req, req, req, None))
            return None, None
        in_quota, with_pod = dict(req), dict(req)
        extra_in, extra_with = self.nominated_beside(pod.namespace, pod.priority, {pod.uid})
        add_into(in_quota, extra_in)
        add_into(with_pod, extra_with)
        state.write(STATE_KEY, PreFilterState(req, in_quota, with_pod, q))
        if state.explaining():
            self._explain(state, q, in_quota, with_pod)
        if self.over_max(in_quota, self.used_of(pod.namespace), q):
            return None, Status(Code.UNSCHEDULABLE, f"Pod {pod.namespace}/{pod.name} is rejected in PreFilter "
                                                    f"because ElasticQuota {q.namespace} is more than Max")
        if self.aggregate_exceeds(with_pod, self.used_of, req):
            return None, Status(Code.UNSCHEDULABLE, f"Pod {pod.namespace}/{pod.name} is rejected in PreFilter "
                                                    "because total ElasticQuota used is more than min")
        return None, None

    def used_of(self, namespace: str) -> dict[str, int]:
        """What ``namespace`` holds as PreFilter counts it: during a pod group's reclaim, with the
        victims gone (``GroupReclaim.usage``)."""
        group = self._group
        return group.usage.of(namespace) if group is not None else self.usage.of(namespace)

    def nominated_beside(self, namespace: str, priority: int,
                         skip: set[str]) -> tuple[dict[str, int], dict[str, int]]:
        """The nominated pods a pod (or group: ``skip``, its own) of ``namespace`` counts, as upstream:
        those of its quota with at least its priority (against its max and the total min), and
        those of another quota while that quota is within its min (against the total min only). A
        pod already counted in the usage (assumed or bound) is not counted again."""
        in_quota: dict[str, int] = {}
        with_pod: dict[str, int] = {}
        nom = self.handle.nominator
        if not nom:
            return in_quota, with_pod
        quotas = self.quotas()
        counted = self.usage.pods
        for node in nom.node_names():
            for p in nom.pods_for_node(node):
                if p.uid in skip or p.uid in counted:
                    continue
                pq = quotas.get(p.namespace)
                if pq is None:
                    continue
                preq = countable_requests(p.requests)
                if p.namespace == namespace:
                    if p.priority >= priority:
                        add_into(in_quota, preq)
                        add_into(with_pod, preq)
                elif not self.over_min(self.used_of(p.namespace), {}, pq):
                    add_into(with_pod, preq)
        return in_quota, with_pod

    def _explain(self, state: CycleState, q: QuotaSpec, in_quota: dict[str, int], with_pod: dict[str, int]) -> None:
        """The explanation names the quota and what it holds (simulate --explain, /debug/explain)."""
        used = self.usage.of(q.namespace)
        names = set(q.min) | {r for r, v in q.max.items() if v != UNLIMITED}
        if self.args.scheduler_plugins_compatible:
            names |= set(in_quota)       # upstream compares what the pod requests, named or not

        def amount(r: str, v: int) -> str:
            return "unlimited" if v == UNLIMITED else format_resource(r, v)
        quota = "; ".join(f"{r}: used {amount(r, used.get(r, 0))} + this pod {amount(r, in_quota.get(r, 0))}, "
                          f"min {amount(r, q.min.get(r, 0))}, max {amount(r, q.max.get(r, UNLIMITED))}"
                          for r in sorted(names))
        total_used: dict[str, int] = dict(with_pod)
        total_min: dict[str, int] = {}
        for ns, other in self.quotas().items():
            add_into(total_used, self.usage.of(ns))
            add_into(total_min, other.min)
        total = "; ".join(f"{r}: {amount(r, total_used.get(r, 0))} of the mins' {amount(r, v)}"
                          for r, v in sorted(total_min.items()))
        state.explain(self.name, {f"ElasticQuota {q.key}": quota or "names no resource",
                                  "all quotas, with this pod": total or "no quota names a min"})

    # -- Reserve ---------------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        if self.usage.add(pod.uid, pod.namespace, pod.requests, False):
            self._changed(pod.namespace)
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        counted = self.usage.pods.get(pod.uid)
        if counted is not None and not counted[2]:
            self.usage.remove(pod.uid)
            self._changed(pod.namespace)

    # -- PostFilter (preemption) -----------------------------------------------------------------

    def post_filter(self, state: CycleState, pod: PodInfo,
                    diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status | None]:
        self._state = state
        try:
            result, st = self.evaluator.preempt(state, pod, diagnosis)
        finally:
            self._state = None
        self._count_victims(pod, result, st)
        return result, st

    async def post_filter_async(self, state: CycleState, pod: PodInfo,
                                diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status | None]:
        """PostFilter when extenders may take part (``preemptVerb``)."""
        self._state = state
        try:
            result, st = await self.evaluator.preempt_async(state, pod, diagnosis)
        finally:
            self._state = None
        self._count_victims(pod, result, st)
        return result, st

    def pod_group_post_filter(self, pg: WorkloadPodGroup, pg_uid: str, members: Sequence[PodInfo],
                              feasibility: Feasibility) -> tuple[PodGroupPostFilterResult | None, Status]:
        """PodGroupPostFilter: reclaim (or, over its min, preemption inside its own quota) for a
        whole pod group the pod-group cycle could not place (``group_reclaim``); the message is
        prefixed ``pod group preemption: `` as DefaultPreemption's."""
        def rules(ev: Evaluator, group: WorkloadPodGroup, pods: Sequence[PodInfo]) -> GroupReclaim:
            self._group = GroupReclaim(self, ev, group, pods)
            return self._group

        try:
            result, st = PodGroupEvaluator(self.evaluator, rules).preempt(pg, pg_uid, members, feasibility)
        finally:
            self._group = None
        if st.is_success() and result is not None and result.victims:
            self._count_group_victims(members[0].namespace if members else pg.namespace, set(result.victims))
        msg = st.message()
        return result, (Status(st.code, "pod group preemption: " + msg) if msg else st)

    def _count_group_victims(self, namespace: str, keys: set[str]) -> None:
        """``_count_victims`` for a pod group's victims, wherever they run."""
        doomed = self.evaluator.doomed_victims
        quotas = self.quotas()
        for victim in self.handle.snapshot.pods.values():
            if victim.key not in keys or victim.uid in self._counted or victim.uid not in doomed:
                continue
            self._counted.add(victim.uid)
            if self.usage.mark_leaving(victim.uid):
                self._changed(victim.namespace)
            q = quotas.get(victim.namespace)
            if q is not None:
                self.handle.metrics.quota_victim(q.key, "reclaim" if victim.namespace != namespace else "priority")

    def _count_victims(self, pod: PodInfo, result: PostFilterResult | None, st: Status) -> None:
        """Count the victims this preemption sent away (once each: a later preemption may choose a
        victim still terminating)."""
        if not st.is_success() or result is None or not result.nominated_node_name:
            return
        info = self.handle.snapshot.nodes.get(result.nominated_node_name)
        if info is None:
            return
        doomed = self.evaluator.doomed_victims
        keys = set(result.victims)
        quotas = self.quotas()
        counted = self._counted
        for victim in info.pods.values():
            if victim.key not in keys or victim.uid in counted or victim.uid not in doomed:
                continue
            counted.add(victim.uid)
            if self.usage.mark_leaving(victim.uid):
                self._changed(victim.namespace)
            q = quotas.get(victim.namespace)
            if q is not None:
                self.handle.metrics.quota_victim(q.key, "reclaim" if victim.namespace != pod.namespace else "priority")
        if len(counted) > 10_000:
            still = self.handle.snapshot.pods
            self._counted = {u for u in counted if u in still}

    def is_running_preemption(self, uid: str) -> bool:
        return self.evaluator.is_running_preemption(uid)

    # preemption.PreemptionPolicy

    def offset_and_count(self, num_nodes: int) -> tuple[int, int]:
        """scheduler-plugins tries every node that failed as Unschedulable; pysched, unless
        compatible, as many as DefaultPreemption does (10 %, at least 100) from a random node: a
        reclaim dry-runs each node on the event loop, and upstream's parallel Go does not."""
        if self.args.scheduler_plugins_compatible or num_nodes <= 100:
            return 0, num_nodes
        return self.rng.randrange(num_nodes), min(max(num_nodes // 10, 100), num_nodes)

    def victims_need_lower_priority(self, state: CycleState, pod: PodInfo) -> bool:
        """Whether every victim has a lower priority than ``pod`` (the evaluator then skips the dry
        runs when no pod anywhere does): all but a reclaim, which takes from other quotas whatever
        their priority."""
        pfs = state.get(STATE_KEY)
        q = pfs.quota if isinstance(pfs, PreFilterState) else None
        return q is None or self.over_min(pfs.in_quota_with_pod, self.usage.of(pod.namespace), q)

    def pod_eligible(self, pod: PodInfo, nominated_node_status: Status | None) -> tuple[bool, str]:
        if pod.preemption_policy == "Never":
            return False, "not eligible due to preemptionPolicy=Never."
        fwk = self.handle.framework
        if fwk is not None:
            blocked = fwk.preemption_blocked(pod)
            if blocked:
                return False, blocked
        pfs = self._state.get(STATE_KEY) if self._state is not None else None
        if not isinstance(pfs, PreFilterState):
            return False, "not eligible due to failed to read from cycleState"
        nom = self.handle.nominator
        nominated = pod.nominated_node or (nom.nominated_node(pod.uid) if nom else "")
        if not nominated:
            return True, ""
        if nominated_node_status is not None and nominated_node_status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return True, ""
        info = self.handle.snapshot.nodes.get(nominated)
        if info is None:
            return True, ""
        quotas = self.quotas()
        q = pfs.quota
        over_min = q is not None and self.over_min(pfs.in_quota_with_pod, self.usage.of(pod.namespace), q)
        for p in info.pods.values():
            if not (p.deleting or self.evaluator.terminating(p)):
                continue
            pq = quotas.get(p.namespace)
            if q is not None:
                if pq is None:
                    continue
                if p.namespace == pod.namespace and p.priority < pod.priority:
                    return False, TERMINATING
                if (p.namespace != pod.namespace and not over_min
                        and self.over_min(self.usage.of(p.namespace), {}, pq)):
                    return False, TERMINATING
            elif pq is None and p.priority < pod.priority:
                return False, TERMINATING
        return True, ""

    @staticmethod
    def no_victims_status(pod: PodInfo, node_name: str) -> Status:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"No victims found on node {node_name} for preemptor "
                                                           f"pod {pod.name}")

    def select_victims(self, state: CycleState, pod: PodInfo, node: NodeInfo,
                       pdbs: Sequence[PDB]) -> tuple[list[PodInfo], int, Status | None]:
        """Upstream's ``SelectVictimsOnNode`` (see the module docstring)."""
        pfs = state.get(STATE_KEY)
        if not isinstance(pfs, PreFilterState):
            return [], 0, Status(Code.UNSCHEDULABLE, "Failed to read preFilterState from cycleState")
        fwk = self.handle.framework
        assert fwk is not None
        quotas = self.quotas()
        q = pfs.quota
        usage = _Overlay(self.usage)
        moves = self.handle.snapshot.what_if()
        potential: list[PodInfo] = []
        ns = pod.namespace
        node_name = node.name
        self._dry_run = True
        try:
            leaving = self.usage.leaving      # already chosen by a preemption: going anyway
            least_first = sorted((p for p in node.pods.values() if p.uid not in leaving), key=importance,
                                 reverse=True)
            if q is not None:
                over_min = self.over_min(pfs.in_quota_with_pod, usage.of(ns), q)
                for p in least_first:
                    pq = quotas.get(p.namespace)
                    if pq is None:
                        continue
                    if over_min:
                        eligible = p.namespace == ns and p.priority < pod.priority
                    else:
                        eligible = p.namespace != ns and self.over_min(usage.of(p.namespace), {}, pq)
                    if eligible:
                        potential.append(p)
                        moves.remove(p)
                        usage.remove(p)
            else:
                for p in least_first:
                    if p.namespace not in quotas and p.priority < pod.priority:
                        potential.append(p)
                        moves.remove(p)
                        usage.remove(p)
            if not potential:
                return [], 0, self.no_victims_status(pod, node_name)
            st = fwk.filter_with_nominated(state, pod, node_name, simulated=True)
            if st is not None:
                return [], 0, st
            if q is not None and (self.over_max(pfs.pod_req, usage.of(ns), q)
                                  or self.aggregate_exceeds(pfs.pod_req, usage.of, pfs.pod_req)):
                return [], 0, Status(Code.UNSCHEDULABLE, "global quota max exceeded")

            def quota_broken() -> bool:
                return q is not None and (self.over_max(pfs.in_quota_with_pod, usage.of(ns), q)
                                          or self.aggregate_exceeds(pfs.with_pod, usage.of, pfs.pod_req))

            potential.sort(key=importance)
            violating, non_violating = split_by_pdb(potential, pdbs)
            victims: list[PodInfo] = []
            num_violating = 0
            for group, counts in ((violating, True), (non_violating, False)):
                for p in group:
                    moves.add(p)
                    usage.add(p)
                    st = fwk.filter_with_nominated(state, pod, node_name, simulated=True)
                    if st is not None and st.code == Code.ERROR:
                        return [], 0, st
                    if st is None and not quota_broken():
                        continue
                    moves.remove(p)
                    usage.remove(p)
                    victims.append(p)
                    if counts and st is not None:
                        num_violating += 1
        finally:
            moves.restore()
            self._dry_run = False
        if violating and non_violating:
            victims.sort(key=importance)
        return victims, num_violating, None

    # -- requeueing ------------------------------------------------------------------------------

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        # As upstream: any pod deletion (or termination) and any change of an ElasticQuota's spec.
        def spec_changed(pod: PodInfo, old: Any, new: Any) -> bool:
            # status.used writes (ours, or another controller's) change nothing a pod waits for
            return bool((old or {}).get("spec") != (new or {}).get("spec"))

        return (ClusterEventWithHint(ClusterEvent("Pod", "Delete")),
                ClusterEventWithHint(ClusterEvent("ElasticQuota", "Add")),
                ClusterEventWithHint(ClusterEvent("ElasticQuota", "Update"), spec_changed),
                ClusterEventWithHint(ClusterEvent("ElasticQuota", "Delete")))
