"""Every documentation page that shows a command and its output works as written.

Each page with a ``console`` block (``pysched_dev.docpages`` says how blocks are read) is run from
its first block to its last, on the cluster the page tells the reader to use: a fresh
``make dev-cluster`` (the same module, with the same binaries), whose printed ``export`` lines are
applied as a reader pastes them. Commands run through ``bash`` from a directory that looks like a
checkout (the repository's top-level entries linked in), files the page asks for are written where
the session is, and every output is compared with the page's. A page whose output drifts fails.

Pages that start pysched by hand bind its default secure port (10259) as the reader's would, and
the dev cluster's Prometheus binds the port the load-aware example names, so such pages take one
lock in turn; everything else about them runs in parallel. Of the dev cluster's optional services
(Kueue, Prometheus: ``make dev-cluster`` starts them when they are built) a page gets those it
names (``<!-- doc-test: page services=kueue -->``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shlex
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from pysched_dev.devcluster import binaries_dir, terminate_process
from pysched_dev.devcluster_cli import path_line
from pysched_dev.docpages import (
    SERVICES,
    Command,
    ConsoleBlock,
    FileBlock,
    Page,
    discover,
    normal_output,
    output_matches,
)
from pysched_dev.livecluster import kwok_binary

from .conftest import REPO

pytestmark = pytest.mark.e2e

PAGES = discover(REPO / "docs")
PORT_LOCK = Path("/tmp/pysched-docs-secure-port.lock")
COMMAND_TIMEOUT = 300.0


def test_every_console_block_is_run_or_says_why_not():
    """A page's sample session is either run below or carries the reason it is not."""
    assert PAGES, "no page has a console block"
    for page in PAGES:
        for block in page.console_blocks:
            assert not block.skip or len(block.skip) > 10, f"{page.path.name}:{block.line}: skip reason"


class Session:
    """A reader's shell: a working directory, exported variables, terminals left running."""

    def __init__(self, root: Path, env: dict[str, str]):
        self.cwd = root
        self.env = env
        self.background: list[tuple[subprocess.Popen, Path]] = []

    def export(self, line: str) -> None:
        """Apply an ``export NAME=VALUE`` line as bash would (quotes, ``$PATH``)."""
        out = subprocess.run(["bash", "-c", f"{line} >/dev/null && env -0"], env=self.env, cwd=self.cwd,
                             capture_output=True, text=True, check=True).stdout
        self.env = dict(item.split("=", 1) for item in out.split("\0") if "=" in item)

    def run(self, command: str) -> tuple[int, str]:
        words = shlex.split(command) if command.startswith(("cd ", "export ")) else []
        if words[:1] == ["cd"] and len(words) == 2:
            target = (self.cwd / os.path.expanduser(words[1])).resolve()
            assert target.is_dir(), f"cd {words[1]}: no such directory"
            self.cwd = target
            return 0, ""
        if words[:1] == ["export"]:
            self.export(command)
            return 0, ""
        proc = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=self.cwd, env=self.env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=COMMAND_TIMEOUT)
        return proc.returncode, proc.stdout

    def start(self, command: str, wait: str, log: Path) -> None:
        with log.open("w") as out:
            proc = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=self.cwd, env=self.env, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.background.append((proc, log))
        if not wait:
            return
        deadline = time.monotonic() + 120
        while not re.search(wait, log.read_text()):
            assert proc.poll() is None, f"{command}: exited {proc.returncode} before {wait!r}:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"{command}: no {wait!r} in 120 s:\n{log.read_text()}"
            time.sleep(0.2)

    def stop(self) -> None:
        for proc, _ in reversed(self.background):
            stop_group(proc)
        self.background.clear()


def stop_group(proc: subprocess.Popen, grace: float = 15.0) -> None:
    """Ctrl-C for a process and its children, then SIGKILL after ``grace`` seconds."""
    terminate_process(proc, grace, sig=signal.SIGINT)


def checkout_like(root: Path) -> Path:
    """A directory a reader would stand in: the repository's top-level entries, linked."""
    root.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in (".git", ".venv", "site", "build", "dist"):
            (root / entry.name).symlink_to(entry)
    return root


def own_venv(where: Path, env: dict[str, str]) -> dict[str, str]:
    """A virtual environment over the repository's (its packages visible through a .pth file), so a
    page's ``pip install`` stays in it; ``pysched`` there runs its interpreter, as a reader's would."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    site = next(where.glob("lib/python*/site-packages"))
    (site / "repo-venv.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    script = (REPO / ".venv" / "bin" / "pysched").read_text().splitlines()
    (where / "bin" / "pysched").write_text("\n".join([f"#!{where / 'bin' / 'python'}", *script[1:]]) + "\n")
    (where / "bin" / "pysched").chmod(0o755)
    return {**env, "PATH": f"{where / 'bin'}:{env['PATH']}", "VIRTUAL_ENV": str(where)}


@contextlib.contextmanager
def dev_cluster(log: Path, services: frozenset[str]):
    """``make dev-cluster``: yields the ``export`` lines it prints for the reader to paste. Of its
    optional services (Kueue, Prometheus) only those in ``services`` are started."""
    env = {**os.environ, "PYSCHED_BIN_DIR": str(binaries_dir()), "PYSCHED_KWOK": str(kwok_binary())}
    with log.open("w") as out:
        flags = [f"--{name}={'on' if name in services else 'off'}" for name in SERVICES]
        proc = subprocess.Popen([sys.executable, "-m", "pysched_dev.devcluster_cli", *flags], cwd=REPO, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while "Ctrl-C stops everything" not in log.read_text():
            assert proc.poll() is None, f"make dev-cluster exited {proc.returncode}:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"make dev-cluster not up in 180 s:\n{log.read_text()}"
            time.sleep(0.2)
        yield [line.strip() for line in log.read_text().splitlines() if line.strip().startswith("export ")]
    finally:
        stop_group(proc, grace=30)


def check(page: Page, block: ConsoleBlock, session: Session) -> list[str]:
    """Run the block's commands; the mismatches, as readable reports (empty when it is as written)."""
    problems = []
    for i, command in enumerate(block.commands):
        code, output = session.run(command.text)
        want = block.exit if i == len(block.commands) - 1 else 0
        where = f"{page.path.name}:{command.line}: $ {command.text}"
        if code != want:
            problems.append(f"{where}\nexited {code}, the page expects {want}:\n{output}")
        elif command.expected and not output_matches(command.expected, output):
            problems.append(drift(page, command, output))
    return problems


def drift(page: Page, command: Command, output: str) -> str:
    """What the page shows for ``command`` beside what it printed."""
    return (f"{page.path.name}:{command.line}: $ {command.text}\n--- the page shows:\n" + "\n".join(command.expected)
            + f"\n--- printed:\n{normal_output(output)}")


def hold_port_lock(stack: contextlib.ExitStack) -> None:
    """Until the page ends, no other page binds the fixed ports (pysched's 10259, Prometheus's 9090)."""
    fcntl.flock(stack.enter_context(PORT_LOCK.open("a")), fcntl.LOCK_EX)


def run_page(page: Page, tmp: Path) -> None:
    root = checkout_like(tmp / "checkout")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSCHED_", "KUBECONFIG", "PYTEST", "VIRTUAL_ENV"))}
    env.update(HOME=str(tmp / "home"), LC_ALL="C.UTF-8", COLUMNS="200", NO_COLOR="1")
    Path(env["HOME"]).mkdir()
    with contextlib.ExitStack() as stack:
        if page.cluster == "dev-cluster":
            if page.services:       # Prometheus serves the port the load-aware example names
                hold_port_lock(stack)
            exports = stack.enter_context(dev_cluster(tmp / "dev-cluster.log", page.services))
            assert any("PATH=" in e for e in exports) and any("KUBECONFIG=" in e for e in exports), exports
        else:
            exports = [path_line()]     # what make dev-cluster's PATH line gives, without a cluster
        session = Session(root, env)
        for line in exports:
            session.export(line)
        if page.venv == "own":
            session.env = own_venv(tmp / "venv", session.env)
        if any(b.background and b.commands[0].text.startswith("pysched --") for b in page.console_blocks) \
                and not page.services:     # a scheduler: its secure port is 10259
            hold_port_lock(stack)
        stack.callback(session.stop)
        for n, step in enumerate(page.steps):
            if isinstance(step, FileBlock):
                target = session.cwd / step.path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(step.content)
                continue
            if step.skip:
                continue
            if [c.text for c in step.commands] == ["make dev-cluster"]:
                # the cluster the runner started: its banner is the block's output
                assert page.cluster == "dev-cluster", f"{page.path.name}:{step.line}: make dev-cluster, cluster=none"
                shown = (tmp / "dev-cluster.log").read_text()
                if not output_matches(step.commands[0].expected, shown):
                    pytest.fail(drift(page, step.commands[0], shown), pytrace=False)
                continue
            if step.background:
                command = step.commands[0]
                log = tmp / f"background-{n}.log"
                session.start(command.text, step.wait, log)
                settled = time.monotonic() + 10     # the line the wait matched may still be being written
                while (command.expected and not output_matches([*command.expected, "..."], log.read_text())
                       and time.monotonic() < settled):
                    time.sleep(0.2)
                if command.expected and not output_matches([*command.expected, "..."], log.read_text()):
                    pytest.fail(drift(page, command, log.read_text()), pytrace=False)
                continue
            deadline = time.monotonic() + step.eventually
            while problems := check(page, step, session):
                if time.monotonic() >= deadline:
                    logs = "".join(f"\n--- {log.name}:\n{log.read_text()[-3000:]}" for _, log in session.background)
                    pytest.fail("\n\n".join(problems) + logs, pytrace=False)
                time.sleep(1.0)


@pytest.mark.parametrize("page", [p for p in PAGES if p.runs], ids=lambda p: p.path.name)
def test_page_works_as_written(page, tmp_path):
    run_page(page, tmp_path)
