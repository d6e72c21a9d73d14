"""GPUShare, the plugin: what a pod asks (annotations, whole GPUs, errors naming the annotation),
the bound pods' index annotation; through the offline engine with only GPUShare scoring (the
config ``pysched trace`` uses): Filter's reasons in the FitError message, the GPUs Reserve holds and
Unreserve gives back, bound pods counted on their GPUs (with the index annotation, or on the
lowest-index GPUs that fit), holdings across a node removed and re-added, FGD's device chosen on
the node as it was scored; PreBind's annotation; the learned target workload (classes, coverage,
refresh, window) and the arguments' errors naming the field."""

import asyncio

import pytest

from pysched.apis import config as configmod
from pysched.apis.config.types import ConfigError
from pysched.framework import CycleState, PodInfo
from pysched.framework.args import load_args
from pysched.plugins.gpushare import GPUShare
from pysched.plugins.gpushare.args import GPUShareArgs
from pysched.plugins.gpushare.ask import NO_GPU, AskError, GPUAsk, parse_ask, parse_indices
from pysched.plugins.gpushare.workload import TargetWorkload, typical
from pysched.testing import PluginTester, make_node, make_pod
from pysched.tools.offline import OfflineScheduler
from pysched.tools.trace import replay

MILLI = "alibabacloud.com/gpu-milli"
COUNT = "alibabacloud.com/gpu-count"
MODEL = "alibabacloud.com/gpu-card-model"
INDEX = "alibabacloud.com/gpu-index"
NV = "nvidia.com/gpu"
WHOLE = (NV,)


def ask_of(annotations=None, gpus=None):
    pod = PodInfo.from_dict(make_pod("p", annotations=annotations, extended={NV: str(gpus)} if gpus else None))
    return parse_ask(pod, MILLI, COUNT, MODEL, WHOLE)


# -- what a pod asks ------------------------------------------------------------------------------

@pytest.mark.parametrize("annotations,gpus,expected", [
    ({MILLI: "300"}, None, GPUAsk(300, 1, ())),
    ({MILLI: " 300 ", COUNT: "1"}, None, GPUAsk(300, 1, ())),
    ({MILLI: "1000", COUNT: "4"}, None, GPUAsk(1000, 4, ())),
    ({MILLI: "500", MODEL: "T4|V100M16"}, None, GPUAsk(500, 1, ("T4", "V100M16"))),
    ({MILLI: "500", MODEL: "|T4||G2|"}, None, GPUAsk(500, 1, ("T4", "G2"))),
    ({MILLI: "500", MODEL: ""}, None, GPUAsk(500, 1, ())),
    (None, 2, GPUAsk(1000, 2, ())),                                 # whole GPUs: nvidia.com/gpu
    ({MODEL: "A10"}, 1, GPUAsk(1000, 1, ("A10",))),
    ({MILLI: "1000", COUNT: "2"}, 2, GPUAsk(1000, 2, ())),          # both, agreeing
    ({MILLI: "0"}, None, NO_GPU),
    ({MILLI: "700", COUNT: "0"}, None, NO_GPU),
    ({MILLI: "0"}, 1, GPUAsk(1000, 1, ())),
    ({MODEL: "T4"}, None, NO_GPU),
    (None, None, NO_GPU),
])
def test_ask(annotations, gpus, expected):
    assert ask_of(annotations, gpus) == expected


@pytest.mark.parametrize("annotations,gpus,message", [
    ({MILLI: "half"}, None, f"annotation {MILLI}: 'half' is not an integer"),
    ({MILLI: "0.5"}, None, f"annotation {MILLI}: '0.5' is not an integer"),
    ({MILLI: "300", COUNT: "two"}, None, f"annotation {COUNT}: 'two' is not an integer"),
    ({MILLI: "1001"}, None, f"annotation {MILLI}: 1001 is not between 0 and 1000"),
    ({MILLI: "-1"}, None, f"annotation {MILLI}: -1 is not between 0 and 1000"),
    ({MILLI: "300", COUNT: "-1"}, None, f"annotation {COUNT}: -1 is negative"),
    ({MILLI: "500", COUNT: "2"}, None, f"annotation {MILLI}: 500 with {COUNT} 2: a pod shares at most one GPU"),
    ({MILLI: "1000", COUNT: "2"}, 3, f"annotation {COUNT} (2) and the pod's whole-GPU request (3) disagree"),
])
def test_ask_errors_name_the_annotation(annotations, gpus, message):
    with pytest.raises(AskError) as e:
        ask_of(annotations, gpus)
    assert str(e.value).startswith(message)


def test_ask_kinds():
    assert GPUAsk(300, 1).sharing and GPUAsk(300, 1).tag == "share" and GPUAsk(300, 1).total == 300
    assert not GPUAsk(1000, 2).sharing and GPUAsk(1000, 2).tag == "2-gpu" and GPUAsk(1000, 2).total == 2000
    assert not NO_GPU.wants_gpu and GPUAsk(1000, 1).wants_gpu


@pytest.mark.parametrize("text,expected", [
    ("0", (0,)), ("2,3", (2, 3)), (" 1, 2 ", (1, 2)), ("1,,2", (1, 2)),
    (None, None), ("", None), (",", None), ("a", None), ("1,x", None), ("-1", None), ("0,-2", None),
])
def test_index_annotation(text, expected):
    assert parse_indices(text) == expected


def test_annotation_names_are_configurable():
    t = PluginTester(GPUShare, {"milliAnnotation": "example.com/milli", "countAnnotation": "example.com/n",
                                "modelAnnotation": "example.com/model", "wholeGpuResources": ["example.com/gpu"]})
    pod = PodInfo.from_dict(make_pod("p", annotations={"example.com/milli": "1000", "example.com/n": "2",
                                                       "example.com/model": "X", MILLI: "300"}))
    assert t.plugin.ask_of(pod) == GPUAsk(1000, 2, ("X",))
    pod = PodInfo.from_dict(make_pod("q", extended={"example.com/gpu": "1", NV: "3"}))
    assert t.plugin.ask_of(pod) == GPUAsk(1000, 1, ())


# -- through the offline engine ---------------------------------------------------------------------

def offline(policy="BestFit", profile_name=None, **args):
    """An offline scheduler whose only score is GPUShare's (as ``pysched trace`` configures it)."""
    cfg = replay.profile_config("BestFit")
    if profile_name:
        cfg["profiles"][0]["schedulerName"] = profile_name
    cfg["profiles"][0]["pluginConfig"][0]["args"].update(policy=policy, **args)
    s = OfflineScheduler(configmod.parse(cfg), seed=0)
    plugin = s.frameworks[profile_name or replay.SCHEDULER].plugins["GPUShare"]
    assert isinstance(plugin, GPUShare)
    plugin.rng.seed(0)
    return s, plugin


def gpu_node(name, gpus, model="A", cpu="32", resource=COUNT):
    return make_node(name, cpu=cpu, memory="64Gi", labels={MODEL: model} if model else None,
                     extended={resource: str(gpus)} if gpus else None)


def gpu_pod(name, milli=None, count=None, model=None, node=None, index=None, cpu="1", uid=None, gpus=None):
    ann = {}
    if milli is not None:
        ann[MILLI] = str(milli)
    if count is not None:
        ann[COUNT] = str(count)
    if model is not None:
        ann[MODEL] = model
    if index is not None:
        ann[INDEX] = index
    p = make_pod(name, scheduler=replay.SCHEDULER, cpu=cpu, memory="1Gi", annotations=ann or None, node_name=node,
                 extended={NV: str(gpus)} if gpus else None)
    p["metadata"]["uid"] = uid or f"uid-{name}"
    return p


def left(plugin, node):
    """The free share of each GPU of ``node`` (the table synced first, as every extension point does)."""
    t = plugin.table
    t.sync(plugin.handle.all_nodes())
    r = t.row(node)
    return t.left[r, :int(t.count[r])].tolist()


def test_filter_reasons_in_the_fit_error():
    s, plugin = offline()
    s.add_node(gpu_node("none", 0))
    s.add_node(gpu_node("b", 2, model="B"))
    s.add_node(gpu_node("unlabelled", 2, model=None))
    s.add_node(gpu_node("a1", 1))
    s.add_node(gpu_node("a2", 2, resource=NV))
    s.add_pod(gpu_pod("held", 700, node="a1", index="0"))
    s.add_pod(gpu_pod("held2", 1000, count=2, node="a2", index="0,1"))
    out = s.schedule(gpu_pod("p", 600, model="A"))
    assert out.node is None
    assert out.message == ("0/5 nodes are available: 1 node(s) had no GPUs, 2 Insufficient GPU share, "
                           "2 node(s) didn't have the GPU model the pod asks for.")
    # without a model: the B and unlabelled nodes fit
    assert s.schedule(gpu_pod("q", 600)).node in ("b", "unlabelled")
    # a CPU-only pod passes GPUShare's filter everywhere
    assert s.schedule(gpu_pod("c")).node is not None
    out = s.schedule(gpu_pod("bad", "lots"))
    assert out.node is None and f"annotation {MILLI}: 'lots' is not an integer" in out.message


def test_reserve_holds_the_gpus_and_unreserve_gives_them_back():
    t = PluginTester(GPUShare, {"policy": "BestFit"}, nodes=[gpu_node("n", 4)])
    pod = gpu_pod("p", 1000, count=2)
    assert t.reserve(pod, "n") is None
    assert left(t.plugin, "n") == [0, 0, 1000, 1000]
    assert t.plugin.devices_of("uid-p") == (0, 1)
    t.unreserve(pod, "n")
    assert left(t.plugin, "n") == [1000] * 4 and t.plugin.devices_of("uid-p") is None
    # a pod sharing a GPU: the tightest that fits
    assert t.reserve(gpu_pod("x", 600), "n") is None
    assert t.reserve(gpu_pod("y", 300), "n") is None
    assert left(t.plugin, "n") == [100, 1000, 1000, 1000]
    st = t.reserve(gpu_pod("z", 1000, count=4), "n")
    assert st is not None and "Insufficient GPU share on node n" in st.message()
    assert left(t.plugin, "n") == [100, 1000, 1000, 1000]


def test_placed_pods_hold_their_gpus_until_gone():
    s, plugin = offline()
    s.add_node(gpu_node("n", 2))
    assert s.schedule(gpu_pod("a", 600)).node == "n"
    assert s.schedule(gpu_pod("b", 600)).node == "n"
    assert left(plugin, "n") == [400, 400]
    assert s.schedule(gpu_pod("c", 500)).node is None
    s.remove_pod("uid-a")
    assert left(plugin, "n") == [1000, 400]
    assert s.schedule(gpu_pod("c", 500)).node == "n"
    assert plugin.devices_of("uid-c") == (0,) and left(plugin, "n") == [500, 400]


def test_bound_pod_with_the_index_annotation_is_counted_on_its_gpus():
    s, plugin = offline()
    s.add_node(gpu_node("n", 4))
    s.add_pod(gpu_pod("shared", 300, node="n", index="2"))
    s.add_pod(gpu_pod("whole", 1000, count=2, node="n", index="0,3"))
    assert left(plugin, "n") == [0, 1000, 700, 0]
    assert plugin.devices_of("uid-shared") == (2,)
    # the next 600 goes to GPU 2 (the tightest that fits), a 2-GPU pod no longer fits
    assert s.schedule(gpu_pod("p", 600)).node == "n" and plugin.devices_of("uid-p") == (2,)
    assert s.schedule(gpu_pod("q", 1000, count=2)).node is None
    # the pod's annotation changed (re-bound elsewhere on the node by its device plugin): moved
    s.add_pod(gpu_pod("shared", 300, node="n", index="1"))
    assert left(plugin, "n") == [0, 700, 400, 0]
    s.remove_pod("uid-whole")
    assert left(plugin, "n") == [1000, 700, 400, 1000]


def test_bound_gpu_pod_without_the_annotation_takes_the_lowest_gpus_that_fit():
    s, plugin = offline()
    s.add_node(gpu_node("n", 4))
    s.add_pod(gpu_pod("a", 700, node="n", index="0"))
    s.add_pod(gpu_pod("b", 500, node="n"))                         # GPU 0 has 300: GPU 1
    assert plugin.devices_of("uid-b") == (1,)
    s.add_pod(gpu_pod("c", 200, node="n"))                         # GPU 0 fits: the lowest index
    assert plugin.devices_of("uid-c") == (0,)
    s.add_pod(gpu_pod("d", node="n", gpus=2))                      # nvidia.com/gpu: 2 whole GPUs
    assert plugin.devices_of("uid-d") == (2, 3)
    assert left(plugin, "n") == [100, 500, 0, 0]
    s.add_pod(gpu_pod("e", 1000, node="n"))                        # fits nowhere: not counted
    assert plugin.devices_of("uid-e") is None and left(plugin, "n") == [100, 500, 0, 0]
    # seen again (an update), still without the annotation: where it was counted
    s.add_pod(gpu_pod("c", 200, node="n", cpu="2"))
    assert plugin.devices_of("uid-c") == (0,) and left(plugin, "n") == [100, 500, 0, 0]


def test_node_removed_and_readded_keeps_the_holdings():
    s, plugin = offline()
    s.add_node(gpu_node("n1", 2))
    s.add_node(gpu_node("n2", 2))
    s.add_pod(gpu_pod("a", 600, node="n1", index="1"))
    assert s.schedule(gpu_pod("b", 1000)).node in ("n1", "n2")
    before = {n: left(plugin, n) for n in ("n1", "n2")}
    s.remove_node("n1")
    s.add_node(gpu_node("n3", 4))
    assert s.schedule(gpu_pod("c", 1000, count=2)).node in ("n2", "n3")
    assert left(plugin, "n2") == held(plugin, "n2", 2) and left(plugin, "n3") == held(plugin, "n3", 4)
    s.add_node(gpu_node("n1", 2))
    assert left(plugin, "n1") == before["n1"] == held(plugin, "n1", 2)
    s.remove_pod("uid-a")
    assert left(plugin, "n1") == [before["n1"][0], 1000]
    for n, g in (("n1", 2), ("n2", 2), ("n3", 4)):
        assert left(plugin, n) == held(plugin, n, g)
    assert plugin.table.rebuilds >= 3


def held(plugin, node, gpus):
    """``node``'s GPUs as the holdings say."""
    out = [1000] * gpus
    for h in plugin.table.holdings.values():
        if h.node == node:
            for d in h.devices:
                out[d] -= h.milli
    return out


def test_node_relabelled_to_another_model_is_filtered_by_it():
    s, _ = offline()
    s.add_node(gpu_node("n", 1, model="B"))
    assert s.schedule(gpu_pod("p", 500, model="A")).node is None
    s.add_node(gpu_node("n", 1, model="A"))
    assert s.schedule(gpu_pod("q", 500, model="A")).node == "n"


def test_fgd_reserves_the_gpu_that_scored_the_node():
    # Workload: (4000m, 500 of a GPU) and (0m, 300), half each. Node: 6000m, GPUs left [300, 500].
    # The pod: 200 of a GPU, 2000m. F before = 0.5*300 (the 300 GPU is too small for 500) + 0 = 150.
    # On GPU 0: [100, 500], 4000m left: 0.5*100 + 0.5*100 = 100, dF 50 -> 51.
    # On GPU 1: [300, 300]: no GPU for 500: 0.5*600 + 0 = 300, dF -150 -> 46. GPU 0.
    # (Measured with the pod's CPU taken twice - 2000m left - the first class could not run after
    # either choice and GPU 1 would win, 46 to 45.)
    s, plugin = offline("FGD", targetWorkload="Stated", classes=[
        {"milliCPU": 4000, "gpuMilli": 500, "gpuCount": 1}, {"milliCPU": 0, "gpuMilli": 300, "gpuCount": 1}])
    s.add_node(gpu_node("n", 2, cpu="6"))
    s.add_pod(gpu_pod("a", 700, node="n", index="0", cpu=None))
    s.add_pod(gpu_pod("b", 500, node="n", index="1", cpu=None))
    out = s.schedule(gpu_pod("p", 200, cpu="2"))
    assert out.node == "n" and plugin.devices_of("uid-p") == (0,)
    assert left(plugin, "n") == [100, 500]


def test_fgd_scores_nodes_by_the_drop_in_fragmentation():
    # Workload: (0m, 500 of a GPU) only. n1 [1000, 1000]: F 0; n2 [1000, 300]: F 300 (too small for 500).
    # A 200 pod: n1 -> [800, 1000]: dF 0 -> 50; n2 GPU 0 -> [800, 300]: dF 0 -> 50; GPU 1 -> [1000, 100]:
    # F 100, dF 200 -> int(100 sigmoid(0.2)) = 54: n2, GPU 1.
    # Then a 700 pod: n1 -> [300, 1000]: F 300, dF -300 -> int(100 sigmoid(-0.3)) = 42; n2 GPU 0 ->
    # [300, 100]: no GPU fits 500: F 400, dF -300 -> 42: a tie, broken by name (the rank): n1.
    s, plugin = offline("FGD", targetWorkload="Stated", classes=[{"gpuMilli": 500, "gpuCount": 1}])
    s.add_node(gpu_node("n1", 2))
    s.add_node(gpu_node("n2", 2))
    s.add_pod(gpu_pod("a", 700, node="n2", index="1", cpu=None))
    assert s.schedule(gpu_pod("q", 200)).node == "n2" and plugin.devices_of("uid-q") == (1,)
    assert s.schedule(gpu_pod("p", 700)).node == "n1" and plugin.devices_of("uid-p") == (0,)


def test_ties_go_to_the_smallest_node_name():
    s, _ = offline("GpuPacking")
    for name in ("n3", "n1", "n2"):
        s.add_node(gpu_node(name, 2))
    assert s.schedule(gpu_pod("p", 500)).node == "n1"
    # 31 (33 - 2 GPUs) on the empty nodes, max(50 - 1, 33) = 49 for a whole GPU of the used n1
    assert s.schedule(gpu_pod("q", 1000)).node == "n1"
    assert s.schedule(gpu_pod("r", 1000)).node == "n2"


# -- PreBind ----------------------------------------------------------------------------------------

class Recorder:
    def __init__(self):
        self.calls = []
        self.binds = []

    async def bind_pod(self, namespace, name, uid, node, timeout=None, annotations=None):
        self.binds.append((namespace, name, uid, node, annotations))

    async def request(self, method, path, *, body=None, content_type="application/json", **_):
        self.calls.append((method, path, body, content_type))
        return {}


def test_the_gpu_indices_go_with_the_binding_by_default():
    from pysched.framework.bindmeta import bind_annotations
    from pysched.plugins.default_binder import DefaultBinder

    t = PluginTester(GPUShare, {"policy": "BestFit"}, nodes=[gpu_node("n", 4)])
    t.plugin.handle.client = Recorder()
    nodes = t.nodes()
    pod = PodInfo.from_dict(gpu_pod("w", 1000, count=2), keep_raw=True)
    state = CycleState()
    t.plugin.pre_filter(state, pod, nodes)
    assert t.plugin.reserve(state, pod, "n") is None
    assert bind_annotations(state) == {INDEX: "0,1"}
    st = asyncio.run(t.plugin.pre_bind(state, pod, "n"))
    assert st is not None and st.code.name == "SKIP" and t.plugin.handle.client.calls == []   # no patch
    # DefaultBinder sends them in the Binding; an Unreserve takes them back
    binder = DefaultBinder(None, t.plugin.handle)
    asyncio.run(binder.bind(state, pod, "n"))
    assert t.plugin.handle.client.binds == [("default", "w", "uid-w", "n", {INDEX: "0,1"})]
    t.plugin.unreserve(state, pod, "n")
    assert bind_annotations(state) == {}


def test_prebind_writes_the_gpu_indices():
    t = PluginTester(GPUShare, {"policy": "BestFit", "indexInBinding": False}, nodes=[gpu_node("n", 4)])
    t.plugin.handle.client = Recorder()
    nodes = t.nodes()
    calls = t.plugin.handle.client.calls
    for name, raw in (("w", gpu_pod("w", 1000, count=2)), ("s", gpu_pod("s", 300)), ("c", gpu_pod("c"))):
        pod = PodInfo.from_dict(raw, keep_raw=True)
        state = CycleState()
        t.plugin.pre_filter(state, pod, nodes)
        assert t.plugin.reserve(state, pod, "n") is None
        st = asyncio.run(t.plugin.pre_bind(state, pod, "n"))
        if name == "c":
            assert st is not None and st.code.name == "SKIP"
    assert calls == [
        ("PATCH", "/api/v1/namespaces/default/pods/w", {"metadata": {"annotations": {INDEX: "0,1"}}},
         "application/merge-patch+json"),
        ("PATCH", "/api/v1/namespaces/default/pods/s", {"metadata": {"annotations": {INDEX: "2"}}},
         "application/merge-patch+json")]


# -- the learned target workload --------------------------------------------------------------------

def test_typical_classes_cover_the_share_asked():
    counts = {(1000, 500, 1, ()): 50, (2000, 1000, 1, ()): 30, (0, 0, 0, ()): 15, (500, 200, 1, ("T4",)): 5}
    c = typical(counts, 0.95)
    assert c is not None and len(c) == 3                   # 50 + 30 + 15 = 95 % of 100
    assert c.weight.tolist() == [50 / 95, 30 / 95, 15 / 95]
    assert c.cpu.tolist() == [1000, 2000, 0]
    assert len(typical(counts, 0.8)) == 2 and len(typical(counts, 0.81)) == 3
    assert len(typical(counts, 1.0)) == 4
    # equal counts: larger CPU first
    c = typical({(1000, 500, 1, ()): 1, (3000, 500, 1, ()): 1, (2000, 500, 1, ()): 1}, 0.5)
    assert c is not None and c.cpu.tolist() == [3000, 2000]
    assert typical({}, 0.95) is None


def test_learned_workload_counts_each_pod_once():
    wl = TargetWorkload(0.95, 20000)
    for _ in range(3):
        wl.observe("a", 1000, GPUAsk(500, 1, ("B", "A")))
    wl.observe("b", 1000, GPUAsk(500, 1, ("A", "B")))
    wl.observe("c", 0, NO_GPU)
    assert wl.counts == {(1000, 500, 1, ("A", "B")): 2.0, (0, 0, 0, ()): 1.0}
    assert wl.classes is not None and wl.classes.weight.tolist() == [2 / 3, 1 / 3]


def test_learned_workload_refreshes_when_the_pods_grow_by_a_tenth():
    wl = TargetWorkload(0.95, 10**6)
    refreshed, version = [], wl.version
    for i in range(1, 12_001):
        wl.observe(f"p{i}", 1000, GPUAsk(500, 1))
        if wl.version != version:
            refreshed.append(i)
            version = wl.version
    # every pod up to 11 (each grows the count by at least a tenth), then 13 (>= 12.1), 15, 17, 19,
    # 21, 24 (>= 23.1), 27, 30, ...; past 10,000 pods every 1,000
    assert refreshed[:18] == [*range(1, 12), 13, 15, 17, 19, 21, 24, 27]
    for a, b in zip(refreshed, refreshed[1:]):
        assert b == min(-(-a * 11 // 10), a + 1000)
    assert refreshed[-1] - refreshed[-2] == 1000


def test_learned_workload_halves_past_the_window():
    wl = TargetWorkload(0.95, 100)
    for i in range(60):
        wl.observe(f"x{i}", 1000, GPUAsk(500, 1))
    for i in range(41):
        wl.observe(f"y{i}", 2000, GPUAsk(1000, 1))
    assert wl.counts == {(1000, 500, 1, ()): 30.0, (2000, 1000, 1, ()): 20.5}
    assert wl.classes is not None and wl.classes.weight.tolist() == [30 / 50.5, 20.5 / 50.5]
    wl.observe("x0", 1000, GPUAsk(500, 1))                 # forgotten: counted again
    assert wl.counts[(1000, 500, 1, ())] == 31.0


def test_stated_workload_does_not_learn():
    wl = TargetWorkload(0.95, 100, [((0, 500, 1, ()), 1.0), ((0, 0, 0, ()), 3.0)])
    wl.observe("a", 1000, GPUAsk(300, 1))
    assert wl.counts == {} and wl.version == 1
    assert wl.classes is not None and wl.classes.weight.tolist() == [0.75, 0.25]   # both kept: coverage 1


def test_plugin_learns_from_the_pods_it_schedules_and_sees_pending():
    s, plugin = offline("FGD")
    s.add_node(gpu_node("n", 1))
    s.add_pod(gpu_pod("bound", 500, node="n", index="0"))        # bound pods are not learned from
    for _ in range(2):                                            # tried twice: counted once
        s.schedule(gpu_pod("big", 1000, count=2, uid="u-big"))
    s.observe_pending(gpu_pod("waiting", 300, cpu="2"))
    assert s.schedule(gpu_pod("small", 200)).node == "n"
    assert plugin.workload.counts == {(1000, 1000, 2, ()): 1.0, (2000, 300, 1, ()): 1.0, (1000, 200, 1, ()): 1.0}


# -- arguments ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw,message", [
    ({"policy": "Best"}, "args.policy"),
    ({"milliAnnotation": ""}, "args.milliAnnotation: Required value"),
    ({"indexAnnotation": ""}, "args.indexAnnotation: Required value"),
    ({"modelLabel": ""}, "args.modelLabel: Required value"),
    ({"wholeGpuResources": ["nvidia.com/gpu", "gpu"]},
     "args.wholeGpuResources[1]: 'gpu' is not an extended resource name (domain/name)"),
    ({"nodeGpuResources": []}, "args.nodeGpuResources: Required value"),
    ({"targetWorkload": "Stated"}, "args.classes: Required value (targetWorkload is Stated)"),
    ({"targetWorkload": "Stated", "classes": [{"gpuCount": 1}, {"gpuMilli": 500}]},
     "args.classes[0]: gpuMilli and gpuCount are both 0 or both set"),
    ({"targetWorkload": "Stated", "classes": [{"gpuMilli": 500, "gpuCount": 2}]},
     "args.classes[0].gpuMilli: must be 1000 when gpuCount > 1"),
    ({"targetWorkload": "Stated", "classes": [{"gpuMilli": 1001, "gpuCount": 1}]}, "args.classes[0].gpuMilli"),
    ({"targetWorkload": "Stated", "classes": [{"gpuMilli": 500, "gpuCount": 1, "weight": -1}]},
     "args.classes[0].weight"),
    ({"targetWorkload": "Stated", "classes": [{"gpuMilli": 500, "gpuCount": 1, "weight": 0}]},
     "args.classes: the weights sum to 0"),
    ({"classes": [{"gpuMilli": 500, "gpuCount": 1}]}, "args.classes: only with targetWorkload: Stated"),
    ({"targetWorkloadCoverage": 0}, "args.targetWorkloadCoverage"),
    ({"learningWindow": 10}, "args.learningWindow"),
])
def test_argument_errors_name_the_field(raw, message):
    with pytest.raises(ConfigError) as e:
        load_args(GPUShareArgs, raw, "args")
    assert message in str(e.value)


def test_argument_errors_name_the_field_in_the_profile():
    cfg = replay.profile_config("BestFit")
    cfg["profiles"][0]["pluginConfig"][0]["args"].update(targetWorkload="Stated")
    with pytest.raises(ConfigError, match=r"profiles\[0\]\.pluginConfig\[0\]\.args\.classes: Required value"):
        OfflineScheduler(configmod.parse(cfg))


def test_defaults():
    a = load_args(GPUShareArgs, None, "args")
    assert (a.policy, a.target_workload, a.target_workload_coverage) == ("FGD", "Learned", 0.95)
    assert (a.milli_annotation, a.count_annotation, a.model_annotation, a.index_annotation, a.model_label) == (
        MILLI, COUNT, MODEL, INDEX, MODEL)
    assert a.whole_gpu_resources == [NV] and a.node_gpu_resources == [COUNT, NV]


def test_random_policy_places_on_any_fitting_node():
    s, _ = offline("Random")
    for name in ("a", "b", "c", "d"):
        s.add_node(gpu_node(name, 1))
    s.add_pod(gpu_pod("full", 1000, node="d", index="0"))
    got = {s.schedule(gpu_pod(f"p{i}", 100, uid=f"u{i}")).node for i in range(30)}
    assert got == {"a", "b", "c"}


def test_an_index_past_the_nodes_gpus_frees_no_phantom_gpu():
    # n has 2 GPUs, m 4 (the table is 4 GPUs wide). A bound pod naming GPU 3 of n holds nothing
    # there, and gives nothing back when it goes: n's two GPUs stay full.
    s, plugin = offline()
    s.add_node(gpu_node("n", 2))
    s.add_node(gpu_node("m", 4))
    s.add_pod(gpu_pod("w", 1000, count=2, node="n", index="0,1"))
    s.add_pod(gpu_pod("bogus", 500, node="n", index="3"))
    s.remove_pod("uid-bogus")
    assert plugin.table.left[plugin.table.row("n")].tolist() == [0, 0, 0, 0]
    out = s.schedule(gpu_pod("p", 500))
    assert out.node == "m", out.message


def test_index_annotation_in_the_simulators_dash_form():
    assert parse_indices("2-3") == (2, 3)
    assert parse_indices("2-") is None and parse_indices("-2") is None


# -- ties: GPUShare's own order ---------------------------------------------------------------------

@pytest.mark.parametrize("tie_break,spread", [("NodeHash", False), ("NodeName", False), ("Scheduler", True)])
def test_ties_go_to_a_fixed_node_order_unless_left_to_the_scheduler(tie_break, spread):
    # policy None scores every node 0: every pod's choice is a tie among all the nodes that fit.
    s, _ = offline(policy="None", tieBreak=tie_break)
    for name in ("n1", "n2", "n3", "n4"):
        s.add_node(gpu_node(name, 1, cpu="32"))
    nodes = [s.schedule(gpu_pod(f"p{i}", cpu="1")).node for i in range(8)]
    assert (len(set(nodes)) > 1) == spread, nodes
    if tie_break == "NodeName":
        assert set(nodes) == {"n1"}


def test_a_cpu_pod_prefers_the_tied_node_whose_gpus_are_busy():
    for busy in ("n1", "n2"):
        s, _ = offline(policy="None", tieBreak="NodeName", cpuPodsToBusyGPUNodes=True)
        s.add_node(gpu_node("n1", 2))
        s.add_node(gpu_node("n2", 2))
        s.add_pod(gpu_pod("gpu", 1000, count=2, node=busy, index="0,1"))
        assert s.schedule(gpu_pod("cpu-only")).node == busy
        # a GPU pod is not steered by it, and neither is a CPU pod when the option is off
        s2, _ = offline(policy="None", tieBreak="NodeName", cpuPodsToBusyGPUNodes=False)
        s2.add_node(gpu_node("n1", 2))
        s2.add_node(gpu_node("n2", 2))
        s2.add_pod(gpu_pod("gpu", 500, node=busy, index="0"))
        assert s2.schedule(gpu_pod("cpu-only")).node == "n1"


def test_the_tie_break_never_lifts_a_node_above_a_better_scored_one():
    # BestFit: the fuller node scores higher; the tie-break must not reorder unequal scores.
    s, _ = offline(policy="BestFit", tieBreak="NodeName")
    s.add_node(gpu_node("a", 2))
    s.add_node(gpu_node("b", 2))
    s.add_pod(gpu_pod("held", 500, node="b", index="0"))
    assert s.schedule(gpu_pod("p", 300)).node == "b"


def test_gpus_exported_when_scraped():
    from pysched.metrics import METRICS

    s, _ = offline(policy="FGD", targetWorkload="Learned", tieBreak="NodeName", profile_name="gpu-metrics")
    s.add_node(gpu_node("n1", 4))
    s.add_node(gpu_node("n2", 2))
    assert s.schedule(gpu_pod("whole", 1000, count=2)).node
    assert s.schedule(gpu_pod("share", 300)).node
    reg = METRICS.registry

    def sample(name, **labels):
        return reg.get_sample_value(name, {"profile": "gpu-metrics", **labels})

    assert [sample("pysched_gpus", state=st) for st in ("free", "partial", "full")] == [3, 1, 2]
    assert sample("pysched_gpu_allocated_ratio") == pytest.approx(2300 / 6000)
    frag = sample("pysched_gpu_fragmented_ratio")
    assert frag is not None and 0 <= frag <= 1
