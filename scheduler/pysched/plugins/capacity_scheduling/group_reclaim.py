"""CapacityScheduling's reclaim for a whole pod group (its PodGroupPostFilter), and the rule that
keeps two teams from reclaiming from each other back and forth.

The pod-group cycle places a gang from one snapshot; when it does not fit, CapacityScheduling's
victims are chosen for the group as a whole, on ``framework.podgroup_preemption``'s steps (every
possible victim off the snapshot, the group's own placement run again, victims reprieved most
important first, a gang never left below its minimum: ``gang_victims``):

* **the group's request is all its members'**: its quota is *within its min* only when its use, plus
  every member the cycle tries to place (and the nominated pods of the quota of at least the
  group's priority), stays within ``min``;
* within its min, the group reclaims from the other quotas: any priority, least important first,
  each victim (a whole gang when it must go whole) only while its quota is over its min with that
  victim still counted; over its min, it may only take lower-priority pods of its own quota; a
  group whose namespace has no quota only takes lower-priority pods of namespaces without one;
* the placement run with the victims gone and each reprieve see the quotas as they would be
  (``UsageOverlay``): PreFilter's max and total-min rules judge the members, and a reprieve is
  kept only while the members still fit on their nodes *and* the quota rules still hold.

**Never a loop between two teams.** A reclaim leaves the reclaiming quota within its min (its whole
request counted), so nothing can be reclaimed from it until it borrows again; the quota it took
from was over its min with each victim counted, so the victims' workload, submitted again, is over
its min and cannot reclaim back. Judging a gang by one member's request breaks the first half:
two teams each running a 1-CPU pod and a gang of 4 x 1 CPU, with mins of 4 on 8 CPU, each see
``1 + 1 <= 4`` and take the other's whole gang, forever (``tests/unit/test_quota_group_reclaim.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pysched.framework.gang_victims import RANK_PODGROUP, GangIndex, Victim, more_important
from pysched.framework.podgroup_preemption import GroupVictimRules
from pysched.framework.podgroups import WorkloadPodGroup
from pysched.framework.podinfo import PodInfo
from pysched.framework.preemption import Evaluator
from pysched.plugins.capacity_scheduling.elasticquota import UsageOverlay, add_into, countable_requests

if TYPE_CHECKING:
    from pysched.plugins.capacity_scheduling.capacity_scheduling import CapacityScheduling

ANY_PRIORITY = 2**63 - 1      # a reclaim's victims in other quotas may have any priority


def group_request(members: Sequence[PodInfo]) -> dict[str, int]:
    """What a group asks its quota for: every member's requests together."""
    total: dict[str, int] = {}
    for p in members:
        add_into(total, countable_requests(p.requests))
    return total


class GroupReclaim(GroupVictimRules):
    """CapacityScheduling's victims for a pod group (module docstring). While it is in use the
    plugin's PreFilter reads ``usage``, so the group's placement run sees the victims gone."""

    def __init__(self, plugin: CapacityScheduling, evaluator: Evaluator, pg: WorkloadPodGroup,
                 members: Sequence[PodInfo]):
        super().__init__(evaluator, pg, members)
        self.plugin = plugin
        self.ns = members[0].namespace if members else pg.namespace
        self.quotas = plugin.quotas()
        self.quota = self.quotas.get(self.ns)
        self.usage = UsageOverlay(plugin.usage)
        self.request = group_request(members)
        self.in_quota_extra, self.with_group_extra = plugin.nominated_beside(
            self.ns, self.priority, {p.uid for p in members})
        in_quota = dict(self.request)
        add_into(in_quota, self.in_quota_extra)
        self.over_min = self.quota is not None and plugin.over_min(in_quota, self.usage.of(self.ns), self.quota)

    def leaving_victim(self, index: GangIndex, pod: PodInfo) -> bool:
        """A pod the group could be waiting for: leaving because of a preemption, and one this
        group's rules could have chosen (``CapacityScheduling.pod_eligible``'s cases)."""
        if not (pod.deleting or self.ev.terminating(pod)):
            return False
        pq = self.quotas.get(pod.namespace)
        if self.quota is None:
            return pq is None and index.priority_of(pod) < self.priority
        if pq is None:
            return False
        if pod.namespace == self.ns:
            return index.priority_of(pod) < self.priority
        return not self.over_min and self.plugin.over_min(self.plugin.usage.of(pod.namespace), {}, pq)

    def victims(self, index: GangIndex, pods: Sequence[PodInfo]) -> list[Victim]:
        leaving = self.plugin.usage.leaving       # already chosen by a preemption: going anyway
        own = {p.uid for p in self.members}
        pods = [p for p in pods if p.uid not in leaving and p.uid not in own]
        if self.quota is None:
            return index.victims([p for p in pods if p.namespace not in self.quotas], self.priority)
        if self.over_min:
            return index.victims([p for p in pods if p.namespace == self.ns], self.priority)
        units = index.victims([p for p in pods if p.namespace != self.ns and p.namespace in self.quotas],
                              ANY_PRIORITY)
        # Least important first, each while its quota is over its min with it still counted. A unit
        # that would take a gang below its minimum takes the gang whole (the gang rule): it is a
        # victim only if its quota keeps its min with the whole gang gone - a quota's guarantee is
        # never spent to keep a gang whole; the next unit (a plain pod) is offered instead.
        counted = UsageOverlay(self.plugin.usage)
        out: list[Victim] = []
        gone: set[str] = set()
        taken: dict[str, int] = {}
        for v in sorted(units, key=more_important, reverse=True):
            ns = v.pods[0].namespace
            q = self.quotas[ns]
            if not self.plugin.over_min(counted.of(ns), {}, q):
                continue
            going = [p for p in v.pods if p.uid not in gone]
            g = v.gang
            if g is not None and not v.whole and taken.get(g.key, 0) + len(v.pods) > g.surplus:
                going = [p for p in g.scheduled if p.uid not in gone]
                after = UsageOverlay(self.plugin.usage)
                after.delta = {k: dict(d) for k, d in counted.delta.items()}
                for p in going:
                    after.remove(p)
                if below_min(after.of(ns), q.min):
                    continue
                v = Victim(going, v.priority, RANK_PODGROUP, whole=True)   # the gang, whole
            if g is not None:
                taken[g.key] = taken.get(g.key, 0) + len(v.pods)
            if not going:
                continue
            out.append(v)
            for p in going:
                counted.remove(p)
                gone.add(p.uid)
        return out

    def take_out(self, pod: PodInfo) -> None:
        self.usage.remove(pod)

    def put_back(self, pod: PodInfo) -> None:
        self.usage.add(pod)

    def holds(self) -> bool:
        """The members are reserved (counted in the usage): the quota's max and the total min."""
        q = self.quota
        if q is None:
            return True
        return not (self.plugin.over_max(self.in_quota_extra, self.usage.of(self.ns), q)
                    or self.plugin.aggregate_exceeds(self.with_group_extra, self.usage.of, self.request))


def below_min(used: dict[str, int], minimum: dict[str, int]) -> bool:
    """Whether ``used`` is under the quota's ``min`` in any resource the min names."""
    return any(used.get(r, 0) < amount for r, amount in minimum.items() if amount)
