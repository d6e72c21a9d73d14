"""NodeResourcesFit (PreFilter, Filter, PreScore, Score): the pod's requests must fit what is left.

Filter, as upstream ``fitsRequest``: the node must have room for one more pod (``Too many
pods``), and for every resource the pod requests (> 0) the request must not exceed allocatable
minus what the node's pods - bound by anyone, or assumed - already request (``Insufficient
<resource>``). All insufficient resources are reported; a request larger than the node's whole
allocatable makes the status UnschedulableAndUnresolvable. Extended resources listed in
``ignoredResources`` or whose domain is in ``ignoredResourceGroups`` are not checked (the
extenders' ``managedResources`` with ``ignoredByScheduler`` land there too). Requests follow
``scheduler.resources``: init containers, sidecars, pod overhead and pod-level resources count,
limits-only resources get an equal request, a zero request is no demand.

Score, with ``scoringStrategy.type``:

* ``LeastAllocated`` (default): per resource ``(allocatable - requested) * 100 / allocatable``;
* ``MostAllocated``: ``requested * 100 / allocatable`` (requested capped at allocatable);
* ``RequestedToCapacityRatio``: a piecewise-linear ``shape`` of utilisation (0-100) -> score
  (0-10, scaled to 100);

weighted by ``resources`` (default cpu 1, memory 1). Requested amounts include the pod itself;
cpu and memory use "non-zero" requests (100m / 200Mi for containers that state none).
Resources the node does not have, and extended resources the pod does not request, are left out.

Reads: NodeTable ``alloc``/``req``/``non0``/``npods`` columns; the pod's parsed requests.
"""

from __future__ import annotations

import math

import numpy as np

from pysched.apis.core.names import qualified_name_problem
from pysched.apis.config import ConfigError
from pysched.framework.args import get_int, get_list, get_str, get_str_list, strict
from pysched.framework.interface import (MAX_NODE_SCORE, ClusterEvent, ClusterEventWithHint,
                                           EnqueueExtensions, FilterPlugin, FilterResult,
                                           PreFilterPlugin, PreScorePlugin, ScorePlugin)
from pysched.framework.status import Code, Status
from pysched.plugins.helper.resources import parse_resource_specs
from pysched.apis.core.resources import CPU, MEMORY, is_extended_resource, is_scalar

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10
TOO_MANY_PODS = "Too many pods"


class NodeResourcesFitArgs:
    def __init__(self, ignored_resources=(), ignored_groups=(), strategy=LEAST_ALLOCATED,
                 resources=(("cpu", 1), ("memory", 1)), shape=()):
        self.ignored_resources = set(ignored_resources)
        self.ignored_groups = set(ignored_groups)
        self.strategy = strategy
        self.resources = list(resources)
        self.shape = list(shape)

    @classmethod
    def from_dict(cls, raw: dict, path: str) -> "NodeResourcesFitArgs":
        raw = strict(raw, path, ("ignoredResources", "ignoredResourceGroups", "scoringStrategy"),
                     kind="NodeResourcesFitArgs")
        ignored = get_str_list(raw, "ignoredResources", path)
        for i, r in enumerate(ignored):
            problem = qualified_name_problem(r)
            if problem:
                raise ConfigError(f"{path}.ignoredResources[{i}]: {r!r} is not a valid resource name: {problem}")
        groups = get_str_list(raw, "ignoredResourceGroups", path)
        for i, g in enumerate(groups):
            if "/" in g:
                raise ConfigError(f"{path}.ignoredResourceGroups[{i}]: {g!r}: resource group name can't contain '/'")
            problem = qualified_name_problem(g)
            if problem:
                raise ConfigError(f"{path}.ignoredResourceGroups[{i}]: {g!r} is not a valid group name: {problem}")
        ss = strict(raw.get("scoringStrategy"), f"{path}.scoringStrategy",
                    ("type", "resources", "requestedToCapacityRatio"))
        sp = f"{path}.scoringStrategy"
        strategy = get_str(ss, "type", sp, LEAST_ALLOCATED, STRATEGIES) or LEAST_ALLOCATED
        resources = parse_resource_specs(get_list(ss, "resources", sp), f"{sp}.resources",
                                         default=[("cpu", 1), ("memory", 1)])
        shape = []
        if strategy == REQUESTED_TO_CAPACITY_RATIO:
            rtc = strict(ss.get("requestedToCapacityRatio"), f"{sp}.requestedToCapacityRatio", ("shape",))
            pts = get_list(rtc, "shape", f"{sp}.requestedToCapacityRatio")
            shp = f"{sp}.requestedToCapacityRatio.shape"
            if not pts:
                raise ConfigError(f"{shp}: Required value: at least one point must be specified")
            for i, p in enumerate(pts):
                pp = f"{shp}[{i}]"
                p = strict(p, pp, ("utilization", "score"))
                u = get_int(p, "utilization", pp, 0, lo=0, hi=MAX_UTILIZATION)
                s = get_int(p, "score", pp, 0, lo=0, hi=MAX_CUSTOM_PRIORITY_SCORE)
                if shape and shape[-1][0] >= u:
                    raise ConfigError(f"{pp}.utilization: {u}: values must be sorted in increasing order")
                shape.append((u, s))
        return cls(ignored, groups, strategy, resources, shape)

    def to_dict(self) -> dict:
        ss = {"type": self.strategy, "resources": [{"name": n, "weight": w} for n, w in self.resources]}
        if self.strategy == REQUESTED_TO_CAPACITY_RATIO:
            ss["requestedToCapacityRatio"] = {"shape": [{"utilization": u, "score": s} for u, s in self.shape]}
        out = {"scoringStrategy": ss}
        if self.ignored_resources:
            out["ignoredResources"] = sorted(self.ignored_resources)
        if self.ignored_groups:
            out["ignoredResourceGroups"] = sorted(self.ignored_groups)
        return out


def broken_linear(shape: list[tuple[int, int]], p: np.ndarray) -> np.ndarray:
    """``helper.BuildBrokenLinearFunction`` over an int64 array of utilisations (score x10 applied)."""
    pts = [(u, s * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)) for u, s in shape]
    out = np.full(p.shape, pts[-1][1], dtype=np.int64)
    done = np.zeros(p.shape, dtype=bool)
    for i, (u, s) in enumerate(pts):
        sel = (~done) & (p <= u)
        if i == 0:
            out[sel] = s
        else:
            pu, ps = pts[i - 1]
            # Go integer division truncates toward zero; operands here keep the sign of (s - ps).
            num = (s - ps) * (p[sel] - pu)
            den = u - pu
            out[sel] = ps + np.trunc(num / den).astype(np.int64) if den else s
        done |= sel
    return out


class NodeResourcesFit(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions):
    name = "NodeResourcesFit"
    Args = NodeResourcesFitArgs

    def __init__(self, args=None, handle=None):
        super().__init__(args or NodeResourcesFitArgs(), handle)
        a = self.args
        extra = handle.ignored_extended_resources if handle is not None else ()
        self.ignored = set(a.ignored_resources) | set(extra)
        self.ignored_groups = set(a.ignored_groups)

    # -- requests ------------------------------------------------------------------------------

    def checked_requests(self, pod) -> list[tuple[str, int]]:
        """(resource, amount) the filter checks: non-zero requests minus ignored extended ones."""
        out = []
        for name, q in pod.requests.items():
            if q == 0 or name == "pods":
                continue
            if is_extended_resource(name):
                if name in self.ignored or (self.ignored_groups and name.split("/")[0] in self.ignored_groups):
                    continue
            out.append((name, q))
        return out

    def pre_filter(self, state, pod, nodes):
        state.write("NodeResourcesFit/preFilter", self.checked_requests(pod))
        return None, None

    def _requests(self, state, pod):
        r = state.get("NodeResourcesFit/preFilter")
        return self.checked_requests(pod) if r is None else r

    # -- filter --------------------------------------------------------------------------------

    def filter(self, state, pod, node):
        reasons = []
        unresolvable = False
        if len(node.pods) + 1 > node.allowed_pods:
            reasons.append(TOO_MANY_PODS)
        alloc, req = node.allocatable, node.requested
        for name, q in self._requests(state, pod):
            a = alloc.get(name, 0)
            if q > a - req.get(name, 0):
                reasons.append(f"Insufficient {name}")
                if q > a:
                    unresolvable = True
        if reasons:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE, *reasons)
        return None

    def filter_nodes(self, state, pod, nodes):
        table, slots = nodes.table, nodes.slots
        pods_col = table.res_index["pods"]
        ok = table.npods[slots] + 1 <= table.alloc[slots, pods_col]
        failures = []
        if not ok.all():
            failures.append((Code.UNSCHEDULABLE, TOO_MANY_PODS, ~ok))
        for name, q in self._requests(state, pod):
            col = table.res_index.get(name)
            reason = f"Insufficient {name}"
            if col is None:
                bad = np.ones(len(slots), dtype=bool)
                failures.append((Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reason, bad))
                ok = ok & ~bad
                continue
            alloc = table.alloc[slots, col]
            bad = q > alloc - table.req[slots, col]
            if bad.any():
                unres = bad & (q > alloc)
                if unres.any():
                    failures.append((Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reason, unres))
                    res = bad & ~unres
                    if res.any():
                        failures.append((Code.UNSCHEDULABLE, reason, res))
                else:
                    failures.append((Code.UNSCHEDULABLE, reason, bad))
                ok = ok & ~bad
        return FilterResult(ok, failures)

    # -- score ---------------------------------------------------------------------------------

    def _pod_score_request(self, pod, name: str) -> int:
        if name == CPU:
            return pod.non0_cpu
        if name == MEMORY:
            return pod.non0_mem
        return pod.requests.get(name, 0)

    def pre_score(self, state, pod, nodes):
        state.write("NodeResourcesFit/preScore",
                    [(n, w, self._pod_score_request(pod, n)) for n, w in self.args.resources])
        return None

    def _scorer(self, requested: np.ndarray, alloc: np.ndarray) -> np.ndarray:
        s = self.args.strategy
        safe = np.where(alloc == 0, 1, alloc)
        if s == LEAST_ALLOCATED:
            return np.where(requested > alloc, 0, (alloc - requested) * MAX_NODE_SCORE // safe)
        if s == MOST_ALLOCATED:
            return np.minimum(requested, alloc) * MAX_NODE_SCORE // safe
        util = np.where(requested > alloc, MAX_UTILIZATION, requested * MAX_UTILIZATION // safe)
        return broken_linear(self.args.shape, util)

    def score_nodes(self, state, pod, nodes):
        table, slots = nodes.table, nodes.slots
        reqs = state.get("NodeResourcesFit/preScore")
        if reqs is None:
            reqs = [(n, w, self._pod_score_request(pod, n)) for n, w in self.args.resources]
        n = len(slots)
        total = np.zeros(n, dtype=np.int64)
        wsum = np.zeros(n, dtype=np.int64)
        rtc = self.args.strategy == REQUESTED_TO_CAPACITY_RATIO
        for name, weight, podreq in reqs:
            if (podreq == 0 and is_scalar(name)) or name == "pods":
                continue
            col = table.res_index.get(name)
            if col is None:
                continue
            alloc = table.alloc[slots, col]
            if name == CPU:
                requested = table.non0[slots, 0] + podreq
            elif name == MEMORY:
                requested = table.non0[slots, 1] + podreq
            else:
                requested = table.req[slots, col] + podreq
            has = alloc > 0
            rs = self._scorer(requested, alloc)
            if rtc:
                has = has & (rs > 0)
            total += np.where(has, rs * weight, 0)
            wsum += np.where(has, weight, 0)
        if rtc:
            with np.errstate(invalid="ignore", divide="ignore"):
                out = np.where(wsum > 0, np.floor(total / np.maximum(wsum, 1) + 0.5), 0)
            return out.astype(np.int64)
        return np.where(wsum > 0, total // np.maximum(wsum, 1), 0)

    def score(self, state, pod, node):
        reqs = state.get("NodeResourcesFit/preScore")
        if reqs is None:
            reqs = [(n, w, self._pod_score_request(pod, n)) for n, w in self.args.resources]
        total = wsum = 0
        rtc = self.args.strategy == REQUESTED_TO_CAPACITY_RATIO
        for name, weight, podreq in reqs:
            if (podreq == 0 and is_scalar(name)) or name == "pods":
                continue
            alloc = node.allocatable.get(name, 0)
            if alloc == 0:
                continue
            if name == CPU:
                requested = node.non0_cpu + podreq
            elif name == MEMORY:
                requested = node.non0_mem + podreq
            else:
                requested = node.requested.get(name, 0) + podreq
            s = int(self._scorer(np.array([requested], dtype=np.int64), np.array([alloc], dtype=np.int64))[0])
            if rtc and s <= 0:
                continue
            total += s * weight
            wsum += weight
        if wsum == 0:
            return 0
        if rtc:
            return int(math.floor(total / wsum + 0.5))
        return total // wsum

    def events_to_register(self):
        return (ClusterEventWithHint(ClusterEvent("Node", "Add"), _node_may_fit),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeAllocatable"), _node_may_fit),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeTaint"), _node_may_fit),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeLabel"), _node_may_fit),
                ClusterEventWithHint(ClusterEvent("Pod", "Delete")),
                ClusterEventWithHint(ClusterEvent("Pod", "UpdatePodScaleDown")))


def _node_may_fit(pod, old, new) -> bool:
    """Queueing hint: requeue only if the (new) node could hold the pod when empty."""
    if new is None:
        return True
    alloc = new.allocatable
    if alloc.get("pods", 0) < 1:
        return False
    for name, q in pod.requests.items():
        if q and name != "pods" and q > alloc.get(name, 0):
            return False
    return True
