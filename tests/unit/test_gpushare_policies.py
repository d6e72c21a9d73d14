"""GPUShare's policies on hand-made node states, against integers computed by hand from the openb
protocol's formulas (its §5): FGD's F(n) for a two-class workload and its scores and GPU choice,
BestFit's and DotProd's truncation, GpuPacking's three branches, GpuClustering's kinds (one per
whole-GPU count), and the GPU(s) each policy gives a pod on the chosen node."""

import random

import numpy as np
import pytest

from pysched.plugins.gpushare import policies
from pysched.plugins.gpushare.ask import GPUAsk
from pysched.plugins.gpushare.devices import TAGS, tag_column
from pysched.plugins.gpushare.workload import Fragmentation, typical

A, B = 0, 1                      # model codes into MODELS
MODELS = ["A", "B"]
SCALE = policies.Scale(128_000, 8_000)


def state(left, cpu_left, model=None, count=None, tags=None):
    width = max(len(row) for row in left)
    padded = np.array([list(row) + [0] * (width - len(row)) for row in left], dtype=np.int64)
    return policies.NodeState(padded, np.array(count or [len(row) for row in left], dtype=np.int64),
                              np.array(model or [A] * len(left), dtype=np.int64),
                              np.array(cpu_left, dtype=np.int64), tags=tags)


def share(milli, models=()):
    return GPUAsk(milli, 1, tuple(models))


def whole(k):
    return GPUAsk(1000, k)


CPU_ONLY = GPUAsk()

# -- FGD --------------------------------------------------------------------------------------------
# The target workload: 3 pods of (4000m, 500 of one GPU, any model) for each (1000m, 2 whole GPUs of
# model A): p = 0.75 and 0.25.
WORKLOAD = {(4000, 500, 1, ()): 3, (1000, 1000, 2, ("A",)): 1}
# Four nodes:
# N0 model A, 8000m left, GPUs [1000, 300, 600, 0]: class 1 runs (2 GPUs >= 500, CPU), its fragment
#    is the GPUs under 500: 300 + 0; class 2 needs 2 free GPUs, has 1: all 1900. F = 0.75*300 + 0.25*1900 = 700
# N1 model B, 8000m, [1000, 1000]: class 1 runs, no GPU under 500: 0; class 2 wants A: 2000. F = 500
# N2 model A, 3000m, [1000, 1000]: class 1 lacks CPU: 2000; class 2 runs, nothing under 1000: 0. F = 1500
# N3 no model, 8000m, [400, 0]: class 1 has no GPU >= 500: 400; class 2 wants A: 400. F = 400
NODES = dict(left=[[1000, 300, 600, 0], [1000, 1000], [1000, 1000], [400, 0]], cpu_left=[8000, 8000, 3000, 8000],
             model=[A, B, A, -1])


@pytest.fixture
def frag():
    classes = typical(WORKLOAD, 1.0)
    assert classes is not None
    return Fragmentation(classes, MODELS)


def fgd_state(frag, **nodes):
    s = state(**nodes)
    s.frag = frag.measure(s.cpu_left, s.left, s.model)
    return s


def test_typical_classes_weights(frag):
    c = frag.classes
    assert c.cpu.tolist() == [4000, 1000] and c.milli.tolist() == [500, 1000] and c.count.tolist() == [1, 2]
    assert c.weight.tolist() == [0.75, 0.25] and c.models == ((), ("A",))


def test_fragmentation_by_hand(frag):
    s = state(**NODES)
    assert frag.measure(s.cpu_left, s.left, s.model).tolist() == [700.0, 500.0, 1500.0, 400.0]


def test_fragmentation_cpu_only_class_counts_every_idle_gpu():
    classes = typical({(1000, 0, 0, ()): 1, (1000, 500, 1, ()): 1}, 1.0)
    assert classes is not None
    f = Fragmentation(classes, MODELS)
    # [700, 200]: the CPU-only class: all 900; the 500 class: the 200 under it. (900 + 200) / 2
    s = state([[700, 200]], [64000])
    assert f.measure(s.cpu_left, s.left, s.model).tolist() == [550.0]


def test_fgd_sharing_pod_scores_its_best_gpu(frag):
    # 500 of one GPU, 2000m. N0: on GPU 0 -> [500, 300, 600, 0], 6000m: class 1 fragment 300, class 2
    # 1400: F 575, dF 125 -> int(100 sigmoid(0.125)) = 53; on GPU 2 -> [1000, 300, 100, 0]: 400 and
    # 1400: F 650, dF 50 -> 51 (the tighter GPU is the worse one). GPU 1 (300) does not fit.
    # N1: either GPU -> [500, 1000]: 0 and 1500: F 375, dF 125 -> 53, a tie: GPU 0.
    # N2: 1000m left after: class 1 lacks CPU, class 2 lacks 2 free GPUs: F 1500, dF 0 -> 50.
    # N3: no GPU fits: 0.
    s = fgd_state(frag, **NODES)
    scores, devices = policies.fgd(s, share(500), 2000, frag)
    assert scores.tolist() == [53, 53, 50, 0]
    assert devices.tolist() == [0, 0, 0, -1]
    assert policies.score("FGD", s, share(500), 2000, scale=SCALE, frag=frag, tag=0,
                          rng=random.Random(0)).tolist() == [53, 53, 50, 0]


def test_fgd_whole_gpu_and_cpu_only_pods(frag):
    s = fgd_state(frag, left=[[1000, 1000], [1000, 1000]], cpu_left=[8000, 3000], model=[B, A])
    # F before: 500 (as N1) and 1500 (as N2). Two whole GPUs, 1000m: both nodes end [0, 0]: F 0.
    # dF 500 -> int(100 sigmoid(0.5)) = 62; dF 1500 -> 81
    assert policies.fgd(s, whole(2), 1000, frag)[0].tolist() == [62, 81]
    # A CPU-only pod of 5000m: 3000m left on the first node, class 1 lacks CPU: F 0.75*2000 + 500 = 2000,
    # dF -1500 -> 18; the second cannot hold it (filtered out) - scored as if: -2000m, F 2000, dF -500 -> 37
    assert policies.fgd(s, CPU_ONLY, 5000, frag)[0].tolist() == [18, 37]
    s = fgd_state(frag, **NODES)
    # N0 with 5000m: 3000m left: class 1 lacks CPU: 1900; F 1900, dF -1200 -> 23
    assert policies.fgd(s, CPU_ONLY, 5000, frag)[0][0] == 23


def test_fgd_ties_on_the_integer_score_go_to_the_lowest_gpu():
    # Classes (0m, 200) and (0m, 700), 0.75 / 0.25. Node [800, 300]: F = 0.25 * 300 = 75.
    # 100 on GPU 0 -> [700, 300]: 75, dF 0 -> 50. On GPU 1 -> [800, 200]: 0.25 * 200 = 50, dF 25 ->
    # int(50.62) = 50. Equal integer scores: GPU 0, though GPU 1's dF is larger.
    classes = typical({(0, 200, 1, ()): 3, (0, 700, 1, ()): 1}, 1.0)
    assert classes is not None
    f = Fragmentation(classes, MODELS)
    s = fgd_state(f, left=[[800, 300]], cpu_left=[1000])
    assert s.frag is not None and s.frag.tolist() == [75.0]
    scores, devices = policies.fgd(s, share(100), 0, f)
    assert (scores.tolist(), devices.tolist()) == ([50], [0])
    assert policies.choose_devices("FGD", s, share(100), 0, frag=f, rng=random.Random(0)) == (0,)


def test_fgd_score_is_the_truncated_sigmoid():
    assert policies.fgd_score(np.array([0.0, 125.0, -1200.0, 8000.0, -8000.0])).tolist() == [50, 53, 23, 99, 0]


# -- BestFit, DotProd -------------------------------------------------------------------------------

def test_best_fit_truncates():
    # r = 0.5 (cpuLeft - cpu) / 128000 + 0.5 (GPU left - ask) / 8000; int(100 (1 - r))
    s = state([[1000] * 4, [1000] * 8, [1000], [500, 500]], [64000, 32000, 128000, 1000])
    # 1000m + 1 GPU: 0.5*63000/128000 + 0.5*3000/8000 = 0.2461 + 0.1875 -> 56.64 -> 56
    # 32000: 0.5*31000/128000 + 0.5*7000/8000 = 0.1211 + 0.4375 -> 44.14 -> 44
    # 128000: 0.5*127000/128000 + 0 = 0.4961 -> 50.39 -> 50
    # 1000: 0 + 0.5*0/8000 (1000 left of 2 half GPUs, 1000 asked) -> 100
    assert policies.best_fit(s, share(1000), 1000, SCALE).tolist() == [56, 44, 50, 100]
    # half a GPU, no CPU: 0.25 + 0.5*3500/8000 = 0.46875 -> 53.125 -> 53; 0.125 + 0.46875 -> 40.6 -> 40;
    # 0.5 + 0.03125 -> 46.875 -> 46; 0.00390625 + 0.03125 -> 96.48 -> 96
    assert policies.score("BestFit", s, share(500), 0, scale=SCALE, frag=None, tag=0,
                          rng=random.Random(0)).tolist() == [53, 40, 46, 96]


def test_dot_prod_truncates():
    # u = (cpuLeft/128000, GPU left/8000), v = (cpu/128000, ask/8000); int(100 (1 - u.v / 2))
    s = state([[1000] * 4, [1000] * 8, [1000]], [64000, 128000, 16000])
    # 32000m, 2 whole GPUs: 0.5*0.25 + 0.5*0.25 = 0.25 -> 87.5 -> 87; 0.25 + 0.25 -> 75;
    # 0.125*0.25 + 0.125*0.25 = 0.0625 -> 96.875 -> 96
    assert policies.dot_prod(s, whole(2), 32000, SCALE).tolist() == [87, 75, 96]
    assert policies.dot_prod(s, CPU_ONLY, 0, SCALE).tolist() == [100, 100, 100]


# -- GpuPacking -------------------------------------------------------------------------------------

def test_gpu_packing_branches():
    s = state([[1000] * 4, [1000] * 8, [1000], [1000, 500, 200, 1000], [1000, 250, 1000, 0],
               [150, 1000], [99, 1000], [999, 0]], [64000] * 8)
    # All GPUs free: 33 - G -> 29, 25, 32. Otherwise a pod sharing a GPU takes the tightest that fits:
    # 500 -> 100 - floor(floor(500*100/1000)/10) = 95; none partly used fits 300, a free one does:
    # max(50 - 1, 33) = 49 (three nodes); 999: 100 - floor(99/10) = 91.
    assert policies.gpu_packing(s, share(300)).tolist() == [29, 25, 32, 95, 49, 49, 49, 91]
    # 99: the tightest that fits is 200 -> 100 - floor(20/10) = 98, 250 -> 98, 150 -> 99, 99 -> 100 - 0
    assert policies.gpu_packing(s, share(99)).tolist() == [29, 25, 32, 98, 98, 99, 100, 91]
    # k whole GPUs on a used node: max(50 - k, 33)
    assert policies.gpu_packing(s, whole(2)).tolist()[3:5] == [48, 48]
    assert policies.gpu_packing(s, whole(1)).tolist()[3:] == [49] * 5
    assert policies.gpu_packing(state([[1000] * 17 + [0]], [1]), whole(17)).tolist() == [33]
    assert policies.gpu_packing(s, CPU_ONLY).tolist() == [0] * 8


# -- GpuClustering ----------------------------------------------------------------------------------

def tags(*kinds):
    """Per node, the kinds of GPU pods on it: "share" or k (k whole GPUs)."""
    out = np.zeros((len(kinds), TAGS), dtype=np.int64)
    for n, ks in enumerate(kinds):
        for k in ks:
            out[n, 0 if k == "share" else k] += 1
    return out


def test_gpu_clustering_kinds_per_gpu_count():
    s = state([[1000] * 8, [1000] * 6 + [0] * 2, [1000] * 3 + [0] * 5, [1000] * 7 + [0]], [64000] * 4,
              tags=tags((), (2, 2), ("share", 1), (1,)))
    # base = floor(25 (8000 - GPU left) / 8000): 0, floor(6.25) = 6, floor(15.625) = 15, floor(3.125) = 3;
    # + 75 when the node runs only the pod's kind, + 50 when that and others, + 25 when empty, else + 0.
    def clustering(ask):
        return policies.gpu_clustering(s, ask, SCALE, tag_column(ask)).tolist()
    assert clustering(whole(2)) == [25, 81, 15, 3]
    assert clustering(whole(1)) == [25, 6, 65, 78]          # 1-GPU and 2-GPU pods are different kinds
    assert clustering(share(300)) == [25, 6, 65, 3]
    assert clustering(whole(4)) == [25, 6, 15, 3]
    assert clustering(CPU_ONLY) == [0, 0, 0, 0]


# -- the GPU(s) on the chosen node ------------------------------------------------------------------

@pytest.mark.parametrize("policy", ["BestFit", "GpuPacking", "GpuClustering", "DotProd", "None"])
def test_others_take_the_tightest_gpu(policy):
    s = state([[700, 300, 300, 1000]], [64000])
    rng = random.Random(0)
    assert policies.choose_devices(policy, s, share(300), 0, frag=None, rng=rng) == (1,)   # lowest of the ties
    assert policies.choose_devices(policy, s, share(400), 0, frag=None, rng=rng) == (0,)
    assert policies.choose_devices(policy, s, share(800), 0, frag=None, rng=rng) == (3,)
    assert policies.choose_devices(policy, s, share(1000), 0, frag=None, rng=rng) == (3,)


@pytest.mark.parametrize("policy", ["FGD", "BestFit", "Random"])
def test_whole_gpus_are_the_lowest_index_free_ones(policy, frag):
    s = fgd_state(frag, left=[[1000, 500, 1000, 1000]], cpu_left=[64000])
    rng = random.Random(0)
    assert policies.choose_devices(policy, s, whole(2), 0, frag=frag, rng=rng) == (0, 2)
    assert policies.choose_devices(policy, s, whole(3), 0, frag=frag, rng=rng) == (0, 2, 3)
    assert policies.choose_devices(policy, s, whole(4), 0, frag=frag, rng=rng) is None
    assert policies.choose_devices(policy, s, CPU_ONLY, 0, frag=frag, rng=rng) == ()


def test_gpus_past_the_node_count_are_never_chosen():
    s = state([[300, 1000, 1000]], [64000], count=[1])
    assert policies.choose_devices("BestFit", s, share(200), 0, frag=None, rng=random.Random(0)) == (0,)
    assert policies.choose_devices("BestFit", s, share(500), 0, frag=None, rng=random.Random(0)) is None


def test_fgd_takes_the_gpu_that_scored_the_node(frag):
    s = fgd_state(frag, left=[[1000, 300, 600, 0]], cpu_left=[8000])
    # as N0 above: GPU 0 (53) over the tighter GPU 2 (51)
    assert policies.choose_devices("FGD", s, share(500), 2000, frag=frag, rng=random.Random(0)) == (0,)


def test_random_takes_any_gpu_that_fits():
    s = state([[1000, 200, 600, 500]], [64000])
    rng = random.Random(5)
    got = {policies.choose_devices("Random", s, share(500), 0, frag=None, rng=rng) for _ in range(200)}
    assert got == {(0,), (2,), (3,)}


def test_random_scores_one_node_100():
    out = policies.random_node(5, random.Random(1))
    assert sorted(out.tolist()) == [0, 0, 0, 0, 100]
    picks = {int(np.argmax(policies.random_node(3, r))) for r in [random.Random(i) for i in range(30)]}
    assert picks == {0, 1, 2}
