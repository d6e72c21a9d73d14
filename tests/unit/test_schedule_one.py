"""Scheduling-cycle rules: node sampling, rotation, single-node shortcut, tie breaks, assume."""

import collections

import pytest

from pysched.apis import config as configmod
from pysched.schedule_one import MAX_BINDS_OUTSTANDING, MIN_BINDS_OUTSTANDING, max_binds_for, num_feasible_nodes_to_find
from pysched.tools.offline import OfflineScheduler

from .conftest import node, pod


@pytest.mark.parametrize("n,expected", [(1, 1), (50, 50), (99, 99), (100, 100), (500, 230), (1000, 420),
                                        (5000, 500), (6000, 300), (10000, 500), (20000, 1000)])
def test_adaptive_percentage(n, expected):
    assert num_feasible_nodes_to_find(None, 0, n) == expected


def test_explicit_percentages():
    assert num_feasible_nodes_to_find(None, 20, 1000) == 200
    assert num_feasible_nodes_to_find(1, 50, 1000) == 100     # profile wins; floor of 100 nodes
    assert num_feasible_nodes_to_find(100, 0, 5000) == 5000


def test_rotation_spreads_the_search():
    cfg = configmod.parse({"apiVersion": configmod.API_VERSION, "kind": configmod.KIND,
                           "percentageOfNodesToScore": 10})
    s = OfflineScheduler(cfg)
    for i in range(300):
        s.add_node(node(f"n{i:03d}"))
    s.schedule(pod("a"), assume=False)
    assert s.scheduler.next_start_node_index == 100
    s.schedule(pod("b"), assume=False)
    assert s.scheduler.next_start_node_index == 200
    s.schedule(pod("c"), assume=False)
    assert s.scheduler.next_start_node_index == 0


def test_assume_makes_next_cycle_see_capacity():
    s = OfflineScheduler()
    s.add_node(node("only", cpu="1", memory="1Gi"))
    assert s.schedule(pod("a", cpu="600m", memory="10Mi")).node == "only"
    out = s.schedule(pod("b", cpu="600m", memory="10Mi"))
    assert out.node is None and "1 Insufficient cpu" in out.message


def test_ties_broken_at_random():
    s = OfflineScheduler(seed=3)
    for n in ("a", "b", "c"):
        s.add_node(node(n))
    picks = collections.Counter(s.schedule(pod(f"p{i}", cpu=None, memory=None), assume=False).node for i in range(300))
    assert set(picks) == {"a", "b", "c"} and min(picks.values()) > 60


def test_no_nodes():
    out = OfflineScheduler().schedule(pod("p"))
    assert out.code == "SchedulerError" and out.message == "no nodes available to schedule pods"


def test_least_allocated_spreads_pods():
    s = OfflineScheduler()
    for n in ("a", "b"):
        s.add_node(node(n, cpu="4", memory="8Gi"))
    nodes = [s.schedule(pod(f"p{i}", cpu="1", memory="1Gi")).node for i in range(4)]
    assert collections.Counter(nodes) == {"a": 2, "b": 2}


@pytest.mark.parametrize("pattern", ["alternate", "every5th", "tail", "none", "all"])
def test_chunked_filtering_matches_whole_evaluation(pattern):
    """Filtering in chunks until enough nodes are feasible keeps the feasible set and rotation."""
    from pysched.framework.cycle_state import CycleState
    from pysched.framework.podinfo import PodInfo
    from pysched.framework.status import FitError
    from pysched.runtime.framework import CycleTrace

    n = 1200
    feasible = {"alternate": lambda i: i % 2 == 0, "every5th": lambda i: i % 5 == 0, "tail": lambda i: i >= n - 300,
                "none": lambda i: False, "all": lambda i: True}[pattern]
    s = OfflineScheduler()
    for i in range(n):
        s.add_node(node(f"n{i:04d}", labels={"pool": "x" if feasible(i) else "y"}))
    fwk = s.frameworks[s.profile]
    for k in range(4):
        info = PodInfo.from_dict(pod(f"p{k}", node_selector={"pool": "x"}), keep_raw=True)
        start = s.scheduler.next_start_node_index
        results = []
        for whole in (True, False):
            s.scheduler.next_start_node_index = start
            trace = CycleTrace() if whole else None
            try:
                batch, diagnosis, _ = s.scheduler.find_feasible(fwk, CycleState(), info, trace)
                names, failed = batch.names, diagnosis.num_failed
            except FitError as fe:
                names, failed = [], fe.diagnosis.num_failed
            results.append((list(names), s.scheduler.next_start_node_index, failed))
        (whole_names, whole_next, whole_failed), (names, nxt, failed) = results
        assert names == whole_names and nxt == whole_next
        if pattern == "alternate":
            # stopped early: fewer nodes evaluated
            assert len(names) == num_feasible_nodes_to_find(None, 0, n) and failed < whole_failed
        if pattern in ("none", "tail"):
            assert failed == whole_failed  # every node had to be looked at


def test_outstanding_binds_are_bounded_by_the_rate_limiter_and_the_connection_pool():
    assert max_binds_for(5000, 30.0) == MAX_BINDS_OUTSTANDING            # the limiter alone allows more
    assert max_binds_for(5000, 30.0, connections=64) == 128             # one in flight, one waiting per connection
    assert max_binds_for(5, 30.0, connections=64) == 75                 # a slow limiter binds tighter
    assert max_binds_for(0, 30.0, connections=64) == 128                # no limiter: the pool alone
    assert max_binds_for(5000, 30.0, connections=2) == MIN_BINDS_OUTSTANDING
