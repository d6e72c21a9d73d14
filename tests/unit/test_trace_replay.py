"""``pysched trace`` on small generated traces (the openb format; no trace rows are shipped): reading
errors name file, row and column; a run's arrival (tune up with the per-GPU-milli stop test, tune
down, node ranks) as the protocol builds it; the curve's half-to-even bins and event-weighted means;
replay() against a reference written here from the protocol alone - straight loops over nodes and
GPUs, one policy at a time - pod by pod; and the command (runs JSON, summary, resume, bad flags)."""

import math
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from pysched import cli
from pysched.tools.trace import openb, replay, report
from pysched.tools.trace.openb import TraceError, TraceNode, TracePod
from pysched.tools.trace.replay import RunResult

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"
POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase\n"

# The generated trace's pod classes (milli CPU, GPU milli per GPU, GPU count, gpu_spec) and how many
# pods each has. The counts are distinct (no tie in the target workload's order) and the first seven
# cover 128 of the 134 pods: the 95 % cut keeps exactly them (124 < 127.3 <= 128), so the stated
# workload's weights are count/128, exact in binary - F(n) has no rounding in either implementation.
CLASSES = [((4000, 500, 1, ""), 40), ((2000, 0, 0, ""), 30), ((8000, 1000, 1, ""), 20),
           ((6000, 250, 1, "A"), 16), ((16000, 1000, 2, ""), 10), ((3000, 700, 1, "B"), 8),
           ((24000, 1000, 4, "A|B"), 4), ((1000, 300, 1, ""), 3), ((12000, 1000, 8, ""), 2),
           ((5000, 100, 1, "|A|"), 1)]
KEPT = 7
GPUS = [8] * 10 + [4] * 5 + [2] * 4 + [1] * 2      # 110 GPUs: the trace asks 102.6 (93 %), tuned up to 143


def write_trace(root: Path, seed: int = 7, name: str = "default") -> Path:
    """A small trace in the openb format under ``root``: nodes of 1-8 GPUs of models A and B with
    CPU and memory that sometimes run out first, and CLASSES' pods in random name order."""
    rng = random.Random(seed)
    rows = []
    for i, g in enumerate(GPUS):
        cpu = g * rng.choice([6000, 10000, 16000]) + rng.choice([0, 2000])
        sn = f"sn-{rng.randrange(10**6):06d}-{i}"
        rows.append(f"{sn},{cpu},{g * rng.choice([16384, 40000])},{g},{'AB'[i % 3 == 0]}\n")
    (root / openb.NODE_FILE).write_text(NODE_HEADER + "".join(rows))
    pods = []
    for (cpu, milli, k, spec), n in CLASSES:
        for _ in range(n):
            pods.append(f"pod-{rng.randrange(10**6):06d}-{len(pods)},{cpu},{rng.randrange(1000, 60000)},{k},{milli},"
                        f"{spec},LS,Running\n")
    rng.shuffle(pods)
    (root / f"openb_pod_list_{name}.csv").write_text(POD_HEADER + "".join(pods))
    return root


@pytest.fixture
def trace(tmp_path):
    root = write_trace(tmp_path)
    return openb.read_nodes(root / openb.NODE_FILE), openb.read_pods(root / "openb_pod_list_default.csv")


# -- reading ---------------------------------------------------------------------------------------

def test_read_generated_trace(trace):
    nodes, pods = trace
    assert [n.sn for n in nodes] == sorted(n.sn for n in nodes)
    assert [p.name for p in pods] == sorted(p.name for p in pods)
    assert sum(n.gpus for n in nodes) == 110 and len(pods) == 134
    kinds = Counter((p.milli_cpu, p.gpu_milli, p.gpu_count, p.models) for p in pods)
    assert kinds[(5000, 100, 1, ("A",))] == 1        # "|A|": the empty parts dropped
    assert kinds[(24000, 1000, 4, ("A", "B"))] == 4
    assert kinds[(2000, 0, 0, ())] == 30


def test_read_pods_defaults_and_clamps(tmp_path):
    f = tmp_path / "pods.csv"
    # no gpu_spec column (the multigpu files): any model; gpu_milli clamped to 0..1000; no GPUs: no milli
    f.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nb,100,10,1,1500\na,200,20,0,300\nc,300,30,2,1000\n")
    assert openb.read_pods(f) == [TracePod("a", 200, 20, 0, 0, ()), TracePod("b", 100, 10, 1000, 1, ()),
                                  TracePod("c", 300, 30, 1000, 2, ())]


@pytest.mark.parametrize("body,row,column", [
    ("a,100,10,1,x,\n", 2, "gpu_milli"),
    ("a,100,10,1,500,\nb,1.5,10,0,0,\n", 3, "cpu_milli"),
    ("a,100,10,1,500,\nb,100,10,0,0,\nc,100,10,,0,\n", 4, "num_gpu"),
    ("a,100\n", 2, "num_gpu"),                    # a short row: the first column read that it lacks
])
def test_read_pods_error_names_file_row_and_column(tmp_path, body, row, column):
    f = tmp_path / "openb_pod_list_bad.csv"
    f.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n" + body)
    with pytest.raises(TraceError) as e:
        openb.read_pods(f)
    assert f"{f}:{row}" in str(e.value) and f"column {column!r}" in str(e.value)


def test_read_pods_without_a_name_column_names_it(tmp_path):
    f = tmp_path / "p.csv"
    f.write_text("pod,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1,1,0,0\n")
    with pytest.raises(TraceError) as e:
        openb.read_pods(f)
    assert str(e.value) == f"{f}:2: column 'name': missing"


def test_read_pods_negative_gpu_count_is_an_error(tmp_path):
    f = tmp_path / "p.csv"
    f.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1,1,-1,500\n")
    with pytest.raises(TraceError, match=r"p\.csv:2: column 'num_gpu': -1 is negative"):
        openb.read_pods(f)


def test_read_nodes_error_names_file_row_and_column(tmp_path):
    f = tmp_path / openb.NODE_FILE
    f.write_text(NODE_HEADER + "n1,1000,10,2,A\nn2,1000,10,two,A\n")
    with pytest.raises(TraceError) as e:
        openb.read_nodes(f)
    assert str(e.value) == f"{f}:3: column 'gpu': 'two' is not an integer"


def test_empty_files_are_errors(tmp_path):
    (tmp_path / "n.csv").write_text(NODE_HEADER)
    (tmp_path / "p.csv").write_text(POD_HEADER)
    with pytest.raises(TraceError, match="no nodes"):
        openb.read_nodes(tmp_path / "n.csv")
    with pytest.raises(TraceError, match="no pods"):
        openb.read_pods(tmp_path / "p.csv")


# -- a run's arrival -------------------------------------------------------------------------------

def gpu_nodes(*gpus):
    return [TraceNode(f"n{i}", 64000, 65536, g, "A") for i, g in enumerate(gpus)]


def pod(name, milli=0, k=0, cpu=1000):
    return TracePod(name, cpu, 100, milli, k, ())


def demand(pods, order):
    return sum(pods[i].gpu_total for i in order)


def test_tune_up_appends_copies_after_the_shuffled_originals(trace):
    nodes, pods = trace
    run = openb.build_run(pods, nodes, 42)
    n = len(pods)
    assert sorted(run.order[:n]) == list(range(n)) and run.order[:n] != list(range(n))
    target = 1.3 * 110 * 1000
    # every copy passed the stop test when drawn (the per-GPU share, not the pod's total), and the
    # copies are drawn from every kind of pod
    s = demand(pods, run.order[:n])
    for i in run.order[n:]:
        assert s + pods[i].gpu_milli <= target
        s += pods[i].gpu_total
    assert len(run.order) > n and len({pods[i].gpu_count for i in run.order[n:]}) > 2
    assert sorted(run.rank) == list(range(len(nodes)))


def test_tune_up_draws_as_documented(trace):
    """The draws, in the protocol's order: the shuffle, the copies (uniform by pod, stop at the first
    that would pass the target by its per-GPU share), then the node ranks - all from NumPy's
    generator seeded with the seed (the module's stated RNG)."""
    nodes, pods = trace
    rng = np.random.default_rng(43)
    order = list(rng.permutation(len(pods)))
    s, target = demand(pods, order), 1.3 * 110_000
    while True:
        i = rng.integers(len(pods))
        if s + pods[i].gpu_milli > target:
            break
        order.append(i)
        s += pods[i].gpu_total
    ranks = list(rng.permutation(len(nodes)))
    assert openb.build_run(pods, nodes, 43) == openb.Run(order, ranks)


def test_tune_up_stop_test_uses_the_per_gpu_share():
    # T = 1.3 * 10 GPUs = 13,000. The 8-GPU pod asks 8,000 in all, but the stop test compares
    # 8,000 + 1,000 (its per-GPU share): one copy is appended and the demand overshoots to 16,000.
    # CPU-only copies add nothing and never stop it.
    pods = [pod("big", 1000, 8), pod("cpu")]
    for seed in range(5):
        run = openb.build_run(pods, gpu_nodes(8, 2), seed)
        copies = run.order[2:]
        assert sorted(run.order[:2]) == [0, 1]
        assert copies[-1] == 0 and set(copies[:-1]) <= {1}
        assert demand(pods, run.order) == 16_000


def test_tune_down_removes_random_pods_keeping_the_order():
    # 2 GPUs: T = 2,600; the trace asks 6 x 1,000 (and CPU-only pods, which are removed too).
    pods = [pod(f"g{i}", 1000, 1) for i in range(6)] + [pod(f"c{i}") for i in range(4)]
    nodes = gpu_nodes(2)
    for seed in range(4):
        rng = np.random.default_rng(seed)
        order = [int(i) for i in rng.permutation(10)]
        shuffled = list(order)
        s = 6000
        while s > 2600:
            s -= pods[order.pop(int(rng.integers(len(order))))].gpu_total
        run = openb.build_run(pods, nodes, seed)
        assert run.order == order and demand(pods, run.order) == 2000
        assert [i for i in shuffled if i in run.order] == run.order       # the order of the rest kept
        assert run.rank == [int(r) for r in rng.permutation(1)]


def test_a_trace_without_gpu_pods_cannot_be_tuned():
    with pytest.raises(TraceError, match="no pod asks for GPUs"):
        openb.build_run([pod("a"), pod("b")], gpu_nodes(2), 42)


def test_exact_target_neither_tunes_up_nor_down():
    pods = [pod("a", 1000, 1), pod("b", 300, 1)]
    run = openb.build_run(pods, gpu_nodes(1), 1, tune=1.3)
    assert sorted(run.order) == [0, 1]


# -- the curve -------------------------------------------------------------------------------------

def test_curve_bins_half_to_even_and_averages_events():
    # 10 GPUs: 1 % is 100 milli. Arrived 50 (0.5 %) -> bin 0, 150 (1.5 %) -> 2, 250 (2.5 %) -> 2,
    # 349 -> 3, 350 (3.5 %) -> 4. Each event counts once, whatever it added (CPU-only pods add none).
    arrived = np.array([0, 50, 50, 150, 250, 250, 349, 350])
    allocated = np.array([0, 50, 50, 150, 100, 0, 349, 333])
    c = replay.curve(RunResult(10_000, arrived, allocated, 0, 0.0))
    assert c == {0: 0.33,        # (0 + 0.5 + 0.5) / 3
                 2: 0.83,        # (1.5 + 1.0 + 0.0) / 3
                 3: 3.49, 4: 3.33}


def test_curve_rounds_as_the_published_analysis():
    """Each event's ratio rounded to 2 places as Python rounds the float (the simulator's analysis
    applies round() to each value), the bin's mean rounded as NumPy rounds (round() of the
    pandas mean, a numpy float): 100 GPUs, used 25 -> 25/100/10 = 0.025 (as a float, just above)
    -> 0.03; used 0 and 10 -> 0.0 and 0.01, mean 0.005 -> 0.0 (NumPy: 0.5 to even)."""
    assert replay.curve(RunResult(100_000, np.array([1]), np.array([25]), 0, 0.0)) == {0: 0.03}
    assert replay.curve(RunResult(100_000, np.array([1, 1]), np.array([0, 10]), 0, 0.0)) == {0: 0.0}
    # rounded before the mean: 0.004, 0.004, 0.008 -> 0.0, 0.0, 0.01 -> 0.0033 -> 0.0 (not 0.0053 -> 0.01)
    assert replay.curve(RunResult(100_000, np.array([1, 1, 1]), np.array([4, 4, 8]), 0, 0.0)) == {0: 0.0}


# -- replay() against a reference written from the protocol --------------------------------------

def typical_classes(pods):
    """The protocol's target workload (§5.6): classes (cpu, milli, k, spec) by count, the shortest
    prefix covering 95 % of the pods, weights count / sum kept. The generated trace has no ties."""
    cnt = Counter((p.milli_cpu, p.gpu_milli, p.gpu_count, frozenset(p.models)) for p in pods)
    assert len(set(cnt.values())) == len(cnt)
    kept, acc = [], 0
    for key, c in sorted(cnt.items(), key=lambda kv: -kv[1]):
        kept.append((key, c))
        acc += c
        if acc >= 0.95 * len(pods):
            break
    total = sum(c for _, c in kept)
    return [(*key, c / total) for key, c in kept]


class Reference:
    """The cluster as the protocol states it (§1, §4), one Python list per node."""

    def __init__(self, nodes, rank, policy, classes):
        self.policy, self.classes = policy, classes
        self.names = [replay.node_name(n, r) for n, r in zip(nodes, rank, strict=True)]
        self.rank = rank
        self.gpus = [n.gpus for n in nodes]
        self.model = [n.model for n in nodes]
        self.cpu_left = [n.milli_cpu for n in nodes]
        self.mem_left = [n.memory_mib for n in nodes]
        self.left = [[1000] * n.gpus for n in nodes]
        self.tags = [set() for _ in nodes]
        self.max_cpu = max(n.milli_cpu for n in nodes)
        self.max_gpu = 1000 * max(n.gpus for n in nodes)

    def feasible(self, n, p):
        if p.milli_cpu > self.cpu_left[n] or p.memory_mib > self.mem_left[n]:
            return False
        if p.gpu_milli == 0:
            return True
        if self.gpus[n] == 0 or (p.models and self.model[n] not in p.models):
            return False
        return sum(1 for x in self.left[n] if x >= p.gpu_milli) >= p.gpu_count

    def frag(self, cpu_left, left, model):
        lsum, total = sum(left), 0.0
        for cpu, milli, k, models, weight in self.classes:
            if (milli > 0 and (not models or model in models) and cpu_left >= cpu
                    and sum(1 for x in left if x >= milli) >= k):
                f = sum(x for x in left if x < milli)
            else:
                f = lsum
            total += weight * f
        return total

    @staticmethod
    def sigmoid_score(delta):
        return int(100 * (1 / (1 + math.exp(-delta / 1000))))

    def fgd(self, n, p):
        """(score, device) - the device for a pod sharing one GPU, else None."""
        cpu, left = self.cpu_left[n], self.left[n]
        before = self.frag(cpu, left, self.model[n])
        if 0 < p.gpu_milli < 1000:
            best = None
            for d, x in enumerate(left):
                if x >= p.gpu_milli:
                    after = left[:d] + [x - p.gpu_milli] + left[d + 1:]
                    s = self.sigmoid_score(before - self.frag(cpu - p.milli_cpu, after, self.model[n]))
                    if best is None or s > best[0]:
                        best = (s, d)
            return best
        after, taken = list(left), 0
        for d, x in enumerate(after):
            if taken < p.gpu_count and x == 1000:
                after[d], taken = 0, taken + 1
        return self.sigmoid_score(before - self.frag(cpu - p.milli_cpu, after, self.model[n])), None

    def score(self, n, p):
        cpu_l, left, total = self.cpu_left[n], self.left[n], p.gpu_total
        lsum = sum(left)
        if self.policy == "FGD":
            return self.fgd(n, p)[0]
        if self.policy == "BestFit":
            r = 0.5 * (cpu_l - p.milli_cpu) / self.max_cpu + 0.5 * (lsum - total) / self.max_gpu
            return int(100 * (1 - r))
        if self.policy == "DotProd":
            dot = (cpu_l / self.max_cpu) * (p.milli_cpu / self.max_cpu) + (lsum / self.max_gpu) * (total / self.max_gpu)
            return int(100 * (1 - dot / 2))
        if p.gpu_milli == 0:
            return 0                                   # GpuPacking, GpuClustering: CPU-only pods
        if self.policy == "GpuPacking":
            g = self.gpus[n]
            if sum(1 for x in left if x == 1000) == g:
                return 33 - g
            taken = [x for x in sorted(left) if x >= p.gpu_milli][:p.gpu_count]
            u = sum(1 for x in taken if x == 1000)
            if u:
                return max(50 - u, 33)
            return max(100 - sum(x * 100 // 1000 for x in taken) // 10, 50)
        assert self.policy == "GpuClustering"
        base = 25 * (self.max_gpu - lsum) // self.max_gpu
        have = self.tags[n]
        tag = self.tag(p)
        if have == {tag}:
            return base + 75
        if tag in have:
            return base + 50
        return base + (25 if not have else 0)

    @staticmethod
    def tag(p):
        return "share-gpu" if p.gpu_milli < 1000 else f"{p.gpu_count}-gpu"

    def devices(self, n, p):
        left = self.left[n]
        if p.gpu_milli == 0:
            return ()
        if p.gpu_milli == 1000:
            return tuple([d for d, x in enumerate(left) if x == 1000][:p.gpu_count])
        if self.policy == "FGD":
            return (self.fgd(n, p)[1],)
        return (min((x, d) for d, x in enumerate(left) if x >= p.gpu_milli)[1],)

    def place(self, p):
        feasible = [n for n in range(len(self.gpus)) if self.feasible(n, p)]
        if not feasible:
            return None
        pick = min(feasible, key=lambda n: (-self.score(n, p), self.rank[n]))
        devices = self.devices(pick, p)
        for d in devices:
            self.left[pick][d] -= p.gpu_milli
        self.cpu_left[pick] -= p.milli_cpu
        self.mem_left[pick] -= p.memory_mib
        if p.gpu_milli:
            self.tags[pick].add(self.tag(p))
        return self.names[pick], devices


def reference_run(pods, nodes, run, policy):
    ref = Reference(nodes, run.rank, policy, typical_classes(pods))
    placements, arrived, allocated = [], [], []
    arr = alloc = 0
    for i in run.order:
        p = pods[i]
        where = ref.place(p)
        arr += p.gpu_total
        if where is not None:
            alloc += p.gpu_total
            placements.append((p.name, *where))
        arrived.append(arr)
        allocated.append(alloc)
    return placements, arrived, allocated


def reference_curve(arrived, allocated, capacity):
    """§6 as the simulator's analysis computes it (merge_alloc_discrete.py): per event
    round(arrived / GPUs / 10) and round(used / GPUs / 10, 2) on Python floats, then per bin
    round() of the mean (a NumPy float)."""
    gpus = capacity // 1000
    bins: dict[float, list[float]] = {}
    for a, b in zip(arrived, allocated, strict=True):
        bins.setdefault(round(a / gpus / 10, 0), []).append(round(b / gpus / 10, 2))
    return {int(k): float(round(np.mean(v), 2)) for k, v in bins.items()}


def test_the_workload_the_reference_states_is_the_one_replay_states(trace):
    _, pods = trace
    assert len(typical_classes(pods)) == KEPT
    args = replay.profile_config("FGD", pods)["profiles"][0]["pluginConfig"][0]["args"]
    stated = {(c["milliCPU"], c["gpuMilli"], c["gpuCount"], frozenset(c["models"])): c["weight"]
              for c in args["classes"]}
    total = sum(stated.values())
    assert {k[:4]: k[4] for k in typical_classes(pods)} == {k: w / total for k, w in stated.items()}


@pytest.mark.parametrize("policy", ["BestFit", "FGD", "GpuPacking", "GpuClustering", "DotProd"])
@pytest.mark.parametrize("seed", [42, 43])
def test_replay_places_every_pod_as_the_reference(trace, policy, seed):
    nodes, pods = trace
    run = openb.build_run(pods, nodes, seed)
    got = replay.replay(pods, nodes, run, policy, seed, keep_placements=True)
    placements, arrived, allocated = reference_run(pods, nodes, run, policy)
    assert [(name.split("-tuned-")[0], node, devices) for name, node, devices in got.placements] == placements
    assert got.arrived.tolist() == arrived and got.allocated.tolist() == allocated
    assert got.failed == len(run.order) - len(placements) > 0       # the run fills the cluster
    assert replay.curve(got) == reference_curve(arrived, allocated, got.capacity)
    assert got.capacity == 110_000 and abs(max(replay.curve(got)) - 130) <= 1      # tuned to 1.3 x the GPUs


def test_copies_are_named_after_their_pod(trace):
    nodes, pods = trace
    run = openb.build_run(pods, nodes, 42)
    got = replay.replay(pods, nodes, run, "BestFit", 42, keep_placements=True)
    names = [n for n, _, _ in got.placements]
    assert len(set(names)) == len(names)
    tuned = [n for n in names if "-tuned-" in n]
    assert tuned and all(n.split("-tuned-")[0] in {p.name for p in pods} for n in tuned)


def test_replay_stops_at_the_requested_arrival(trace):
    nodes, pods = trace
    run = openb.build_run(pods, nodes, 42)
    got = replay.replay(pods, nodes, run, "GpuPacking", 42, stop_percent=50)
    pct = got.arrived * 100 / got.capacity
    assert pct[-1] > 50.5 and (pct[:-1] <= 50.5).all()


@pytest.mark.parametrize("policy", ["Random", "pysched", "kube-LeastAllocated", "kube-MostAllocated"])
def test_other_policies_replay_the_same_with_the_same_seed(trace, policy):
    nodes, pods = trace
    run = openb.build_run(pods, nodes, 44)
    first = replay.replay(pods, nodes, run, policy, 44, keep_placements=True)
    again = replay.replay(pods, nodes, run, policy, 44, keep_placements=True)
    assert first.placements == again.placements and first.failed == again.failed > 0
    # every pod placed got GPUs of its ask, each GPU holding at most 1000
    ask = {p.name: p for p in pods}
    used: Counter = Counter()
    for name, node, devices in first.placements:
        p = ask[name.split("-tuned-")[0]]
        assert len(devices) == p.gpu_count and len(set(devices)) == len(devices)
        for d in devices:
            used[node, d] += p.gpu_milli
    assert max(used.values()) <= 1000 and sum(used.values()) == first.allocated[-1]


def test_published_results_beside_ours(tmp_path):
    f = tmp_path / "analysis_allo_discrete.csv"
    f.write_text("workload,sc_policy,tune,seed,total_gpus,100,130\n"
                 "openb_pod_list_default,06-FGD,1.3,42,6212,95.0,95.3\n"
                 "openb_pod_list_default,06-FGD,1.3,43,6212,95.2,95.5\n"
                 "openb_pod_list_default,06-FGD,1.3,99,6212,1.0,1.0\n"
                 "openb_pod_list_default,05-BestFit,1.3,42,6212,92.9,\n")
    theirs = report.published(f, {42, 43})
    assert theirs[("default", "FGD")].mean == {100: 95.1, 130: 95.4}
    assert theirs[("default", "FGD")].seeds == [42, 43] and theirs[("default", "BestFit")].mean == {100: 92.9}
    ours = report.summarize([{"trace": "default", "policy": "FGD", "seed": 42, "curve": {"130": 95.5}}])
    table = report.table(ours, theirs, ["default"], ["FGD", "BestFit"], 130)
    assert table.splitlines()[2] == "| default | 95.50 (+0.10) | - |"


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="unknown policy 'Bogus'"):
        replay.profile_config("Bogus")


# -- the command -----------------------------------------------------------------------------------

def run_cli(*argv):
    return cli.main(["trace", *argv])


def bundled(out):
    """The runs the command kept under ``out``, by (trace, policy, seed)."""
    return {(r["trace"], r["policy"], r["seed"]): r for r in report.load_runs(out)}


def test_command_writes_runs_and_summary_then_resumes(tmp_path, capsys):
    data = write_trace(tmp_path)
    out = tmp_path / "out"
    argv = ["--data", str(data), "--out", str(out), "--policies", "BestFit,GpuPacking", "--seeds", "42-43,45",
            "--jobs", "1", "--no-plot"]
    assert run_cli(*argv) == 0
    runs = bundled(out)
    assert sorted(runs) == [("default", p, s) for p in ("BestFit", "GpuPacking") for s in (42, 43, 45)]
    # the runs are folded into the bundle: no per-run file left
    assert (out / report.BUNDLE).exists() and not list(out.rglob("seed-*.json"))
    doc = runs[("default", "BestFit", 42)]
    assert doc["curve"]["130"] > 0 and doc["failed"] > 0
    summary = (out / "summary.md").read_text()
    assert "seeds 42, 43, 45" in summary and "| trace | BestFit | GpuPacking |" in summary
    mean = round(sum(runs[("default", "BestFit", s)]["curve"]["130"] for s in (42, 43, 45)) / 3, 2)
    assert f"| default | {mean:.2f} |" in summary
    assert (out / "curves.csv").read_text().startswith("trace,policy,seeds,")
    assert "6 runs to do" in capsys.readouterr().out
    # A second command with one more seed does only that run; the kept ones stay as they are.
    changed = {**doc, "curve": {**doc["curve"], "130": 1.0}}
    report.write_bundle([changed, *(r for k, r in runs.items() if k != ("default", "BestFit", 42))],
                        out / report.BUNDLE)
    assert run_cli(*argv[:-5], "--seeds", "42-44", "--jobs", "1", "--no-plot") == 0
    printed = capsys.readouterr().out
    assert "2 runs to do" in printed and "4 already in" in printed
    runs = bundled(out)
    assert runs[("default", "BestFit", 42)]["curve"]["130"] == 1.0
    assert ("default", "GpuPacking", 44) in runs and len(runs) == 8


@pytest.mark.parametrize("flag,value,message", [
    ("--seeds", "4x", "--seeds: '4x' is not a seed or a range like 42-51"),
    ("--seeds", ",", "--seeds: no seeds"),
    ("--seeds", "42,51-42", "--seeds: '51-42' is an empty range (write it low-high)"),
    ("--seeds", "42-x", "--seeds: '42-x' is not a seed or a range like 42-51"),
    ("--policies", "BestFit,Bogus", "--policies: unknown Bogus"),
])
def test_command_refuses_bad_flags(tmp_path, capsys, flag, value, message):
    with pytest.raises(SystemExit) as e:
        run_cli("--data", str(tmp_path), flag, value)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_seeds_each_once_in_the_order_given():
    args = cli.parse_args(["trace", "--data", ".", "--seeds", "45, 42-44,43"])
    assert args.seeds == [45, 42, 43, 44]
    assert cli.parse_args(["trace", "--data", "."]).seeds == list(range(42, 52))


def test_command_names_the_missing_trace_file(tmp_path, capsys):
    write_trace(tmp_path)
    assert run_cli("--data", str(tmp_path), "--traces", "cpu050", "--out", str(tmp_path / "o"), "--no-plot") == 2
    assert f"--data {tmp_path}: openb_pod_list_cpu050.csv not found" in capsys.readouterr().err


def test_report_only_rebuilds_the_summary_from_saved_runs(tmp_path):
    out = tmp_path / "out"
    for seed, v in ((42, 90.0), (43, 92.0)):
        res = RunResult(1000, np.array([1300]), np.array([int(v * 10)]), 0, 0.0)
        report.save_run(out, "default", "FGD", seed, res, 1)
    assert run_cli("--data", str(write_trace(tmp_path)), "--out", str(out), "--policies", "FGD", "--seeds", "42-43",
                   "--report-only", "--no-plot") == 0
    assert "| default | 91.00 |" in (out / "summary.md").read_text()


def test_all_runs_kept_as_one_bundle_read_back_without_the_run_files(tmp_path):
    res = RunResult(2000, np.array([0, 500, 1500]), np.array([0, 500, 1000]), 1, 0.5)
    for seed in (43, 42):
        report.save_run(tmp_path, "t", "FGD", seed, res, 3)
    runs = report.load_runs(tmp_path)
    report.write_bundle(runs, tmp_path / report.BUNDLE)
    first = (tmp_path / report.BUNDLE).read_bytes()
    report.write_bundle(list(reversed(runs)), tmp_path / report.BUNDLE)
    assert (tmp_path / report.BUNDLE).read_bytes() == first          # the same runs, the same bytes
    for p in (tmp_path / "runs").rglob("*.json"):
        p.unlink()
    assert sorted(report.load_runs(tmp_path), key=lambda r: r["seed"]) == sorted(runs, key=lambda r: r["seed"])


def test_set_gives_gpushare_arguments_on_top_of_the_policy(tmp_path, capsys):
    data = write_trace(tmp_path)
    assert run_cli("--data", str(data), "--out", str(tmp_path / "o"), "--policies", "BestFit",
                   "--set", "nope=1", "--no-plot") == 2
    assert "--set: profiles[0].pluginConfig[0].args.nope: unknown field" in capsys.readouterr().err
    cfg = replay.profile_config("BestFit", [], {"tieBreak": "Scheduler"})
    assert cfg["profiles"][0]["pluginConfig"][0]["args"]["tieBreak"] == "Scheduler"
    # the ties left to the scheduler's random pick place the trace differently from the rank's
    argv = ["--data", str(data), "--policies", "BestFit", "--seeds", "42", "--jobs", "1", "--no-plot"]
    assert run_cli(*argv, "--out", str(tmp_path / "rank")) == 0
    assert run_cli(*argv, "--out", str(tmp_path / "random"), "--set", "tieBreak=Scheduler") == 0
    curves = [bundled(tmp_path / d)[("default", "BestFit", 42)]["curve"] for d in ("rank", "random")]
    assert curves[0] != curves[1]
