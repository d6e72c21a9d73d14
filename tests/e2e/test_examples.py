"""``examples/README.md``, section by section, on the cluster ``make dev-cluster`` gives.

One dev cluster for the module, started as ``make dev-cluster`` starts it (``devcluster_cli.populate``
with Kueue and Prometheus on). Each live example's section (``<!-- example: NAME -->`` up to the
next heading) is run as a user would: its background block (pysched with the example's
configuration and the dev cluster's kubeconfig, as a subprocess) until the regex it names appears,
then every ``$ `` command with bash (``kubectl`` the built one, ``KUBECONFIG`` the cluster's), its
output compared with the README's (``...`` lines match any lines, ``...`` in a line any text,
whitespace runs compare equal; ``eventually=N`` re-runs the block until it matches, up to N s).
The expected outcomes are the README's: nothing is restated here. Two deviations, both forced by
the test machine: pysched gets ``--secure-port=0`` (no fixed port), and the load-aware
configuration's ``127.0.0.1:9090`` is rewritten to the port this cluster's Prometheus got.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pysched_dev.devcluster import binaries_dir, free_port
from pysched_dev.devcluster_cli import populate
from pysched_dev.devcluster_examples import ExamplesOptions
from pysched_dev.livecluster import LivingCluster

from .conftest import REPO

pytestmark = pytest.mark.e2e
README = REPO / "examples" / "README.md"
DEFAULT_PROMETHEUS = "127.0.0.1:9090"
_DIRECTIVE = re.compile(r"<!--\s*doc-test:\s*(.*?)\s*-->")
_BLOCK = re.compile(r"(?:(<!--\s*doc-test:.*?-->)\s*\n)?```console\n(.*?)```", re.S)


@dataclass
class Command:
    line: str
    expected: list[str] = field(default_factory=list)


@dataclass
class Block:
    commands: list[Command]
    directives: dict[str, str]


def parse_directives(comment: str | None) -> dict[str, str]:
    """``background wait="caches synced"`` -> {"background": "", "wait": "caches synced"}."""
    m = _DIRECTIVE.match(comment or "")
    if not m:
        return {}
    return {k: v or w for k, v, w in re.findall(r'(\w+)(?:="([^"]*)"|=(\S+))?', m.group(1))}


def sections(text: str) -> dict[str, list[Block]]:
    """Each ``<!-- example: NAME -->`` section's console blocks, in order."""
    out: dict[str, list[Block]] = {}
    for m in re.finditer(r"<!--\s*example:\s*(\S+)\s*-->(.*?)(?=\n## |\Z)", text, re.S):
        blocks = []
        for b in _BLOCK.finditer(m.group(2)):
            directives = parse_directives(b.group(1))
            commands: list[Command] = []
            pending = ""
            for line in b.group(2).splitlines():
                if pending or line.startswith("$ "):
                    part = line[2:] if not pending else line
                    if part.endswith(" \\"):
                        pending += part[:-2] + " "
                        continue
                    commands.append(Command(pending + part))
                    pending = ""
                elif commands:
                    commands[-1].expected.append(line)
            blocks.append(Block(commands, directives))
        out[m.group(1)] = blocks
    return out


def pattern(expected: list[str]) -> re.Pattern[str]:
    parts = []
    for line in expected:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
            continue
        chunks = [r"[ \t]+".join(re.escape(w) for w in piece.split()) for piece in line.strip().split("...")]
        parts.append(r"[ \t]*" + ".*?".join(chunks) + r"[ \t]*\n")
    return re.compile("".join(parts), re.S)


def normalise(output: str) -> str:
    lines = [line.rstrip() for line in output.splitlines()]
    return "".join(f"{line}\n" for line in lines)


def test_every_live_example_has_a_section():
    """Each example directory is run here: the README has a section for it (and none for a ghost)."""
    dirs = {p.name for p in (REPO / "examples").iterdir()
            if p.is_dir() and p.name not in ("simulate", "living-cluster", "pysched-plugin-example")}
    assert set(sections(README.read_text())) == dirs


@pytest.fixture(scope="module")
def dev_cluster():
    lc = LivingCluster(node_monitor_grace_seconds=20, toleration_seconds=30).start()
    try:
        port = free_port()
        asyncio.run(populate(lc, 0, ExamplesOptions(kueue="on", prometheus="on", prometheus_port=port)))
        yield lc, port
    finally:
        lc.stop()


def _env(lc: LivingCluster) -> dict[str, str]:
    path = os.pathsep.join([str(Path(sys.executable).parent), str(binaries_dir()), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path, "KUBECONFIG": str(lc.kubeconfig)}


def _start_pysched(command: str, env: dict[str, str], tmp_path: Path, prom_port: int, wait: str):
    argv = shlex.split(command)
    assert argv[0] == "pysched", command
    config = Path(REPO / argv[argv.index("--config") + 1])
    text = config.read_text()
    if DEFAULT_PROMETHEUS in text:   # the only deviation: this cluster's Prometheus port
        moved = tmp_path / config.name
        moved.write_text(text.replace(DEFAULT_PROMETHEUS, f"127.0.0.1:{prom_port}"))
        argv[argv.index("--config") + 1] = str(moved)
    log = tmp_path / "pysched.log"
    argv = [a.replace("$KUBECONFIG", env["KUBECONFIG"]) for a in argv]
    with open(log, "wb") as f:
        proc = subprocess.Popen([sys.executable, "-m", "pysched", *argv[1:], "--secure-port=0"], cwd=REPO, env=env,
                                stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while not re.search(wait, log.read_text(errors="replace")):
        assert proc.poll() is None, log.read_text()[-4000:]
        assert time.monotonic() < deadline, f"pysched did not log {wait!r}:\n{log.read_text()[-4000:]}"
        time.sleep(0.2)
    return proc, log


def _run(command: str, env: dict[str, str]) -> str:
    proc = subprocess.run(["bash", "-c", command], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    return normalise(proc.stdout + proc.stderr)


@pytest.mark.parametrize("example", sorted(sections(README.read_text())))
def test_example_as_the_readme_says(example, dev_cluster, tmp_path):
    lc, prom_port = dev_cluster
    env = _env(lc)
    sched = None
    try:
        for block in sections(README.read_text())[example]:
            if "background" in block.directives:
                (cmd,) = block.commands
                sched, log = _start_pysched(cmd.line, env, tmp_path, prom_port, block.directives.get("wait", "."))
                continue
            deadline = time.monotonic() + float(block.directives.get("eventually", 0))
            while True:
                failures = []
                for cmd in block.commands:
                    got = _run(cmd.line, env)
                    if not pattern(cmd.expected).fullmatch(got):
                        failures.append(f"$ {cmd.line}\nexpected:\n" + "\n".join(cmd.expected) + f"\ngot:\n{got}")
                        break
                if not failures or time.monotonic() >= deadline:
                    break
                time.sleep(1)
            assert not failures, failures[0] + (f"\npysched log:\n{log.read_text()[-3000:]}" if sched else "")
    finally:
        if sched is not None:
            os.killpg(sched.pid, signal.SIGTERM)
            sched.wait(30)
