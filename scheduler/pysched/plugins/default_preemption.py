"""DefaultPreemption (PostFilter): evict lower-priority pods so that a pod no node fits can run.

kube-scheduler 1.35's ``defaultpreemption`` plugin on our ``framework.preemption.Evaluator``:

* eligibility: ``preemptionPolicy: Never`` never preempts ("not eligible due to
  preemptionPolicy=Never."); a pod already nominated to a node where a lower-priority victim is
  terminating because of a preemption waits for it ("not eligible due to a terminating pod on the
  nominated node."), unless that node became UnschedulableAndUnresolvable;
* candidates: ``minCandidateNodesPercentage`` (default 10) of the nodes whose filter status was
  Unschedulable, at least ``minCandidateNodesAbsolute`` (default 100), from a random offset;
* victims on a node: every pod of lower priority is removed; if the pod then passes the filters
  (nominated pods counted, as in the scheduling cycle), victims are reprieved one by one - those
  whose eviction would violate a PodDisruptionBudget first, then the others, each group most
  important first - as long as the pod still fits.

Messages are upstream's, prefixed ``preemption: `` (they end the FailedScheduling message).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pysched.framework import (
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EnqueueExtensions,
    Handle,
    NodeInfo,
    PodInfo,
    PostFilterPlugin,
    PostFilterResult,
    Status,
    arg,
)
from pysched.framework.api import ConfigError
from pysched.framework.preemption import NO_VICTIMS, PDB, Evaluator, importance, split_by_pdb
from pysched.framework.status import Code
from pysched.framework.types import Diagnosis

NAME = "DefaultPreemption"
# Shared by every node without lower-priority pods (read-only: only counted into the message).
_NO_VICTIMS = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NO_VICTIMS)


@dataclass
class DefaultPreemptionArgs:
    KIND: ClassVar[str] = "DefaultPreemptionArgs"
    min_candidate_nodes_percentage: int = field(default=10, metadata=arg(bits=32))
    min_candidate_nodes_absolute: int = field(default=100, metadata=arg(bits=32))

    def validate(self, path: str) -> None:
        """``ValidateDefaultPreemptionArgs``: upstream's field paths and messages."""
        pct, absolute = self.min_candidate_nodes_percentage, self.min_candidate_nodes_absolute
        pct_path, abs_path = f"{path}.minCandidateNodesPercentage", f"{path}.minCandidateNodesAbsolute"
        errs = []
        if pct < 0 or pct > 100:
            errs.append(f"{pct_path}: Invalid value: {pct}: not in valid range [0, 100]")
        if absolute < 0:
            errs.append(f"{abs_path}: Invalid value: {absolute}: not in valid range [0, inf)")
        if pct == 0 and absolute == 0:
            errs.append(f"{pct_path}: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute")
            errs.append(f"{abs_path}: Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage")
        if len(errs) == 1:
            raise ConfigError(errs[0])
        if errs:
            raise ConfigError(f"[{', '.join(errs)}]")


class DefaultPreemption(PostFilterPlugin, EnqueueExtensions):
    name = NAME
    Args = DefaultPreemptionArgs
    args: DefaultPreemptionArgs

    def __init__(self, args: DefaultPreemptionArgs | None, handle: Handle) -> None:
        super().__init__(args or DefaultPreemptionArgs(), handle)
        self.rng = random.Random()
        self.evaluator = Evaluator(NAME, handle, self)

    # -- PostFilter -------------------------------------------------------------------------------

    def post_filter(self, state: CycleState, pod: PodInfo,
                    diagnosis: Any) -> tuple[PostFilterResult | None, Status | None]:
        return self._prefixed(*self.evaluator.preempt(state, pod, diagnosis))

    async def post_filter_async(self, state: CycleState, pod: PodInfo,
                                diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status | None]:
        """PostFilter when extenders may take part (``preemptVerb``)."""
        return self._prefixed(*await self.evaluator.preempt_async(state, pod, diagnosis))

    @staticmethod
    def _prefixed(result: PostFilterResult | None, st: Status) -> tuple[PostFilterResult | None, Status | None]:
        msg = st.message()
        if msg:
            return result, Status(st.code, "preemption: " + msg)
        return result, st

    def is_running_preemption(self, uid: str) -> bool:
        """The pod's preemption is still under way: the queue holds it back from activeQ."""
        return self.evaluator.is_running_preemption(uid)

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        # Upstream registers pod deletions with a hint that always skips: the plugins that
        # rejected the pod decide when it is worth retrying.
        return (ClusterEventWithHint(ClusterEvent("Pod", "Delete"), lambda pod, old, new: False),)

    # -- preemption.PreemptionPolicy --------------------------------------------------------------

    def num_candidates(self, num_nodes: int) -> int:
        """``calculateNumCandidates``."""
        n = num_nodes * self.args.min_candidate_nodes_percentage // 100
        n = max(n, self.args.min_candidate_nodes_absolute)
        return min(n, num_nodes)

    def offset_and_count(self, num_nodes: int) -> tuple[int, int]:
        return (self.rng.randrange(num_nodes) if num_nodes > 0 else 0), self.num_candidates(num_nodes)

    def pod_eligible(self, pod: PodInfo, nominated_node_status: Status | None) -> tuple[bool, str]:
        """``PodEligibleToPreemptOthers``."""
        if pod.preemption_policy == "Never":
            return False, "not eligible due to preemptionPolicy=Never."
        gates = self.handle.framework
        if gates is not None:
            blocked = gates.preemption_blocked(pod)
            if blocked:
                return False, blocked
        nominated = pod.nominated_node
        if nominated:
            if nominated_node_status is not None and nominated_node_status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""
            info = self.handle.snapshot.nodes.get(nominated)
            if info is not None:
                for p in info.pods.values():
                    if p.priority < pod.priority and p.deleting and p.preempted_by_scheduler:
                        return False, "not eligible due to a terminating pod on the nominated node."
        return True, ""

    def select_victims(self, state: CycleState, pod: PodInfo, node: NodeInfo,
                       pdbs: Sequence[PDB]) -> tuple[list[PodInfo], int, Status | None]:
        """``SelectVictimsOnNode``: the fewest lower-priority pods to evict from ``node`` so that
        ``pod`` passes the filters, and how many of them a PDB protects."""
        prio = pod.priority
        potential = [p for p in node.pods.values() if p.priority < prio]
        if not potential:
            return [], 0, _NO_VICTIMS
        fwk = self.handle.framework
        assert fwk is not None
        node_name = node.name
        moves = self.handle.snapshot.what_if()
        try:
            for p in potential:
                moves.remove(p)
            st = fwk.filter_with_nominated(state, pod, node_name, simulated=True)
            if st is not None:
                return [], 0, st
            potential.sort(key=importance)
            violating, non_violating = split_by_pdb(potential, pdbs)
            victims: list[PodInfo] = []
            num_violating = 0
            for group, counts in ((violating, True), (non_violating, False)):
                for p in group:
                    moves.add(p)
                    st = fwk.filter_with_nominated(state, pod, node_name, simulated=True)
                    if st is None:
                        continue
                    if st.code == Code.ERROR:
                        return [], 0, st
                    moves.remove(p)
                    victims.append(p)
                    if counts:
                        num_violating += 1
        finally:
            moves.restore()
        if violating and non_violating:
            victims.sort(key=importance)
        return victims, num_violating, None
