"""The simulate HTML report in headless Chromium, at 7 and at 5,000 nodes.

``pysched simulate --output json --report`` runs over the example cluster and over a synthetic
5,000-node snapshot (three zones, four instance types one of them with GPUs, spot and on-demand
nodes, a bound pod per node, 2,000 pods to place of which some cannot fit). Chromium renders the
page (``--dump-dom`` after the script ran, ``--screenshot`` at 1400x2000) and the test checks, against
simulate's own JSON: the summary numbers, the unschedulable reasons, the zone heatmap, the row counts
of the node and pod tables (all rows known, one page in the DOM), the filter/score matrix of the
explained pods, a filtered and a sorted view (set from the URL fragment), no script error, and a
bounded page height. A third test renders a synthetic result of 5,000 nodes and 20,000 pods.

Screenshots are written under the test's tmp dir; with ``PYSCHED_UPDATE_DOCS=1`` they are also
copied to ``docs/report-7-nodes.png`` and ``docs/report-5000-nodes.png``.
"""

from __future__ import annotations

import asyncio
import html as htmllib
import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from pysched.testing.objects import make_node, make_pod

from .conftest import REPO

pytestmark = pytest.mark.e2e
ZONE = "topology.kubernetes.io/zone"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
GPU = "nvidia.com/gpu"
MAX_HEIGHT_PX = 6000
PAGE_SIZE = 25
# instance type, cpu, memory, GPUs
TYPES = [("m5.2xlarge", "8", "32Gi", None), ("c5.4xlarge", "16", "32Gi", None), ("r5.2xlarge", "8", "64Gi", None),
         ("p4d.24xlarge", "96", "1152Gi", "8")]


def chromium() -> str:
    browser = os.environ.get("PYSCHED_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        if os.environ.get("PYSCHED_REQUIRE_CHROMIUM"):
            pytest.fail("no Chromium: hack/chromium.sh could not provide one")
        pytest.skip("no Chromium (make test installs it via hack/chromium.sh)")
    return browser


def browse(browser: str, tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           "--enable-logging=stderr", "--v=0", f"--user-data-dir={tmp_path / 'chromium'}",
                           "--virtual-time-budget=20000", *args, url], capture_output=True, text=True, timeout=180)


async def render(browser: str, tmp_path: Path, report: Path, fragment: str = "") -> str:
    """The DOM after the script ran; fails on a script error (the page's marker or the console)."""
    proc = await asyncio.to_thread(browse, browser, tmp_path, report.as_uri() + fragment, "--dump-dom")
    dom = proc.stdout
    assert 'data-render="ok"' in dom, dom[-2000:] + proc.stderr[-3000:]
    console = [line for line in proc.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert not [c for c in console if "Uncaught" in c or "Error" in c], console
    return dom


async def screenshot(browser: str, tmp_path: Path, report: Path, name: str) -> Path:
    shot = tmp_path / name
    proc = await asyncio.to_thread(browse, browser, tmp_path, report.as_uri(), f"--screenshot={shot}",
                                   "--window-size=1400,2000", "--hide-scrollbars")
    assert shot.exists() and shot.stat().st_size > 10_000, proc.stderr[-3000:]
    if os.environ.get("PYSCHED_UPDATE_DOCS"):
        (REPO / "docs").mkdir(exist_ok=True)
        shutil.copy(shot, REPO / "docs" / name)
    return shot


def simulate(tmp_path: Path, cluster: Path, pods: Path, *extra: str) -> tuple[dict, Path]:
    report = tmp_path / "report.html"
    proc = subprocess.run([sys.executable, "-m", "pysched", "simulate", "--cluster", str(cluster), "--pods", str(pods),
                           "--output", "json", "--report", str(report), *extra],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode in (0, 1), proc.stderr
    (tmp_path / "simulate.json").write_text(proc.stdout)
    return json.loads(proc.stdout), report


# -- reading the DOM ---------------------------------------------------------------------------

def attr(dom: str, element_id: str, name: str) -> str:
    m = re.search(rf'<[a-z]+ [^>]*id="{element_id}"[^>]*>', dom)
    assert m, f"no element #{element_id}"
    value = re.search(rf'{name}="([^"]*)"', m.group(0))
    assert value, f"#{element_id} has no {name}"
    return value.group(1)


def table_rows(dom: str, element_id: str) -> list[list[str]]:
    """The text of each body row's cells of the table with that id."""
    m = re.search(rf'<table [^>]*id="{element_id}"[^>]*>(.*?)</table>', dom, re.S)
    assert m, f"no table #{element_id}"
    rows = []
    for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", m.group(1), re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)
        if cells:
            rows.append([htmllib.unescape(re.sub(r"<[^>]+>", "", c)) for c in cells])
    return rows


def card(dom: str, key: str) -> str:
    m = re.search(rf'<b class="value" data-key="{key}">([^<]*)</b>', dom)
    assert m, f"no summary card {key}"
    return m.group(1)


def floor_pct(used: int, alloc: int) -> str:
    return f"{math.floor(100.0 * used / alloc)}%" if alloc else "n/a"


def check_report(dom: str, out: dict) -> None:
    """The page against simulate's JSON: summary, reasons, zone heatmap, tables, explain matrices."""
    placements = out["placements"]
    placed = sum(1 for p in placements if p["node"])
    assert card(dom, "pods") == str(len(placements))
    assert card(dom, "placed") == str(placed)
    assert card(dom, "unschedulable") == str(len(placements) - placed)
    messages = [p["message"] for p in placements if not p["node"]]
    reasons = table_rows(dom, "reason-table") if messages else []
    assert sum(int(n) for _, n in reasons) >= len(messages)
    for reason, pods in reasons:  # each reason row counts the unplaced pods whose message gives it
        assert sum(1 for m in messages if reason in m) == int(pods), reason

    before, after = out["utilisation"]["before"], out["utilisation"]["after"]
    heat = {row[0]: row for row in table_rows(dom, "heat-zone")}
    for b, a in zip(before["zones"], after["zones"]):
        row = heat[b["zone"] or "(no zone)"]
        assert row[1] == str(b["nodes"])
        for i, r in enumerate(before["resources"]):
            want = "n/a" if not a["allocatable"][r] else (
                f"{floor_pct(b['requested'][r], b['allocatable'][r])} \u2192 "
                f"{floor_pct(a['requested'][r], a['allocatable'][r])}")
            assert row[2 + i] == want, (b["zone"], r)

    nodes = len(after["nodes"])
    assert attr(dom, "nodes", "data-total") == attr(dom, "nodes", "data-matching") == str(nodes)
    assert int(attr(dom, "nodes", "data-shown")) == len(table_rows(dom, "nodes")) == min(PAGE_SIZE, nodes)
    assert attr(dom, "pods", "data-total") == attr(dom, "pods", "data-matching") == str(len(placements))
    assert int(attr(dom, "pods", "data-shown")) == len(table_rows(dom, "pods")) == min(PAGE_SIZE, len(placements))

    for n, trace in enumerate(out["explain"].values()):  # the page lists them in simulate's order
        assert attr(dom, f"explained-{n}", "data-pod") == trace["pod"]
        if trace["selectedNode"]:
            scored = {row[0]: row for row in table_rows(dom, f"score-matrix-{n}")}
            assert trace["selectedNode"] in scored
            assert scored[trace["selectedNode"]][1] == str(trace["totalScores"][trace["selectedNode"]])
        failures = Counter((f["plugin"], v) for f in trace["filter"] for v in f["nodes"].values() if v != "passed")
        if failures:
            shown = {(row[0], row[1]): int(row[2]) for row in table_rows(dom, f"filter-matrix-{n}")}
            assert shown == dict(failures)

    assert page_height(dom) < MAX_HEIGHT_PX


def page_height(dom: str) -> int:
    m = re.search(r'<body[^>]*data-height="(\d+)"', dom)
    assert m, "no data-height on <body>"
    return int(m.group(1))


# -- 7 nodes -----------------------------------------------------------------------------------

async def test_report_at_7_nodes(tmp_path):
    browser = chromium()
    examples = REPO / "examples"
    out, report = simulate(tmp_path, examples / "simulate" / "snapshot.yaml", examples / "simulate" / "pods.yaml",
                           "--config", str(examples / "scheduler-config.yaml"), "--explain", "shop/web-0",
                           "--explain", "batch/too-big")
    dom = await render(browser, tmp_path, report)
    check_report(dom, out)
    assert table_rows(dom, "reason-table") == [["Insufficient cpu", "1"], ["node(s) had untolerated taint(s)", "1"]]
    by_type = {row[0]: row[1] for row in table_rows(dom, "heat-instance-type")}
    assert sum(int(n) for n in by_type.values()) == 7
    assert 'class="bar after"' in dom  # the per-node bar charts of the small-cluster view are kept
    await screenshot(browser, tmp_path, report, "report-7-nodes.png")


# -- 5,000 nodes -------------------------------------------------------------------------------

def big_cluster(n_nodes: int) -> tuple[list[dict], list[dict]]:
    """Nodes over three zones and four instance types (1 in 25 with 8 GPUs), a fifth spot (Karpenter's
    label, every tenth via EKS's), each with one bound pod of 1-4 CPUs."""
    nodes, bound = [], []
    for i in range(n_nodes):
        kind, cpu, mem, gpus = TYPES[3] if i % 25 == 0 else TYPES[i % 3]
        labels = {ZONE: f"eu-west-1{'abc'[i % 3]}", INSTANCE_TYPE: kind}
        if i % 10 == 1:
            labels["eks.amazonaws.com/capacityType"] = "ON_DEMAND"
        else:
            labels["karpenter.sh/capacity-type"] = "spot" if i % 5 == 0 else "on-demand"
        name = f"node-{i:05d}"
        nodes.append(make_node(name, cpu=cpu, memory=mem, labels=labels, extended={GPU: gpus} if gpus else None))
        bound.append(make_pod(f"existing-{i:05d}", namespace="running", cpu=str(1 + i % 4), memory="4Gi",
                              node_name=name, scheduler="default-scheduler"))
    return nodes, bound


def big_workload(n_pods: int) -> list[dict]:
    pods = []
    for i in range(n_pods):
        if i % 100 == 0:
            pods.append(make_pod(f"huge-{i}", namespace="batch", cpu="200", memory="1Gi"))
        elif i % 150 == 1:
            pods.append(make_pod(f"pinned-{i}", namespace="batch", node_selector={"pool": "absent"}))
        elif i % 40 == 2:
            pods.append(make_pod(f"train-{i}", namespace="ml", cpu="8", memory="64Gi", extended={GPU: "2"}))
        else:
            pods.append(make_pod(f"web-{i}", namespace="shop", cpu="2", memory="4Gi"))
    return pods


async def test_report_at_5000_nodes(tmp_path):
    browser = chromium()
    nodes, bound = big_cluster(5000)
    cluster, pods = tmp_path / "cluster.yaml", tmp_path / "pods.yaml"
    cluster.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes + bound}))
    pods.write_text(yaml.safe_dump_all(big_workload(2000)))
    explained = ["shop/web-3", "batch/huge-0"]
    out, report = await asyncio.to_thread(simulate, tmp_path, cluster, pods, *[a for k in explained
                                                                                for a in ("--explain", k)])
    size = report.stat().st_size
    (tmp_path / "report-size.txt").write_text(f"{size} bytes\n")
    assert size < 5_000_000, size
    dom = await render(browser, tmp_path, report)
    check_report(dom, out)
    assert {r[0] for r in table_rows(dom, "reason-table")} >= {"Insufficient cpu",
                                                              "node(s) didn't match Pod's node affinity/selector"}
    assert 'class="bar after"' not in dom.split('id="node-charts"')[1].split("</div>")[0]  # no per-node bars

    zone_a = sum(1 for n in out["utilisation"]["after"]["nodes"] if n["zone"] == "eu-west-1a")
    filtered = await render(browser, tmp_path, report, "#nodes-zone=eu-west-1a&pods-outcome=unschedulable")
    assert attr(filtered, "nodes", "data-matching") == str(zone_a)
    assert {row[1] for row in table_rows(filtered, "nodes")} == {"eu-west-1a"}
    unplaced = [p["pod"] for p in out["placements"] if not p["node"]]
    assert attr(filtered, "pods", "data-matching") == str(len(unplaced))
    assert {f"{r[1]}/{r[0]}" for r in table_rows(filtered, "pods")} <= set(unplaced)

    fullest = max(n["requested"]["cpu"] * 1000 // n["allocatable"]["cpu"] for n in out["utilisation"]["after"]["nodes"])
    ranked = await render(browser, tmp_path, report, "#nodes-sort=cpu %25 (after)&nodes-dir=desc")
    top = table_rows(ranked, "nodes")[0]
    assert top[4] == f"{fullest / 10:.1f}"
    await screenshot(browser, tmp_path, report, "report-5000-nodes.png")


async def test_report_page_stays_bounded_at_20000_pods(tmp_path):
    """The page alone (no simulation): 5,000 nodes and 20,000 pods, one page of each in the DOM."""
    from pysched.tools.report import write_report
    from pysched.tools.simulate import Placement, SimulationResult
    browser = chromium()
    resources = ["cpu", "memory", "pods"]

    def util(load: int) -> dict:
        rows = [{"node": f"n{i:05d}", "zone": f"z{i % 4}",
                 "allocatable": {"cpu": 8000, "memory": 32 << 30, "pods": 110},
                 "requested": {"cpu": (i * load) % 8000, "memory": (i << 20) % (32 << 30), "pods": load}}
                for i in range(5000)]
        return {"resources": resources, "nodes": rows, "zones": []}
    placements = [Placement(f"ns{i % 7}/p{i}", f"n{i % 5000:05d}" if i % 9 else None, "Unschedulable",
                            "0/5000 nodes are available: 5000 Insufficient cpu.", "pysched") for i in range(20000)]
    report = write_report(SimulationResult("pysched", 0, placements, util(1), util(5)), tmp_path / "big.html")
    dom = await render(browser, tmp_path, report, "#pods-outcome=unschedulable")
    assert attr(dom, "pods", "data-total") == "20000"
    assert attr(dom, "pods", "data-matching") == str(sum(1 for p in placements if not p.node))
    assert attr(dom, "nodes", "data-total") == "5000" and attr(dom, "nodes", "data-shown") == str(PAGE_SIZE)
    assert table_rows(dom, "reason-table") == [["Insufficient cpu", str(sum(1 for p in placements if not p.node))]]
    assert page_height(dom) < MAX_HEIGHT_PX
