"""``pysched ui`` in a real headless Chromium, driven over the DevTools protocol (``pysched_dev.cdp``).

The UI is started as deployed (``python -m pysched ui ... --port 0``, loopback, the URL with its
session token read from the one line it prints) and the page is checked against the DOM contract
of issue 39 and against ``pysched simulate`` itself:

* the example cluster: the page loads with no script error (under the server's CSP); a selected
  pod's explain table (every Filter verdict, every Score plugin's raw/normalized/weighted score,
  the totals, the ranking and the chosen node) equals ``simulate --output json --explain`` for the
  same pod; a config edit (NodeResourcesFit's scoringStrategy to MostAllocated) moves pods, the new
  run's placements equal simulate's with the edited config, and the compare view lists exactly the
  moved pods; a config with a bad field names that field in ``#config-errors``; cloning nodes grows
  the heatmap; the export links download a scenario and a config that simulate accepts and that
  reproduce the page's run; a three-step replay steps through; the API refuses requests without
  the token (401) and the page's responses carry the security headers.
* the explain table at 1280 and 1920 px wide: with "weighted scores only" every Score plugin's
  column header of the example configuration (kube-scheduler's and pysched's own) is on screen
  with the node column; with every score each header is reached by scrolling the table sideways,
  the node column pinned, and the hint names those out of view.
* deep links (``#/run/ID``, ``#/run/ID/pod/NS/NAME``, ``#/run/ID/node/NAME``, ``#/pod/...``): each
  opens its view in a fresh page load, and through the login address with the link appended; a run
  not kept, a run of another session, a pod or node that is not there and a malformed link are
  said on the page; moving in the page updates the address and the back button returns.
* 5,000 nodes and 10,000 pending pods: time to first (contentful) paint, to ``data-ready`` and until
  the first visit's automatic run is shown; a run started from the page (the page's main thread and
  the server keep answering meanwhile, a second run is refused with 409); a group-by switch and an
  explain at that size. The numbers go to ``ui-measurements.json`` in the test's tmp dir and to
  stdout; the only bounds asserted are liveness timeouts (speed belongs to the benchmark).

Screenshots (1400x1000; the explain view with "weighted scores only") are written under the test's
tmp dir; with ``PYSCHED_UPDATE_DOCS=1`` they are also copied to ``docs/ui-cluster.png``,
``docs/ui-explain.png``, ``docs/ui-compare.png`` and ``docs/ui-config-error.png``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest
import yaml
from aiohttp import web

from pysched_dev.cdp import Browser, CDPError, Page

from .conftest import REPO
from .test_report_render import TYPES, big_cluster, big_workload, chromium

pytestmark = pytest.mark.e2e
EXAMPLES = REPO / "examples"
SERVING = re.compile(r"^pysched ui: serving (http://127\.0\.0\.1:(\d+)/\?token=(\S+))$", re.M)
READY = "document.body.dataset.ready === '1'"
IDLE = "document.body.dataset.busy !== '1'"
WIDTH, HEIGHT = 1400, 1000
#: Liveness bounds (seconds): a hung page or server fails the test instead of hanging it.
LOAD_TIMEOUT = 120
RUN_TIMEOUT = 300
STEP_TIMEOUT = 60
PING_TIMEOUT = 3.0   # a trivial evaluation must answer within this while a run is in progress
TOP_ROWS = 200       # the explain table's ranked rows (the contract: the top 200 by total)

#: The example's config with NodeResourcesFit scoring MostAllocated: moves shop/web-0 and shop/web-2.
MOST_ALLOCATED = {"name": "NodeResourcesFit",
                  "args": {"scoringStrategy": {"type": "MostAllocated",
                                               "resources": [{"name": "cpu", "weight": 1},
                                                             {"name": "memory", "weight": 1}]}}}
CSP = "default-src 'self'; img-src 'self' data:; style-src 'self'"   # the contract's
BAD_FIELD = "profiles[0].plugins.multiPoint.enabled[1].weight"

#: Two documents, the second with a bad cpu quantity: the error names document 1 and the field.
BAD_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: fine, namespace: shop}
spec:
  containers:
  - {name: c, image: registry.example/c:1, resources: {requests: {cpu: 500m}}}
---
apiVersion: v1
kind: Pod
metadata: {name: broken, namespace: shop}
spec:
  containers:
  - {name: c, image: registry.example/c:1, resources: {requests: {cpu: lots}}}
"""
BAD_POD_FIELD = "spec.containers[0].resources.requests.cpu"

REPLAY = """\
steps:
- at: 0s
  create:
  - apiVersion: v1
    kind: Pod
    metadata: {name: extra-0, namespace: shop, labels: {app: extra}}
    spec:
      containers:
      - {name: c, image: registry.example/extra:1, resources: {requests: {cpu: "1", memory: 1Gi}}}
- at: 30s
  failNode: m5-b-1
- at: 60s
  delete: shop/extra-0
"""


# -- the server --------------------------------------------------------------------------------

class UIServer:
    """``python -m pysched ui`` on a free loopback port (``--port 0``); stdout and stderr to files."""

    def __init__(self, tmp_path: Path, *args: str, name: str = "ui"):
        self.args = args
        self.out_path = tmp_path / f"{name}.stdout"
        self.log_path = tmp_path / f"{name}.log"
        self.proc: subprocess.Popen | None = None
        self.url = self.base = self.token = ""
        self.startup_s = 0.0

    async def start(self, timeout: float = LOAD_TIMEOUT) -> UIServer:
        start = time.monotonic()
        with open(self.out_path, "wb") as out, open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pysched", "ui", *self.args, "--address", "127.0.0.1", "--port", "0"],
                cwd=REPO, stdin=subprocess.DEVNULL, stdout=out, stderr=log, start_new_session=True,
                env=dict(os.environ, PYTHONUNBUFFERED="1"))
        while time.monotonic() - start < timeout:
            m = SERVING.search(self.out_path.read_text(errors="replace"))
            if m:
                self.url, port, self.token = m.group(1), m.group(2), m.group(3)
                self.base = f"http://127.0.0.1:{port}"
                self.startup_s = time.monotonic() - start
                return self
            if self.proc.poll() is not None:
                break
            await asyncio.sleep(0.05)
        raise AssertionError(f"pysched ui did not print its URL (exit {self.proc.poll()}):\n"
                             f"stdout: {self.out_path.read_text(errors='replace')[-2000:]}\n"
                             f"stderr: {self.log()[-4000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM (exit 0 expected), SIGKILL after ``timeout``; the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
                return None
        return self.proc.returncode

    async def api(self, method: str, path: str, body=None, *, token: str | None = "", headers: dict | None = None,
                  timeout: float = RUN_TIMEOUT) -> tuple[int, object, dict]:
        """(status, JSON or text, headers); ``token=""`` means the session token, None no credentials."""
        hdrs = dict(headers or {})
        tok = self.token if token == "" else token
        if tok is not None:
            hdrs["Authorization"] = f"Bearer {tok}"
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as s:
            async with s.request(method, self.base + path, json=body, headers=hdrs, allow_redirects=False) as r:
                text = await r.text()
                try:
                    data = json.loads(text)
                except ValueError:
                    data = text
                return r.status, data, dict(r.headers)

    async def ok(self, method: str, path: str, body=None, **kw):
        status, data, _ = await self.api(method, path, body, **kw)
        assert status == 200, (method, path, status, data)
        return data


@contextlib.asynccontextmanager
async def ui_session(tmp_path: Path, *args: str):
    """The UI server and a browser page logged in with the token (the cookie set by ``/?token=``)."""
    browser_path = chromium()
    server = UIServer(tmp_path, *args)
    try:
        await server.start()
        async with Browser.launch(tmp_path / "browser", executable=browser_path) as browser:
            page = await browser.new_page(width=WIDTH, height=HEIGHT)
            try:
                yield server, page
            except BaseException:
                print(f"--- pysched ui stderr ---\n{server.log()[-6000:]}\n--- page console ---\n"
                      + "\n".join(f"{c['type']}: {c['text']}" for c in page.console[-50:]))
                raise
    finally:
        server.stop()


def ignorable(error: dict) -> bool:
    """Ignored: a favicon request the browser makes on its own, and the failed-request lines Chromium
    logs for the config and the objects the test made invalid on purpose (400 from PUT /api/config and
    POST /api/objects)."""
    url = error.get("url", "")
    return "favicon" in url or (error["kind"] == "log" and url.endswith(("/api/config", "/api/objects"))
                                and "status of 400" in error["text"])


async def assert_no_script_error(page: Page) -> None:
    errors = page.script_errors(ignorable)
    ui_errors = await page.evaluate("window.__uiErrors || []")
    banner = await page.evaluate("(() => { const b = document.querySelector('#error-banner'); "
                                 "return b && !b.hidden ? b.textContent.trim() : ''; })()")
    assert not errors and not ui_errors and not banner, (errors, ui_errors, banner)


async def screenshot(page: Page, tmp_path: Path, name: str, *, tab: str | None = None,
                     scroll_to: str | None = None, docs: bool = True) -> Path:
    """``ui-<name>.png`` of the viewport (after showing a workbench tab and scrolling to an element)."""
    if tab and await page.exists(f"#tab-btn-{tab}"):
        await page.click(f"#tab-btn-{tab}")
    if scroll_to:
        await page.scroll_into_view(scroll_to)
    await page.wait_for_idle()
    shot = tmp_path / f"ui-{name}.png"
    data = await page.screenshot(shot)
    assert len(data) > 10_000, f"{name}: a {len(data)}-byte screenshot is blank"
    if docs and os.environ.get("PYSCHED_UPDATE_DOCS"):
        (REPO / "docs").mkdir(exist_ok=True)
        shutil.copy(shot, REPO / "docs" / shot.name)
    return shot


# -- simulate, the reference -------------------------------------------------------------------

def simulate(tmp_path: Path, cluster: Path, pods: Path, config: Path | None, *extra: str, name: str = "sim") -> dict:
    args = [sys.executable, "-m", "pysched", "simulate", "--cluster", str(cluster), "--pods", str(pods),
            "--output", "json", *(["--config", str(config)] if config else []), *extra]
    proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert proc.returncode in (0, 1), f"{args}\n{proc.stderr[-4000:]}"
    (tmp_path / f"{name}.json").write_text(proc.stdout)
    return json.loads(proc.stdout)


def placements(result: dict) -> dict[str, str | None]:
    return {p["pod"]: p["node"] for p in result["placements"]}


def filter_verdicts(trace: dict) -> dict[str, dict[str, str]]:
    """node -> {Filter plugin: "passed" | reason} from simulate's trace (plugins that ran on it)."""
    out: dict[str, dict[str, str]] = {}
    for f in trace["filter"]:
        for node, verdict in f["nodes"].items():
            out.setdefault(node, {})[f["plugin"]] = verdict
    return out


def first_failure(verdicts: dict[str, str], order: list[str]) -> tuple[str, str] | None:
    for plugin in order:
        v = verdicts.get(plugin)
        if v is not None and v != "passed":
            return plugin, v
    return None


# -- reading the page --------------------------------------------------------------------------

PAGE_STATE = """(() => {
  const b = document.body.dataset;
  const groups = [...document.querySelectorAll('#heatmap .heat-group')].map(g => ({
    group: g.dataset.group, nodes: Number(g.dataset.nodes),
    cells: g.querySelectorAll('.heat-cell[data-node]').length}));
  const pods = document.querySelector('#pods-table');
  return {ready: b.ready, run: b.run, busy: b.busy, groups,
          nodes: groups.reduce((a, g) => a + g.nodes, 0),
          podRows: pods.querySelectorAll('tr[data-pod]').length,
          podsTotal: pods.dataset.total, podsMatching: pods.dataset.matching,
          resources: [...document.querySelectorAll('#util-summary tr[data-resource]')].map(r => r.dataset.resource)};
})()"""

EXPLAIN_TABLE = """(() => {
  const t = document.querySelector('#explain-table');
  const num = s => { const v = s.replace(/[,\\s\\u00a0\\u202f]/g, ''); return /^-?\\d+$/.test(v) ? Number(v) : v; };
  const rows = [...t.querySelectorAll('tr[data-node]')].map(tr => {
    const filters = {}, scores = {};
    for (const td of tr.querySelectorAll('td[data-kind="filter"]'))
      filters[td.dataset.plugin] = {text: td.textContent.trim(), title: td.title || ''};
    for (const td of tr.querySelectorAll('td[data-kind="raw"], td[data-kind="normalized"], td[data-kind="weighted"]'))
      (scores[td.dataset.plugin] = scores[td.dataset.plugin] || {})[td.dataset.kind] = num(td.textContent.trim());
    const total = tr.querySelector('td.total');
    return {node: tr.dataset.node, filters, scores, total: total ? num(total.textContent.trim()) : null};
  });
  const groups = [...t.querySelectorAll('tr.group')].map(tr => ({reason: tr.dataset.reason,
                                                                  count: Number(tr.dataset.count)}));
  return {pod: document.querySelector('#pod-detail').dataset.pod,
          chosen: document.querySelector('#chosen-node').textContent.trim(),
          victims: [...document.querySelectorAll('#victims li')].map(li => li.textContent.trim()), rows, groups};
})()"""


async def state(page: Page) -> dict:
    return await page.evaluate(PAGE_STATE)


async def wait_idle(page: Page, timeout: float = STEP_TIMEOUT) -> float:
    return await page.wait_for(IDLE, timeout=timeout)


async def click_run(page: Page, timeout: float = RUN_TIMEOUT) -> str:
    """Click ``#run``; the id of the run the page then shows (a new one)."""
    await wait_idle(page)
    before = await page.evaluate("document.body.dataset.run || ''")
    await page.click("#run")
    await page.wait_for(f"document.body.dataset.run && document.body.dataset.run !== {json.dumps(before)} && {IDLE}",
                        timeout=timeout)
    return await page.evaluate("document.body.dataset.run")


async def select_pod(page: Page, pod: str, timeout: float = RUN_TIMEOUT) -> dict:
    """Click the pod's row (filtering the table to it first) and read the explain panel once filled."""
    await wait_idle(page)
    sel = f'#pods-table tr[data-pod="{pod}"]'
    if not await page.exists(sel):
        await page.fill("#pod-filter", pod)
        await page.wait_for(f"!!document.querySelector({json.dumps(sel)})", timeout=STEP_TIMEOUT)
    await page.click(sel)
    # data-explained ("<run>|<pod>" once the table is this pod's) is the page's own marker, beyond the contract
    detail, mine = "document.querySelector('#pod-detail').dataset", json.dumps("|" + pod)
    await page.wait_for(f"{detail}.pod === {json.dumps(pod)} && {IDLE} && "
                        f"({detail}.explained === undefined || {detail}.explained.endsWith({mine})) && "
                        "document.querySelector('#explain-table tr[data-node], #explain-table tr.group') !== null",
                        timeout=timeout)
    return await page.evaluate(EXPLAIN_TABLE)


def says(cell: dict, verdict: str) -> bool:
    """A filter cell shows this verdict: in its text or tooltip (passed may be a check mark)."""
    shown = f"{cell['text']} {cell['title']}"
    if verdict == "passed":
        return "passed" in shown or cell["text"] in ("\u2713", "\u2714", "ok", "pass")
    return verdict in shown


def check_explain(shown: dict, trace: dict, api_explain: dict, pod: str) -> None:
    """The page's explain panel and the API's explain against simulate's trace for the same pod."""
    assert shown["pod"] == pod
    # The API: simulate's entry unchanged, plus the per-node rows.
    for key, value in trace.items():
        assert api_explain.get(key) == value, (pod, key, api_explain.get(key), value)
    verdicts = filter_verdicts(trace)
    order = [f["plugin"] for f in trace["filter"]]
    totals = trace["totalScores"]
    by_node = {n["node"]: n for n in api_explain["nodes"]}
    assert set(by_node) == set(verdicts) | set(totals), pod
    for node, row in by_node.items():
        assert row["filters"] == verdicts.get(node, {}), (pod, node)
        assert row["total"] == totals.get(node), (pod, node)
        assert row["scores"] == {p: per[node] for p, per in trace["score"].items() if node in per}, (pod, node)
    assert api_explain["chosen"] == (trace["selectedNode"] or None)   # simulate: "" when none

    # The page: ranked rows of the nodes that passed, by total desc (ties by name), then groups.
    passed = [n for n, v in verdicts.items() if first_failure(v, order) is None]
    ranked = sorted(passed, key=lambda n: (-(totals.get(n) if totals.get(n) is not None else -1), natural_key(n)))
    rows = shown["rows"]
    top = rows
    if len(rows) > TOP_ROWS:   # the chosen node, ranked below the top rows among equals, shown after them
        assert len(rows) == TOP_ROWS + 1 and rows[-1]["node"] == trace["selectedNode"], (pod, rows[-1])
        top = rows[:-1]
    assert [r["node"] for r in top] == ranked[:TOP_ROWS], (pod, [r["node"] for r in top], ranked[:TOP_ROWS])
    for r in rows:
        node = r["node"]
        for plugin in order:
            cell = r["filters"].get(plugin)
            assert cell is not None, (pod, node, plugin, "no filter cell")
            if plugin in verdicts[node]:
                assert says(cell, verdicts[node][plugin]), (pod, node, plugin, cell, verdicts[node][plugin])
        for plugin, per in trace["score"].items():
            if node in per:
                assert r["scores"].get(plugin) == per[node], (pod, node, plugin, r["scores"].get(plugin), per[node])
        assert r["total"] == totals.get(node, r["total"]), (pod, node, r["total"], totals.get(node))
    failures = Counter(first_failure(v, order) for v in verdicts.values())
    failures.pop(None, None)
    groups = {g["reason"]: g["count"] for g in shown["groups"]}
    for (plugin, reason), count in failures.items():   # data-reason: "Plugin: reason" (or the reason alone)
        assert groups.get(f"{plugin}: {reason}", groups.get(reason)) == count, (pod, plugin, reason, count, groups)
    if trace["selectedNode"]:
        assert shown["chosen"] == trace["selectedNode"], (pod, shown["chosen"])
    else:
        assert shown["chosen"].startswith("pending"), (pod, shown["chosen"])


def natural_key(s: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


async def shown_placements(page: Page, pods: list[str]) -> dict[str, str | None]:
    """Each pod's node as the page shows it once selected (``#chosen-node``; None when pending)."""
    out = {}
    for pod in pods:
        shown = await select_pod(page, pod)
        out[pod] = None if shown["chosen"].startswith("pending") else shown["chosen"]
    return out


# -- the example cluster -----------------------------------------------------------------------

async def test_ui_example_cluster(tmp_path):
    cluster, pods = EXAMPLES / "simulate" / "snapshot.yaml", EXAMPLES / "simulate" / "pods.yaml"
    config = EXAMPLES / "scheduler-config.yaml"
    explained = ["shop/web-0", "batch/too-big"]
    reference = simulate(tmp_path, cluster, pods, config, *[a for p in explained for a in ("--explain", p)])
    pending = [p["pod"] for p in reference["placements"]]

    edited_cfg = yaml.safe_load(config.read_text())
    edited_cfg["profiles"][0].setdefault("pluginConfig", []).append(MOST_ALLOCATED)
    edited = tmp_path / "config-most-allocated.yaml"
    edited.write_text(yaml.safe_dump(edited_cfg, sort_keys=False))
    reference2 = simulate(tmp_path, cluster, pods, edited, name="sim-most-allocated")
    moved = {p: (placements(reference)[p], n) for p, n in placements(reference2).items()
             if n != placements(reference)[p]}
    assert moved, "the edited config must move a pod for this test to mean anything"

    async with ui_session(tmp_path, "--cluster", str(cluster), "--pods", str(pods), "--config", str(config)) as (
            server, page):
        # -- auth and headers --
        await check_auth(server)

        # -- load --
        await page.goto(server.url)
        assert urlsplit(await page.evaluate("location.href")).query == "", "the token stays in the address bar"
        await page.wait_for(READY, timeout=LOAD_TIMEOUT)
        await wait_idle(page)
        scenario = await server.ok("GET", "/api/scenario")
        st = await state(page)
        assert st["nodes"] == len(scenario["nodes"]) == 7, st
        assert sum(g["cells"] for g in st["groups"]) == 7, st
        assert {g["group"] for g in st["groups"]} == {n["zone"] for n in scenario["nodes"]}
        assert int(st["podsTotal"]) == st["podRows"] == len(scenario["pods"]), st
        assert {p["key"] for p in scenario["pods"] if p["state"] == "pending"} == set(pending)
        assert {"cpu", "memory"} <= set(st["resources"]), st
        loaded = await page.evaluate("performance.getEntriesByType('resource').map(e => e.name)")
        assert loaded and all(u.startswith(server.base + "/") for u in loaded), loaded   # no CDN, nothing external
        await assert_no_script_error(page)

        # -- run 1 and the explain of two pods against simulate --
        run1 = await click_run(page)
        got = await server.ok("GET", f"/api/runs/{run1}")
        assert {p["pod"]: p["node"] for p in got["placements"]} == placements(reference)
        await check_heat_cells(page, reference["utilisation"]["after"])
        await check_pod_state_filter(page, reference)
        await screenshot(page, tmp_path, "cluster-7-nodes", docs=False)
        for pod in explained:
            shown = await select_pod(page, pod)
            api_explain = await server.ok("GET", f"/api/runs/{run1}/explain?pod={pod}")
            check_explain(shown, reference["explain"][pod], api_explain, pod)
            if pod == "shop/web-0":   # "weighted scores only": every plugin's column, pysched's own too
                await page.click("#explain-compact")
                await screenshot(page, tmp_path, "explain", scroll_to="#pod-detail")
                await page.click("#explain-compact")
        assert await shown_placements(page, pending) == placements(reference)

        # -- a config with a bad field: named, nothing changes --
        original = await page.evaluate("document.querySelector('#config-editor').value")
        assert yaml.safe_load(original) == yaml.safe_load(scenario["config"])
        bad_cfg = yaml.safe_load(original)
        bad_cfg["profiles"][0]["plugins"]["multiPoint"]["enabled"][1]["weight"] = "heavy"
        await page.fill("#config-editor", yaml.safe_dump(bad_cfg, sort_keys=False))
        await page.click("#config-apply")
        await page.wait_for(f"document.querySelector('#config-errors li[data-field]') !== null && {IDLE}",
                            timeout=STEP_TIMEOUT)
        errors = await page.evaluate("[...document.querySelectorAll('#config-errors li[data-field]')]"
                                     ".map(li => ({field: li.dataset.field, text: li.textContent}))")
        assert [e["field"] for e in errors] == [BAD_FIELD], errors
        assert "integer" in errors[0]["text"], errors
        after_bad = await server.ok("GET", "/api/scenario")
        assert after_bad["config"] == scenario["config"] and after_bad["version"] == scenario["version"]
        status, body, _ = await server.api("PUT", "/api/config", {"yaml": yaml.safe_dump(bad_cfg)})
        assert status == 400 and [e["field"] for e in body["errors"]] == [BAD_FIELD], (status, body)
        await screenshot(page, tmp_path, "config-error", tab="config", scroll_to="#config-errors")

        # -- the edited config: placements change, equal simulate's --
        await page.fill("#config-editor", edited.read_text())
        await page.click("#config-apply")
        await wait_idle(page)
        await page.wait_for("document.querySelector('#config-errors li') === null", timeout=STEP_TIMEOUT)
        assert "MostAllocated" in (await server.ok("GET", "/api/scenario"))["config"]
        run2 = await click_run(page)
        assert run2 != run1
        got2 = await server.ok("GET", f"/api/runs/{run2}")
        assert {p["pod"]: p["node"] for p in got2["placements"]} == placements(reference2)
        assert await shown_placements(page, sorted(moved)) == {p: to for p, (_, to) in moved.items()}

        # -- compare the two runs --
        await page.select("#compare-a", str(run1))
        await page.select("#compare-b", str(run2))
        await page.click("#compare-go")
        await page.wait_for(f"document.querySelectorAll('#compare-table tr[data-pod]').length === {len(moved)} && "
                            f"{IDLE}", timeout=STEP_TIMEOUT)
        rows = await page.evaluate("[...document.querySelectorAll('#compare-table tr[data-pod]')].map(tr => "
                                   "[tr.dataset.pod, ...[...tr.querySelectorAll('td')]"
                                   ".map(td => td.textContent.trim())])")
        assert {r[0]: tuple(r[2:4]) for r in rows} == moved, rows
        assert all(r[0] == r[1] for r in rows), rows
        summary = await page.evaluate("Object.fromEntries([...document.querySelectorAll('#compare-summary [data-key]')]"
                                      ".map(e => [e.dataset.key, e.textContent.trim()]))")
        unplaced = sum(1 for n in placements(reference).values() if n is None)
        assert summary.get("moved") == str(len(moved)), summary
        assert summary.get("pendingA") == summary.get("pendingB") == str(unplaced), summary
        cmp = await server.ok("GET", f"/api/compare?a={run1}&b={run2}")
        assert {m["pod"]: (m["from"], m["to"]) for m in cmp["moved"]} == moved
        await screenshot(page, tmp_path, "compare", tab="runs", scroll_to="#compare-table")

        # -- clone nodes --
        await page.select("#clone-node", "m5-a-1")
        await page.fill("#clone-count", "3")
        await page.click("#clone-apply")
        await page.wait_for(f"[...document.querySelectorAll('#heatmap .heat-group')].reduce((a, g) => "
                            f"a + Number(g.dataset.nodes), 0) === 10 && {IDLE}", timeout=STEP_TIMEOUT)
        names = {n["name"] for n in (await server.ok("GET", "/api/scenario"))["nodes"]}
        assert {f"m5-a-1-sim-{i}" for i in (1, 2, 3)} <= names and len(names) == 10
        run3 = await click_run(page)

        # -- an invalid object in the objects editor: its document and field are named --
        await page.fill("#yaml-editor", BAD_POD)
        await page.select("#yaml-mode", "apply")
        await page.click("#yaml-apply")
        await page.wait_for(f"document.querySelector('#yaml-errors li[data-field]') !== null && {IDLE}",
                            timeout=STEP_TIMEOUT)
        errors = await page.evaluate("[...document.querySelectorAll('#yaml-errors li[data-field]')]"
                                     ".map(li => [li.dataset.document, li.dataset.field])")
        assert errors == [["1", BAD_POD_FIELD]], errors
        assert (await server.ok("GET", "/api/scenario"))["version"] == (await server.ok("GET", "/api/runs"))[-1][
            "version"], "nothing applied on a 400"

        # -- export: simulate accepts both files and reproduces the page's run --
        downloads = tmp_path / "downloads"
        scenario_file = await page.download("#export-scenario", downloads)
        config_file = await page.download("#export-config", downloads)
        exported = yaml.safe_load(scenario_file.read_text())
        assert exported["kind"] == "List"
        assert sum(1 for o in exported["items"] if o["kind"] == "Node") == 10
        assert "MostAllocated" in config_file.read_text()
        replayed = simulate(tmp_path, scenario_file, pods, config_file, name="sim-export")
        got3 = await server.ok("GET", f"/api/runs/{run3}")
        assert placements(replayed) == {p["pod"]: p["node"] for p in got3["placements"]}
        api_export = await server.ok("GET", "/api/export")
        assert yaml.safe_load(api_export["scenario"]) == exported

        # -- delete a node from the node list --
        # (the page keeps showing it, greyed, until the next run: the heatmap is checked after replay step 1)
        version = (await server.ok("GET", "/api/scenario"))["version"]
        await page.click('#nodes-table tr[data-node="m5-a-1-sim-3"] button.delete')
        await wait_idle(page)
        now = await server.ok("GET", "/api/scenario")
        assert now["version"] > version and "m5-a-1-sim-3" not in {n["name"] for n in now["nodes"]}

        # -- replay: three steps --
        await page.fill("#replay-yaml", REPLAY)
        await page.click("#replay-load")
        await page.wait_for("document.querySelector('#replay-status').dataset.total === '3' && "
                            f"document.querySelector('#replay-status').dataset.current === '0' && {IDLE}",
                            timeout=STEP_TIMEOUT)
        for step in (1, 2, 3):
            before = await page.evaluate("document.body.dataset.run")
            await page.click("#replay-step")
            await page.wait_for(f"document.querySelector('#replay-status').dataset.current === '{step}' && "
                                f"document.body.dataset.run !== {json.dumps(before)} && {IDLE}", timeout=RUN_TIMEOUT)
            now = await server.ok("GET", "/api/scenario")
            keys = {p["key"] for p in now["pods"]}
            nodes = {n["name"] for n in now["nodes"]}
            if step == 1:
                assert "shop/extra-0" in keys and await page.exists('#pods-table tr[data-pod="shop/extra-0"]')
                assert (await state(page))["nodes"] == len(nodes) == 9
            elif step == 2:
                assert "m5-b-1" not in nodes and (await state(page))["nodes"] == 8
                assert {"kube-system/ingress-1", "shop/api-1"} <= {p["key"] for p in now["pods"]
                                                                   if p["state"] == "pending"}
            else:
                assert "shop/extra-0" not in keys
        assert (await server.ok("GET", "/api/replay"))["current"] == 3

        await assert_no_script_error(page)
        code = server.stop()
    assert code == 0, server.log()[-3000:]


# -- the explain table's columns at 1280 px and 1920 px ------------------------------------------

#: pysched's own Score plugins in examples/scheduler-config.yaml (beside kube-scheduler's defaults)
OWN_SCORES = {"GPU", "AZSpread", "CapacityType", "InstanceType"}
SCORE_COLUMNS = """(() => {
  const wrap = document.querySelector('.explain-wrap');
  const r = (e) => { const b = e.getBoundingClientRect();
                     return {left: b.left, right: b.right, top: b.top, bottom: b.bottom, width: b.width}; };
  const box = wrap.getBoundingClientRect();
  const seen = {left: box.left + wrap.clientLeft, right: box.left + wrap.clientLeft + wrap.clientWidth};
  const hint = document.querySelector('#explain-scroll-hint');
  const row = wrap.querySelector('tr.chosen[data-node]') || wrap.querySelector('tr[data-node]');
  return {vw: innerWidth, vh: innerHeight, docWidth: document.documentElement.scrollWidth, seen,
          top: document.querySelector('#top').getBoundingClientRect().bottom,
          scrollLeft: wrap.scrollLeft, scrollWidth: wrap.scrollWidth, clientWidth: wrap.clientWidth,
          nodeHead: r(wrap.querySelector('th.node')), nodeCell: row ? r(row.querySelector('td.node')) : null,
          heads: Object.fromEntries([...wrap.querySelectorAll('th.sname')].map(th => [th.dataset.plugin, r(th)])),
          hint: hint ? {hidden: hint.hidden, out: hint.dataset.hidden || ''} : {hidden: true, out: ''}};
})()"""
SCROLL_TO_HEAD = """((plugin) => {
  const wrap = document.querySelector('.explain-wrap');
  const th = [...wrap.querySelectorAll('th.sname')].find(t => t.dataset.plugin === plugin);
  const pinned = wrap.querySelector('th.node').getBoundingClientRect().right;
  wrap.scrollLeft += th.getBoundingClientRect().left - pinned;
  return wrap.scrollLeft;
})"""


def within(inner: dict, left: float, right: float) -> bool:
    return inner["width"] > 0 and inner["left"] >= left - 0.5 and inner["right"] <= right + 0.5


def node_column_shown(m: dict) -> None:
    """The node column: pinned at the table's left edge, inside the viewport, its cell beside its header."""
    for part in ("nodeHead", "nodeCell"):
        assert m[part] is not None and within(m[part], m["seen"]["left"], m["seen"]["right"]), (part, m)
        assert abs(m[part]["left"] - m["seen"]["left"]) <= 1.5, ("the node column is not pinned", part, m)
    assert m["seen"]["left"] >= 0 and m["seen"]["right"] <= m["vw"], m


async def check_score_columns(page: Page, plugins: set[str], width: int) -> dict:
    """Every Score plugin's header: with "weighted scores only", all inside the table's visible area
    and the viewport at once; with every score, each reachable by scrolling the table sideways with
    the node column still in view, and the hint naming those out of view. The page is never wider
    than the viewport."""
    await page.scroll_into_view("#explain-table", "center")
    out = {}
    for compact in (True, False):
        await page.call("(on) => { const c = document.querySelector('#explain-compact'); "
                        "if (c.checked !== on) c.click(); }", compact)
        await page.evaluate("document.querySelector('.explain-wrap').scrollLeft = 0")
        await page.wait_for_idle()
        m = await page.evaluate(SCORE_COLUMNS)
        assert set(m["heads"]) == plugins, (width, compact, sorted(m["heads"]), sorted(plugins))
        assert m["docWidth"] <= m["vw"], (width, compact, "the page scrolls sideways", m)
        node_column_shown(m)
        left, right = m["nodeHead"]["right"], min(m["seen"]["right"], m["vw"])
        out_of_view = sorted(p for p, h in m["heads"].items() if not within(h, left, right))
        for h in m["heads"].values():   # on screen vertically too (below the page's sticky header)
            assert h["top"] >= m["top"] - 0.5 and h["bottom"] <= m["vh"], (width, compact, h, m)
        if compact:
            assert not out_of_view, (width, "weighted scores only: header(s) cut off", out_of_view, m)
            assert m["scrollWidth"] <= m["clientWidth"] and m["hint"]["hidden"], (width, m)
            out["compact"] = m
            continue
        # every score: the table may be wider than its panel - then it says so, and scrolls
        assert sorted(m["hint"]["out"].split(",") if m["hint"]["out"] else []) == out_of_view, (width, m["hint"], m)
        assert m["hint"]["hidden"] == (not out_of_view), (width, m)
        for plugin in out_of_view:
            await page.call(SCROLL_TO_HEAD, plugin)
            await page.wait_for_idle()
            s = await page.evaluate(SCORE_COLUMNS)
            node_column_shown(s)
            assert within(s["heads"][plugin], s["nodeHead"]["right"], min(s["seen"]["right"], s["vw"])), (
                width, plugin, "not reachable by scrolling", s)
        out["full"] = {"out_of_view": out_of_view, **m}
    await page.evaluate("document.querySelector('.explain-wrap').scrollLeft = 0")
    return out


async def test_ui_explain_columns_at_1280_and_1920(tmp_path):
    """The shipped configuration (the widest set of plugins: kube-scheduler's and pysched's own
    scores): at 1280 and 1920 px wide, "weighted scores only" shows every Score plugin's column with
    the node column, nothing cut off; every score (raw, normalized, weighted) is reachable in the
    table's sideways scroll, the node column pinned, the columns out of view named."""
    cluster, pods = EXAMPLES / "simulate" / "snapshot.yaml", EXAMPLES / "simulate" / "pods.yaml"
    config = EXAMPLES / "scheduler-config.yaml"
    async with ui_session(tmp_path, "--cluster", str(cluster), "--pods", str(pods), "--config", str(config)) as (
            server, page):
        await page.goto(server.url)
        await page.wait_for(READY, timeout=LOAD_TIMEOUT)
        await wait_idle(page)
        run = await page.evaluate("document.body.dataset.run")
        measured = {}
        for width in (1280, 1920):
            await page.set_viewport(width, HEIGHT)
            for pod in ("shop/web-0", "batch/report"):
                plugins = set((await server.ok("GET", f"/api/runs/{run}/explain?pod={pod}"))["score"])
                assert OWN_SCORES <= plugins, plugins
                await select_pod(page, pod)
                measured[f"{width} {pod}"] = await check_score_columns(page, plugins, width)
            await page.screenshot(tmp_path / f"ui-explain-{width}.png")
        await assert_no_script_error(page)
    print(json.dumps({k: v["full"]["out_of_view"] for k, v in measured.items()}, indent=1))


# -- deep links ----------------------------------------------------------------------------------

LINK_STATE = """(() => ({
  run: document.body.dataset.run, hash: location.hash,
  pod: document.querySelector('#pod-detail').dataset.pod || null,
  explained: document.querySelector('#pod-detail').dataset.explained || null,
  chosen: document.querySelector('#chosen-node').textContent.trim(),
  podInView: (() => { const b = document.querySelector('#pod-detail').getBoundingClientRect();
                      return b.top < innerHeight && b.bottom > 0; })(),
  node: document.querySelector('#node-detail').hidden ? null : document.querySelector('#node-detail').dataset.node,
  picked: [...document.querySelectorAll('#heatmap .heat-cell.picked')].map(c => c.dataset.node),
  status: document.querySelector('#status-run').textContent,
  problem: document.querySelector('#link-problem').hidden ? null : document.querySelector('#link-problem').textContent,
  cells: document.querySelectorAll('#heatmap .heat-cell[data-node]').length,
}))()"""


async def open_link(page: Page, server: UIServer, fragment: str) -> tuple[Page, dict]:
    """``fragment`` in a new tab (a fresh page load, the session's cookie already set): its state once idle."""
    tab = await page.browser.new_page(width=WIDTH, height=HEIGHT)
    await tab.goto(f"{server.base}/{fragment}")
    await tab.wait_for(READY, timeout=LOAD_TIMEOUT)
    await wait_idle(tab)
    await tab.wait_for("(() => { const d = document.querySelector('#pod-detail').dataset; "
                       f"return d.pod === undefined || !!d.explained; }})() && {IDLE}", timeout=STEP_TIMEOUT)
    return tab, await tab.evaluate(LINK_STATE)


async def test_ui_deep_links(tmp_path):
    """Links to a run, a pod's explanation and a node open there in a fresh page load (also through
    the printed login address); moving in the page puts its place in the address bar and the back
    button returns; a pod, node or run the link names that is not there - or a run of another
    session - is said on the page, which shows the rest."""
    cluster, pods = EXAMPLES / "simulate" / "snapshot.yaml", EXAMPLES / "simulate" / "pods.yaml"
    config = EXAMPLES / "scheduler-config.yaml"
    reference = placements(simulate(tmp_path, cluster, pods, config))
    async with ui_session(tmp_path, "--cluster", str(cluster), "--pods", str(pods), "--config", str(config)) as (
            server, page):
        session = (await server.ok("GET", "/api/session"))["session"]
        await page.goto(server.url)
        await page.wait_for(READY, timeout=LOAD_TIMEOUT)
        await wait_idle(page)
        first = await page.evaluate("document.body.dataset.run")
        assert await page.evaluate("location.hash") == f"#/run/{first}?ui={session}"
        # a second run, with another configuration: run 1 and run 2 place shop/web-0 differently
        edited = yaml.safe_load(config.read_text())
        edited["profiles"][0].setdefault("pluginConfig", []).append(MOST_ALLOCATED)
        await server.ok("PUT", "/api/config", {"yaml": yaml.safe_dump(edited)})
        second = str((await server.ok("POST", "/api/runs", {"label": "most allocated"}))["id"])
        web0 = {r: next(p["node"] for p in (await server.ok("GET", f"/api/runs/{r}"))["placements"]
                        if p["pod"] == "shop/web-0") for r in (first, second)}
        assert web0[first] == reference["shop/web-0"] and web0[first] != web0[second], web0

        # -- each kind of link, in a fresh page load --
        tab, st = await open_link(page, server, f"#/run/{first}/pod/shop/web-0?ui={session}")
        assert (st["run"], st["pod"], st["chosen"]) == (first, "shop/web-0", web0[first]), st
        assert st["explained"] == f"{first}|shop/web-0" and st["podInView"] and st["problem"] is None, st
        assert await tab.evaluate("document.querySelectorAll('#explain-table tr[data-node]').length") > 0
        await assert_no_script_error(tab)
        await tab.close()
        tab, st = await open_link(page, server, "#/pod/shop/web-0")     # no run: the latest
        assert (st["run"], st["pod"], st["chosen"]) == (second, "shop/web-0", web0[second]), st
        assert st["hash"] == f"#/run/{second}/pod/shop/web-0?ui={session}", st
        await tab.close()
        tab, st = await open_link(page, server, f"#/run/{first}/node/m5-a-2")
        assert (st["run"], st["node"], st["picked"], st["pod"]) == (first, "m5-a-2", ["m5-a-2"], None), st
        await tab.close()
        tab, st = await open_link(page, server, f"#/run/{first}")
        assert st["run"] == first and st["status"].startswith(f"run #{first}") and st["problem"] is None, st
        await tab.close()

        # -- links to what is not there: said on the page, the rest shown --
        for fragment, said, shown_run in (
                ("#/run/99/pod/shop/web-0", "Run #99 is not kept", second),
                (f"#/run/{first}?ui=0badc0de", "another pysched ui session", second),
                (f"#/run/{first}/pod/shop/nope", "No pod shop/nope", first),
                ("#/node/nope", 'No node named "nope"', second),
                ("#/bogus", "is not a place in the UI", second)):
            tab, st = await open_link(page, server, fragment)
            assert st["problem"] and said in st["problem"], (fragment, st)
            assert st["run"] == shown_run and st["cells"] == 7, (fragment, st)
            if "pod/shop/web-0" in fragment:   # the pod the link named is still opened, in the run shown
                assert st["pod"] == "shop/web-0", (fragment, st)
            await assert_no_script_error(tab)
            await tab.close()

        # -- the printed login address with a link appended (a browser without the cookie) --
        await page.send("Network.clearBrowserCookies")
        tab = await page.browser.new_page(width=WIDTH, height=HEIGHT)
        await tab.goto(f"{server.base}/#/run/{first}/pod/shop/web-0")
        assert "401" in await tab.evaluate("document.body.textContent"), "no cookie: not authenticated"
        await tab.goto(f"{server.url}#/run/{first}/pod/shop/web-0")
        await tab.wait_for(READY, timeout=LOAD_TIMEOUT)
        await wait_idle(tab)
        await tab.wait_for("document.querySelector('#pod-detail').dataset.explained", timeout=STEP_TIMEOUT)
        st = await tab.evaluate(LINK_STATE)
        assert (st["run"], st["pod"], st["chosen"]) == (first, "shop/web-0", web0[first]), st
        assert urlsplit(await tab.evaluate("location.href")).query == "", "the token leaves the address bar"
        await tab.close()

        # -- moving in the page: the address follows, back returns --
        tab, st = await open_link(page, server, "")
        assert st["hash"] == f"#/run/{second}?ui={session}", st
        await tab.click('#pods-table tr[data-pod="shop/web-0"]')
        await tab.wait_for(f"document.querySelector('#pod-detail').dataset.explained === '{second}|shop/web-0' "
                           f"&& {IDLE}", timeout=STEP_TIMEOUT)
        assert await tab.evaluate("location.hash") == f"#/run/{second}/pod/shop/web-0?ui={session}"
        await tab.click('#heatmap .heat-cell[data-node="m5-b-1"]')
        await tab.wait_for_idle()
        assert await tab.evaluate("location.hash") == f"#/run/{second}/node/m5-b-1/pod/shop/web-0?ui={session}"
        await tab.click(f'#runs li[data-run="{first}"] a.run-link')
        await tab.wait_for(f"document.body.dataset.run === '{first}' && {IDLE}", timeout=STEP_TIMEOUT)
        await tab.wait_for(f"document.querySelector('#pod-detail').dataset.explained === '{first}|shop/web-0' "
                           f"&& {IDLE}", timeout=STEP_TIMEOUT)
        assert await tab.evaluate("location.hash") == f"#/run/{first}/node/m5-b-1/pod/shop/web-0?ui={session}"
        assert (await tab.evaluate(LINK_STATE))["chosen"] == web0[first]
        await tab.click("#pod-close")
        await tab.wait_for_idle()
        assert await tab.evaluate("location.hash") == f"#/run/{first}/node/m5-b-1?ui={session}"
        for want in ({"run": first, "pod": "shop/web-0", "node": "m5-b-1"},
                     {"run": second, "pod": "shop/web-0", "node": "m5-b-1"},
                     {"run": second, "pod": "shop/web-0", "node": None},
                     {"run": second, "pod": None, "node": None}):
            await tab.evaluate("history.back()")
            pod = "undefined" if want["pod"] is None else json.dumps(want["pod"])
            await tab.wait_for(f"document.body.dataset.run === '{want['run']}' && "
                               f"document.querySelector('#pod-detail').dataset.pod === {pod} && {IDLE}",
                               timeout=STEP_TIMEOUT)
            st = await tab.evaluate(LINK_STATE)
            assert (st["run"], st["pod"], st["node"]) == (want["run"], want["pod"], want["node"]), (want, st)
            if want["pod"]:
                await tab.wait_for(f"document.querySelector('#pod-detail').dataset.explained === "
                                   f"'{want['run']}|shop/web-0' && {IDLE}", timeout=STEP_TIMEOUT)
                assert (await tab.evaluate(LINK_STATE))["chosen"] == web0[want["run"]], want
        await tab.evaluate("history.forward()")
        await tab.wait_for(f"document.querySelector('#pod-detail').dataset.pod === 'shop/web-0' && {IDLE}",
                           timeout=STEP_TIMEOUT)
        await assert_no_script_error(tab)


async def check_heat_cells(page: Page, after: dict) -> None:
    """Each node's heat cell: the larger of its cpu and memory requested/allocatable in percent (after the run)."""
    cells = await page.evaluate("Object.fromEntries([...document.querySelectorAll('#heatmap .heat-cell[data-node]')]"
                                ".map(c => [c.dataset.node, Number(c.dataset.util)]))")
    assert set(cells) == {n["node"] for n in after["nodes"]}, cells
    for n in after["nodes"]:
        want = max(100 * n["requested"][r] / n["allocatable"][r] for r in ("cpu", "memory") if n["allocatable"].get(r))
        assert abs(cells[n["node"]] - want) <= 1, (n["node"], cells[n["node"]], want)


async def check_pod_state_filter(page: Page, result: dict) -> None:
    """``#pod-state`` pending/placed: the rows and ``data-matching`` follow the run on display."""
    unplaced = {p for p, n in placements(result).items() if n is None}
    for value in ("pending", "all"):
        await page.select("#pod-state", value)
        await page.wait_for_idle()
        rows = await page.evaluate("[...document.querySelectorAll('#pods-table tr[data-pod]')].map(r => r.dataset.pod)")
        matching = int(await page.attribute("#pods-table", "data-matching"))
        if value == "pending":
            assert set(rows) == unplaced and matching == len(unplaced), (rows, matching)
        else:
            assert matching == int(await page.attribute("#pods-table", "data-total")) == len(rows), (rows, matching)


async def check_auth(server: UIServer) -> None:
    """Without the token: 401 on the API and on the page; with it: the security headers."""
    for token in (None, "not-the-token"):
        status, _, _ = await server.api("GET", "/api/scenario", token=token)
        assert status == 401, (token, status)
        status, _, _ = await server.api("POST", "/api/runs", {}, token=token)
        assert status == 401, (token, status)
    status, _, _ = await server.api("GET", "/", token=None)
    assert status == 401
    status, _, _ = await server.api("GET", "/app.js", token=None)
    assert status == 401
    status, _, headers = await server.api("GET", f"/?token={server.token}", token=None)
    assert status in (302, 303, 307), status
    cookie = headers.get("Set-Cookie", "")
    assert f"pysched_ui_{server.base.rsplit(':', 1)[1]}=" in cookie and "HttpOnly" in cookie, headers
    status, _, headers = await server.api("GET", "/api/scenario")
    assert status == 200
    assert headers.get("Cache-Control") == "no-store", headers
    assert headers.get("X-Content-Type-Options") == "nosniff", headers
    assert headers.get("Content-Security-Policy") == CSP, headers


# -- 5,000 nodes, 10,000 pending pods ----------------------------------------------------------

@pytest.mark.timeout(1200)
async def test_ui_at_5000_nodes_10000_pods(tmp_path):
    nodes, bound = big_cluster(5000)
    cluster, pods = tmp_path / "cluster.yaml", tmp_path / "pods.yaml"
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    cluster.write_text(yaml.dump({"apiVersion": "v1", "kind": "List", "items": nodes + bound}, Dumper=dumper))
    pods.write_text(yaml.dump_all(big_workload(10000), Dumper=dumper))
    m: dict[str, float | int | str] = {}

    async with ui_session(tmp_path, "--cluster", str(cluster), "--pods", str(pods)) as (server, page):
        m["server_startup_s"] = round(server.startup_s, 2)
        start = time.monotonic()
        await page.goto(server.url, timeout=LOAD_TIMEOUT)
        m["data_ready_ms"] = round(await page.wait_for(READY, timeout=LOAD_TIMEOUT))
        m["data_ready_wall_s"] = round(time.monotonic() - start, 2)
        # a first visit schedules the pending pods once (before or after data-ready): idle when shown
        m["idle_after_load_ms"] = round(await page.wait_for(IDLE, timeout=RUN_TIMEOUT))
        paint = await page.paint_timings()
        for key in ("first-paint", "first-contentful-paint", "domContentLoaded", "load"):
            if key in paint:
                m[f"{key}_ms"] = round(paint[key])
        assert "first-contentful-paint" in paint, paint
        st = await state(page)
        assert st["nodes"] == 5000 and sum(g["cells"] for g in st["groups"]) == 5000, st
        assert {g["group"] for g in st["groups"]} == {"eu-west-1a", "eu-west-1b", "eu-west-1c"}, st
        assert int(st["podsTotal"]) == 15000 and 0 < st["podRows"] <= 200, st
        metrics = await page.metrics()
        m["initial_run_server_ms"] = (await server.ok("GET", "/api/runs"))[0]["durationMs"]
        m["dom_elements_after_load"] = await page.evaluate("document.getElementsByTagName('*').length")
        m["js_heap_mb_after_load"] = round(metrics.get("JSHeapUsedSize", 0) / 2**20, 1)
        m["page_timings_ms"] = await page.evaluate("window.__uiTimings || {}")   # the page's own, if it keeps any
        await assert_no_script_error(page)

        # -- a run from the page; the page and the server keep answering --
        runs_before = await server.ok("GET", "/api/runs")
        t0 = await page.evaluate("performance.now()")
        before = await page.evaluate("document.body.dataset.run || ''")
        await page.click("#run")
        clicked = time.monotonic()
        done = f"document.body.dataset.run && document.body.dataset.run !== {json.dumps(before)} && {IDLE}"
        pings, api_latency, conflict = [], [], None
        deadline = time.monotonic() + RUN_TIMEOUT
        while not await page.evaluate(done):
            assert time.monotonic() < deadline, "the run did not finish"
            pings.append(await page.ping(timeout=PING_TIMEOUT))
            t = time.monotonic()
            status, listed, _ = await server.api("GET", "/api/runs", timeout=10)
            api_latency.append(time.monotonic() - t)
            assert status == 200, status
            if conflict is None and len(listed) == len(runs_before) and time.monotonic() - clicked > 1:
                # the page's run has been running for a second: a second one is refused meanwhile
                conflict, body, _ = await server.api("POST", "/api/runs", {"label": "second"}, timeout=10)
                assert conflict == 409, (conflict, body)
            await asyncio.sleep(0.2)
        t1 = await page.wait_for(done, timeout=RUN_TIMEOUT)
        run = await page.evaluate("document.body.dataset.run")
        m["run_from_page_ms"] = round(t1 - t0)
        m["pings_during_run"] = len(pings)
        m["max_ping_during_run_ms"] = round(1000 * max(pings, default=0), 1)
        m["max_api_runs_latency_during_run_ms"] = round(1000 * max(api_latency, default=0), 1)
        m["second_run_status"] = conflict if conflict is not None else "not tried (run finished first)"
        listed = await server.ok("GET", "/api/runs")
        mine = next(r for r in listed if str(r["id"]) == str(run))
        m["run_server_ms"] = mine["durationMs"]
        assert mine["placed"] + mine["pending"] == 10000, mine
        st = await state(page)
        assert 0 < st["podRows"] <= 200 and int(st["podsTotal"]) == 15000, st

        # -- regroup the heatmap --
        t0 = await page.evaluate("performance.now()")
        await page.select("#group-by", "instanceType")
        t1 = await page.wait_for("document.querySelectorAll('#heatmap .heat-group').length === 4", timeout=STEP_TIMEOUT)
        m["group_by_ms"] = round(t1 - t0)
        st = await state(page)
        assert st["nodes"] == 5000 and {g["group"] for g in st["groups"]} == {t[0] for t in TYPES}, st
        await page.select("#group-by", "zone")
        await page.wait_for("document.querySelectorAll('#heatmap .heat-group').length === 3", timeout=STEP_TIMEOUT)
        await screenshot(page, tmp_path, "cluster")

        # -- explain one pod at 5,000 nodes --
        t0 = await page.evaluate("performance.now()")
        shown = await select_pod(page, "shop/web-3")
        m["explain_ms"] = round(await page.evaluate("performance.now()") - t0)
        api_explain = await server.ok("GET", f"/api/runs/{run}/explain?pod=shop/web-3")
        trace = {k: v for k, v in api_explain.items() if k not in ("nodes", "chosen", "victims")}
        check_explain(shown, trace, api_explain, "shop/web-3")
        assert len(shown["rows"]) in (TOP_ROWS, TOP_ROWS + 1), len(shown["rows"])
        metrics = await page.metrics()
        m["dom_elements_at_end"] = await page.evaluate("document.getElementsByTagName('*').length")
        m["js_heap_mb_at_end"] = round(metrics.get("JSHeapUsedSize", 0) / 2**20, 1)
        await assert_no_script_error(page)

    (tmp_path / "ui-measurements.json").write_text(json.dumps(m, indent=2) + "\n")
    print("pysched ui at 5,000 nodes / 10,000 pending pods:", json.dumps(m, indent=2))


# -- the harness itself ------------------------------------------------------------------------

HARNESS_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>cdp</title>
<link rel="icon" href="data:,"><script type="module" src="/app.js"></script></head>
<body><input id="i"><button id="b">go</button><a id="dl" href="/dl" download>dl</a><p id="out"></p></body></html>"""
HARNESS_JS = """
const out = document.getElementById('out');
document.getElementById('i').addEventListener('input', e => { out.textContent = e.target.value; });
document.getElementById('b').addEventListener('click', async () => {
  const r = await fetch('/slow'); out.textContent = await r.text();
  document.body.dataset.run = '1';
});
setTimeout(() => { document.body.dataset.ready = '1'; }, 100);
if (location.search === '?boom') { console.error('bad thing'); setTimeout(() => { throw new Error('boom'); }, 0); }
"""


async def test_cdp_harness(tmp_path):
    """``pysched_dev.cdp`` on a throw-away page: evaluate, wait, input, click, download, errors, kill."""
    executable = chromium()

    async def index(_):
        return web.Response(text=HARNESS_PAGE, content_type="text/html",
                            headers={"Content-Security-Policy": CSP})

    async def slow(_):
        await asyncio.sleep(0.5)
        return web.Response(text="done")

    async def script(_):
        return web.Response(text=HARNESS_JS, content_type="text/javascript")

    async def download(_):
        return web.Response(text="kind: List\n", headers={"Content-Disposition": 'attachment; filename="x.yaml"'})

    app = web.Application()
    for path, handler in (("/", index), ("/app.js", script), ("/slow", slow), ("/dl", download)):
        app.router.add_get(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/"
    try:
        async with Browser.launch(tmp_path / "browser", executable=executable) as browser:
            pid = browser.proc.pid
            page = await browser.new_page(width=WIDTH, height=HEIGHT)
            await page.goto(url)
            assert await page.wait_for(READY, timeout=30) >= 90
            assert {"first-contentful-paint", "load"} <= set(await page.paint_timings())
            assert await page.evaluate("({a: [1, 2], b: null})") == {"a": [1, 2], "b": None}
            with pytest.raises(CDPError, match="nope"):
                await page.evaluate("nope.x")
            await page.fill("#i", "it's \"quoted\"")
            assert await page.text("#out") == "it's \"quoted\""
            t0 = await page.evaluate("performance.now()")
            await page.click("#b", mouse=True)
            assert await page.ping(timeout=PING_TIMEOUT) < PING_TIMEOUT
            assert await page.wait_for("document.body.dataset.run === '1'", timeout=30) - t0 >= 450
            assert (await page.download("#dl", tmp_path / "dl")).read_text() == "kind: List\n"
            assert (await page.screenshot(tmp_path / "shot.png"))[:8] == b"\x89PNG\r\n\x1a\n"
            assert page.script_errors(ignorable) == []
            await page.goto(url + "?boom")
            await page.wait_for(READY, timeout=30)
            await page.wait_for("true", timeout=5)
            assert {"console", "exception"} <= {e["kind"] for e in page.errors}, page.errors
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    finally:
        await runner.cleanup()


async def test_ui_imports_a_live_cluster_read_only(tmp_path, control_plane, admin):
    """``--kubeconfig``: the cluster is listed once (as ``pysched snapshot`` lists it); a run in the
    UI places its pending pod in the UI only - the live pod stays unbound, nothing is written."""
    from pysched_dev.testkit import create_nodes, create_pods, list_pods
    from pysched_dev.testkit import make_node as live_node
    from pysched_dev.testkit import make_pod as live_pod

    await create_nodes(admin, [live_node(f"live-{i}", cpu="4", memory="16Gi") for i in range(3)])
    await create_pods(admin, [live_pod("bound-0", cpu="1", node_name="live-0", scheduler="default-scheduler"),
                              live_pod("waiting", cpu="1", scheduler="pysched")])
    server = UIServer(tmp_path, "--kubeconfig", str(control_plane.kubeconfig))
    try:
        await server.start()
        scenario = await server.ok("GET", "/api/scenario")
        assert sorted(n["name"] for n in scenario["nodes"]) == ["live-0", "live-1", "live-2"]
        states = {p["key"]: p["state"] for p in scenario["pods"]}
        assert states == {"default/bound-0": "bound", "default/waiting": "pending"}, states
        run = await server.ok("POST", "/api/runs", {"label": "what if"})
        placed = {p["pod"]: p["node"] for p in run["placements"]}
        assert placed["default/waiting"] in ("live-0", "live-1", "live-2"), placed
    finally:
        assert server.stop() == 0, server.log()[-3000:]
    live = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in await list_pods(admin, "default")}
    assert live == {"bound-0": "live-0", "waiting": None}, live


async def test_ui_shows_a_gang_and_its_team_quota(tmp_path):
    """A member of a PodGroup in a namespace with an ElasticQuota: selecting it shows the gang's and
    the quota's panels, with no script error."""
    objects = [
        {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
         "metadata": {"name": "job", "namespace": "team"}, "spec": {"minMember": 2}},
        {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
         "metadata": {"name": "team", "namespace": "team"},
         "spec": {"min": {"cpu": "4"}, "max": {"cpu": "8"}}},
        *[{"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"m{i}", "namespace": "team", "labels": {"scheduling.x-k8s.io/pod-group": "job"}},
           "spec": {"schedulerName": "pysched", "containers": [
               {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}
          for i in range(2)]]
    pods = tmp_path / "team.yaml"
    pods.write_text(yaml.safe_dump_all(objects))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "pysched", "plugins": {
            "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
            "multiPoint": {"enabled": [{"name": "Coscheduling"}, {"name": "CapacityScheduling"}]},
            "postFilter": {"enabled": [{"name": "Coscheduling"}, {"name": "CapacityScheduling"}],
                           "disabled": [{"name": "*"}]}}}]}))
    async with ui_session(tmp_path, "--cluster", str(EXAMPLES / "simulate" / "snapshot.yaml"), "--pods", str(pods),
                          "--config", str(config)) as (server, page):
        await page.goto(server.url)
        await page.wait_for(READY, timeout=LOAD_TIMEOUT)
        await click_run(page)
        await select_pod(page, "team/m0")
        panels = await page.evaluate("""(() => ({
            gang: !document.querySelector('#gang-state').hidden && document.querySelector('#gang-state').textContent,
            quota: !document.querySelector('#quota-state').hidden && document.querySelector('#quota-state').textContent,
        }))()""")
        assert panels["gang"] and "job" in panels["gang"], panels
        assert panels["quota"] and "team" in panels["quota"], panels
        await assert_no_script_error(page)


async def test_ui_shows_a_gangs_attempt_rack_by_rack(tmp_path):
    """Kubernetes' own PodGroup with a rack constraint (``pysched ui --feature-gates``): a member's
    explanation shows the group's attempt, one row per rack - the rack that cannot hold the gang
    with its reason, the chosen rack marked - as ``simulate --explain podgroup/...`` gives it."""
    rack = "example.com/rack"
    nodes = [{"apiVersion": "v1", "kind": "Node",
              "metadata": {"name": f"{r}-{i}", "labels": {rack: f"rack-{r}", "kubernetes.io/hostname": f"{r}-{i}"}},
              "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}}
             for r, cpu in (("a", "4"), ("b", "4"), ("c", "8")) for i in range(2)]
    busy = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "busy", "namespace": "default"},
            "spec": {"nodeName": "a-0", "containers": [{"name": "c", "image": "x",
                                                         "resources": {"requests": {"cpu": "2"}}}]}}
    cluster = tmp_path / "racks.yaml"
    cluster.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [*nodes, busy]}))
    pods = tmp_path / "gang.yaml"
    pods.write_text(yaml.safe_dump_all([
        {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
         "metadata": {"name": "train", "namespace": "default"},
         "spec": {"schedulingPolicy": {"gang": {"minCount": 4}},
                  "schedulingConstraints": {"topology": [{"key": rack}]}}},
        *[{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"m{i}", "namespace": "default"},
           "spec": {"schedulerName": "pysched", "schedulingGroup": {"podGroupName": "train"}, "containers": [
               {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}]}}
          for i in range(4)]]))
    gates = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
    async with ui_session(tmp_path, "--cluster", str(cluster), "--pods", str(pods),
                          "--feature-gates", gates) as (server, page):
        await page.goto(server.url)
        await page.wait_for(READY, timeout=LOAD_TIMEOUT)
        await click_run(page)
        await select_pod(page, "default/m1")
        got = await page.evaluate("""(() => {
            const box = document.querySelector('#group-attempt');
            const rows = [...box.querySelectorAll('tr[data-placement]')].map((tr) => ({
                placement: tr.dataset.placement, fits: tr.dataset.fits, chosen: tr.classList.contains('chosen'),
                text: tr.textContent}));
            return {hidden: box.hidden, head: (box.querySelector('#group-attempt-head') || {}).textContent, rows,
                    gang: document.querySelector('#gang-state').textContent};
        })()""")
        assert not got["hidden"], got
        assert got["head"] == "placed in rack-b (best of 2 placements that fit)", got
        assert [(r["placement"], r["fits"], r["chosen"]) for r in got["rows"]] == [
            ("rack-a", "false", False), ("rack-b", "true", True), ("rack-c", "true", False)], got
        assert "minCount (4) cannot be satisfied: 3 scheduled, 0 remaining" in got["rows"][0]["text"], got
        assert "Insufficient cpu" in got["rows"][0]["text"], got
        assert "placed in rack-b" in got["gang"] and "minCount 4" in got["gang"], got
        await page.screenshot(tmp_path / "ui-gang.png")
        await assert_no_script_error(page)
