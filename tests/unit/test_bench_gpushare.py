"""The GPU-sharing benchmark workload (``SchedulingGPUShare/1000Nodes``): nodes in the openb trace's
shapes, pods of every kind GPUShare reads, all of which pysched with GPUShare (FGD) places; the
profile that adds GPUShare; the independent checker of GPU placements; the cycle benchmark's
``PROFILE+GPUShare:POLICY`` profiles."""

from __future__ import annotations

from collections import Counter

import pytest

from bench import cycle, plan, verify
from bench.schedulers import pysched_profile
from bench.workloads import (
    GPU,
    GPU_COUNT,
    GPU_MILLI,
    GPU_MODEL,
    GPU_SHARE_MODELS,
    GPU_SHARE_NODE_SHAPES,
    PHASE_LABEL,
    WORKLOADS,
)
from pysched.apis.config.decode import parse as parse_config
from pysched.framework import PodInfo
from pysched.plugins.gpushare.ask import parse_ask
from pysched.tools.offline import OfflineScheduler
from pysched_dev.testkit import make_node, make_pod

W = WORKLOADS["SchedulingGPUShare/1000Nodes"]
WHOLE = ("nvidia.com/gpu",)


def pods_of(w, scheduler: str = "pysched") -> list[dict]:
    return ([w.pod(i, scheduler, "init") for i in range(w.init_pods)]
            + [w.pod(i, scheduler, "measure") for i in range(w.measure_pods)])


def ask(pod: dict):
    return parse_ask(PodInfo.from_dict(pod), GPU_MILLI, GPU_COUNT, GPU_MODEL, WHOLE)


def test_nodes_have_the_trace_shapes_gpu_counts_and_models():
    nodes = [W.node(i) for i in range(W.nodes)]
    shapes = Counter((int(n["status"]["allocatable"][GPU_COUNT]), n["metadata"]["labels"][GPU_MODEL],
                      n["status"]["allocatable"]["cpu"]) for n in nodes)
    assert shapes == Counter({(g, m, str(c)): share * W.nodes // 100 for share, g, m, c, _ in GPU_SHARE_NODE_SHAPES})
    assert {int(n["status"]["allocatable"][GPU_COUNT]) for n in nodes} == {1, 2, 4, 8}
    assert all(n["status"]["allocatable"][GPU] == n["status"]["allocatable"][GPU_COUNT] for n in nodes)


def test_pods_are_every_kind_gpushare_reads():
    pods = pods_of(W)
    asks = [ask(p) for p in pods]
    kinds = Counter("cpu" if not a.wants_gpu else "share" if a.sharing else f"{a.count}-gpu" for a in asks)
    assert set(kinds) == {"cpu", "share", "1-gpu", "2-gpu", "4-gpu"}
    assert min(kinds.values()) >= 30                         # every kind in earnest, even 4 GPUs
    assert {a.milli for a in asks if a.sharing} >= {100, 400, 800}
    assert {"|".join(a.models) for a in asks if a.models} == set(GPU_SHARE_MODELS)
    requests = [p["spec"]["containers"][0]["resources"]["requests"] for p in pods]
    by_resource = [r for r in requests if GPU in r]
    assert by_resource and all(r[GPU] == "1" for r in by_resource)     # some whole GPUs as nvidia.com/gpu
    classes = {(r["cpu"], a.milli, a.count, a.models) for r, a in zip(requests, asks, strict=True)}
    assert 30 <= len(classes) <= 200                         # a learned target workload of realistic size
    assert Counter(p["metadata"]["labels"][PHASE_LABEL] for p in pods) == {"init": 1000, "measure": 2000}
    assert W.expected_bound == W.measure_pods and W.gpu_share == "FGD"


def test_every_pod_fits_under_gpushare_fgd_and_the_checker_agrees():
    """The whole workload through pysched's default profile with GPUShare (FGD): every pod placed (a
    throughput benchmark), the placements and the GPUs chosen pass the independent checker."""
    cfg = parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                        "profiles": [pysched_profile("pysched", gpu_share="FGD")]})
    sim = OfflineScheduler(cfg, seed=1)
    nodes = [W.node(i) for i in range(W.nodes)]
    for n in nodes:
        sim.add_node(n)
    plugin = sim.frameworks["pysched"].plugins["GPUShare"]
    placed = []
    for pod in pods_of(W):
        pod["metadata"]["uid"] = pod["metadata"]["name"]
        out = sim.schedule(pod)
        assert out.node is not None, out.message
        pod["spec"]["nodeName"] = out.node
        held = plugin.devices_of(pod["metadata"]["uid"])
        if held:
            pod["metadata"].setdefault("annotations", {})[verify.GPU_INDEX] = ",".join(map(str, held))
        placed.append(pod)
    assert sum(verify.GPU_INDEX in (p["metadata"].get("annotations") or {}) for p in placed) > 2000
    assert verify.check_placements(nodes, placed) == []
    assert verify.check_gpu_share(nodes, placed) == []


def _gpu_pod(name: str, node: str, index: str | None, milli: int = 1000, count: int = 1, model: str = "") -> dict:
    ann = {GPU_MILLI: str(milli), GPU_COUNT: str(count)}
    if model:
        ann[GPU_MODEL] = model
    if index is not None:
        ann[verify.GPU_INDEX] = index
    pod = make_pod(name, annotations=ann)
    pod["spec"]["nodeName"] = node
    return pod


def test_gpu_share_checker_catches_each_violation():
    nodes = [make_node("n1", extended={GPU_COUNT: "2"}, labels={GPU_MODEL: "T4"}),
             make_node("n2", extended={GPU: "4"}, labels={GPU_MODEL: "G2"})]
    ok = [_gpu_pod("a", "n1", "0", 600), _gpu_pod("b", "n1", "0", 400), _gpu_pod("c", "n1", "1", 300, model="T4|G2"),
          _gpu_pod("d", "n2", "0,3", count=2), make_pod("cpu-only", node_name="n1"), _gpu_pod("pending", "", None)]
    whole = make_pod("whole", extended={GPU: "1"}, annotations={verify.GPU_INDEX: "1"}, node_name="n2")
    assert verify.check_gpu_share(nodes, [*ok, whole]) == []

    def kinds(*pods):
        return sorted(v.kind for v in verify.check_gpu_share(nodes, [*ok, *pods]))
    assert kinds(_gpu_pod("over", "n1", "0", 100)) == ["gpu-share"]             # GPU 0 of n1 at 1100/1000
    assert kinds(make_pod("over-whole", extended={GPU: "1"}, annotations={verify.GPU_INDEX: "0"},
                          node_name="n2")) == ["gpu-share"]                     # nvidia.com/gpu counted too
    assert kinds(_gpu_pod("model", "n1", "1", 100, model="G2")) == ["gpu-model"]
    assert kinds(_gpu_pod("unwritten", "n2", None)) == ["gpu-index"]
    assert kinds(_gpu_pod("past-the-end", "n1", "2")) == ["gpu-index"]
    assert kinds(_gpu_pod("too-few", "n2", "1", count=2)) == ["gpu-index"]
    assert kinds(_gpu_pod("twice", "n2", "1,1", count=2)) == ["gpu-index"]
    assert kinds(_gpu_pod("garbled", "n2", "one")) == ["gpu-index"]


def test_pysched_profile_adds_gpushare_with_the_policy_to_any_profile():
    p = pysched_profile("pysched", gpu_share="FGD")
    assert p["plugins"]["multiPoint"]["enabled"] == [{"name": "GPUShare"}]
    assert p["pluginConfig"] == [{"name": "GPUShare", "args": {"policy": "FGD"}}]
    topo = pysched_profile("pysched", "topology", gpu_share="BestFit")
    assert [c["name"] for c in topo["pluginConfig"]] == ["TopologyAwarePlacement", "GPUShare"]
    assert "GPUShare" not in str(pysched_profile("pysched"))
    cfg = parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                        "profiles": [p]})
    assert cfg.profiles[0].plugin_config["GPUShare"] == {"policy": "FGD"}


def test_gpushare_workload_runs_with_every_scheduler_in_the_default_list():
    assert W in plan.select_workloads("all")
    kinds = [p.kind for p in plan.runs([W], ["drain"], [(5000, 5000)], ["pysched", "kube-scheduler"], 1)]
    assert kinds == ["pysched", "kube-scheduler"]


def test_cycle_profiles_add_gpushare_with_a_policy():
    assert cycle.parse_profile("default") == ("default", "")
    assert cycle.parse_profile("default+GPUShare") == ("default", "FGD")
    assert cycle.parse_profile("shipped+GPUShare:BestFit") == ("shipped", "BestFit")
    for bad, match in (("fast", "unknown profile"), ("default+Coscheduling", "only GPUShare"),
                       ("default+GPUShare:Fastest", "unknown GPUShare policy")):
        with pytest.raises(ValueError, match=match):
            cycle.parse_profile(bad)


def test_cycle_benchmark_runs_the_gpushare_workload_with_and_without_gpushare(capsys):
    assert cycle.main(["--workload", "SchedulingGPUShare/1000Nodes", "--scale", "100,100,100", "--repeats", "1",
                       "--profiles", "default,default+GPUShare:FGD,default+GPUShare:BestFit"]) == 0
    out = capsys.readouterr().out
    runs = [line.split()[1:4] for line in out.splitlines() if line.startswith("run=")]
    assert runs == [[f"profile={p}", "pods=100", "scheduled=100"]
                    for p in ("default", "default+GPUShare:FGD", "default+GPUShare:BestFit")]
    assert "default+GPUShare:BestFit" in out.split("cycle CPU ms per pod")[1]
    with pytest.raises(SystemExit):
        cycle.main(["--profiles", "default+GPUShare:Fastest"])
