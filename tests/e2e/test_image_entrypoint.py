"""The container image's entrypoint under the image's constraints, without a Docker engine.

The command, environment and user come from the Dockerfile's final stage (ENTRYPOINT + CMD, ENV,
USER), so this test follows the Dockerfile. The process runs as that uid/gid (65532, via
``setpriv``) with a read-only root filesystem made with a private mount namespace (``unshare
--mount``, the tests run as root): an overlay of ``/`` (repo and venv included) remounted read-only
and ``chroot``-ed into, with only these mounts inside it, as a kubelet would lay out the pod:

* ``/tmp``: a fresh host directory, mode 1777 (the Deployment's emptyDir), the only writable path
  (besides ``/dev``, bind-mounted from the host as a runtime provides it);
* ``/etc/pysched``: the base ConfigMap's ``config.yaml``, read-only (the ConfigMap volume);
* ``/var/run/secrets/kubernetes.io/serviceaccount``: token, ca.crt and namespace of the manifests'
  ServiceAccount, read-only; ``KUBERNETES_SERVICE_HOST``/``_PORT`` point at the test API server:
  pysched uses its in-cluster credentials as in a pod.

The image installs pysched into site-packages and puts ``pysched`` on PATH; here the venv's
``bin`` is first on PATH instead. The image's Python is world-readable under /usr/local; this
machine's may sit under a directory closed to others (/root for pyenv): the overlay, not the host,
gets o+x on such directories on the way to the interpreter and the repo. ``--secure-port`` and
``--bind-address`` are appended to the command so that parallel tests do not collide on 10259.

Checked: it takes the Lease (in the ServiceAccount's namespace, the configuration naming none), logs
``caches synced``, serves ``/healthz`` over HTTPS, logs no write error, wrote only its serving
certificate into ``/tmp``, changed nothing in the repo or the venv, and exits 0 on SIGTERM.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pysched_dev.devcluster import free_port

from . import kustomize
from .conftest import REPO, https_get, wait_for

pytestmark = pytest.mark.e2e
VENV_BIN = Path(sys.executable).parent   # the venv running the tests, with `pysched` in it


def final_stage(dockerfile: str) -> dict:
    """ENV, USER, ENTRYPOINT and CMD of the Dockerfile's last stage (exec-form ENTRYPOINT/CMD only)."""
    lines, cur = [], ""
    for raw in dockerfile.splitlines():
        if raw.strip().startswith("#") and not cur:
            continue
        cur += raw.rstrip()
        if cur.endswith("\\"):
            cur = cur[:-1] + " "
            continue
        if cur.strip():
            lines.append(cur.strip())
        cur = ""
    stage: dict = {}
    for line in lines:
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word == "FROM":
            stage = {"env": {}, "user": "root"}
        elif word == "ENV":
            for tok in shlex.split(rest):
                key, sep, value = tok.partition("=")
                assert sep, f"ENV {rest!r}: use the KEY=VALUE form"
                stage["env"][key] = value
        elif word == "USER":
            stage["user"] = rest.strip()
        elif word in ("ENTRYPOINT", "CMD"):
            stage[word.lower()] = json.loads(rest)   # exec form: no shell in the image's command
    return stage


def closed_ancestors(*paths: Path) -> list[str]:
    """Directories on the way to paths that others may not traverse."""
    out = []
    for path in paths:
        for d in [*reversed(path.parents), path]:
            if d.is_dir() and not d.stat().st_mode & stat.S_IXOTH and str(d) not in out:
                out.append(str(d))
    return out


def snapshot(*roots: Path) -> dict[str, tuple[int, int]]:
    """(mtime_ns, size) of every file and directory under roots, bytecode caches aside (the test
    process itself may write those while it imports)."""
    out = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d not in ("__pycache__", ".pytest_cache")]
            for name in [*filenames, *dirnames, "."]:
                p = os.path.join(dirpath, name)
                st = os.lstat(p)
                out[p] = (st.st_mtime_ns, st.st_size) if name != "." else (st.st_mtime_ns, 0)
    return out


JAIL = r"""
set -eu
S=$1; shift
mount -t tmpfs -o mode=0755 tmpfs "$S"
mkdir "$S/up" "$S/work" "$S/root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$S/up,workdir=$S/work" "$S/root"
mkdir -p "$S/root/etc/pysched" "$S/root/run/secrets/kubernetes.io/serviceaccount"
mount --bind -o ro "$CONFIG_DIR" "$S/root/etc/pysched"
mount --bind -o ro "$SA_DIR" "$S/root/run/secrets/kubernetes.io/serviceaccount"
mount --rbind /proc "$S/root/proc"
mount --rbind /dev "$S/root/dev"
mount --rbind /sys "$S/root/sys"
mount --bind "$WRITABLE" "$S/root/tmp"
for d in $KEEP; do mkdir -p "$S/root$d"; mount --bind "$d" "$S/root$d"; mount -o remount,bind,ro "$S/root$d"; done
for d in $TRAVERSE; do chmod o+x "$S/root$d"; done
mount -o remount,ro "$S/root"
exec chroot "$S/root" setpriv --reuid="$RUN_UID" --regid="$RUN_GID" --clear-groups --no-new-privs -- \
    env -i "$@"
"""


def test_dockerfile_final_stage_is_non_root_and_exec_form():
    stage = final_stage((REPO / "Dockerfile").read_text())
    assert stage["user"] == "65532:65532"
    assert stage["entrypoint"] == ["pysched"] and stage["cmd"][0] == "--config"
    assert stage["env"]["HOME"] == "/tmp" and stage["env"]["PYTHONDONTWRITEBYTECODE"] == "1"


async def test_entrypoint_runs_as_65532_with_a_read_only_root(control_plane, admin, tmp_path):
    missing = [t for t in ("unshare", "setpriv", "chroot", "mount") if not shutil.which(t)]
    if os.geteuid() != 0 or missing:
        pytest.skip(f"needs root and {', '.join(missing) or 'mount namespaces'} for a read-only root")
    stage = final_stage((REPO / "Dockerfile").read_text())
    uid, _, gid = stage["user"].partition(":")
    command = stage["entrypoint"] + stage["cmd"]
    config_path = Path(command[command.index("--config") + 1])

    objs = await kustomize.apply(admin, REPO / "manifests")
    sa = next(o for o in objs if o["kind"] == "ServiceAccount")["metadata"]
    cm = next(o for o in objs if o["kind"] == "ConfigMap")
    tr = await admin.request("POST", f"/api/v1/namespaces/{sa['namespace']}/serviceaccounts/{sa['name']}/token",
                             rate_limit=False, body={"apiVersion": "authentication.k8s.io/v1",
                                                     "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}})
    config_dir, sa_dir, writable, stage_dir = (tmp_path / n for n in ("config", "sa", "writable", "stage"))
    for d in (config_dir, sa_dir, writable, stage_dir):
        d.mkdir()
    (config_dir / config_path.name).write_text(cm["data"]["config.yaml"])
    (sa_dir / "token").write_text(tr["status"]["token"])
    (sa_dir / "namespace").write_text(sa["namespace"])
    shutil.copy(control_plane.ca_file, sa_dir / "ca.crt")
    for d in (config_dir, sa_dir):
        d.chmod(0o755)
    for f in (*config_dir.iterdir(), *sa_dir.iterdir()):
        f.chmod(0o644)
    writable.chmod(0o1777)
    assert config_path.parent == Path("/etc/pysched"), "the jail mounts the configuration at /etc/pysched"

    # A checkout (and its venv) under /tmp - CI's clean clone may be there - would be hidden by the
    # pod's /tmp: it is bind-mounted back, read-only, at its own path (the mount point is the only
    # thing in the writable dir not written by pysched, and is left out of the checks below).
    keep = [p for p in {REPO.resolve(), VENV_BIN.resolve().parent} if p.is_relative_to("/tmp")]
    kept_tops = {p.relative_to("/tmp").parts[0] for p in keep}
    port = free_port()
    env = {**stage["env"], "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin",
           "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(control_plane.apiserver_port)}
    argv = [f"{k}={v}" for k, v in env.items()] + command + ["--secure-port", str(port), "--bind-address", "127.0.0.1"]
    before = snapshot(REPO, VENV_BIN.parent)
    log_path = tmp_path / "pysched.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", JAIL, "jail", str(stage_dir), *argv],
            env={**os.environ, "CONFIG_DIR": str(config_dir), "SA_DIR": str(sa_dir), "WRITABLE": str(writable),
                 "RUN_UID": uid, "RUN_GID": gid, "KEEP": " ".join(str(k) for k in keep),
                 "TRAVERSE": " ".join(closed_ancestors(Path(os.path.realpath(sys.executable)).parent, REPO))},
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def logged():
            text = log_path.read_text(errors="replace")
            assert proc.poll() is None, f"pysched exited ({proc.returncode}):\n{text[-4000:]}"
            return text

        async def synced():
            return "caches synced" in logged()
        await wait_for(synced, 60, what="caches synced")

        async def leader():
            try:
                lease = await admin.get(f"/apis/coordination.k8s.io/v1/namespaces/{sa['namespace']}/leases/pysched")
            except Exception:   # 404 before the first election
                return None
            return lease["spec"].get("holderIdentity")
        await wait_for(leader, 60, what=f"Lease pysched in {sa['namespace']}")

        async def healthy():
            logged()
            try:
                return await https_get(f"https://127.0.0.1:{port}/healthz")
            except OSError:
                return None
        assert await wait_for(healthy, 30, what="/healthz served") == (200, "ok")

        text = logged()
        assert "Read-only file system" not in text and "Permission denied" not in text, text[-4000:]
        # What pysched writes at start-up: the self-signed serving certificate, in /tmp only.
        written = [p for p in writable.iterdir() if p.name not in kept_tops]
        wrote = sorted(str(q.relative_to(writable)) for p in written for q in (p, *p.rglob("*")))
        assert wrote[0] == "pysched-certs" and all(w.startswith("pysched-certs/") for w in wrote[1:]), wrote
        assert {q.stat().st_uid for p in written for q in (p, *p.rglob("*"))} == {int(uid)}

        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(30) == 0, log_path.read_text(errors="replace")[-4000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    after = snapshot(REPO, VENV_BIN.parent)
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    assert not changed, changed[:20]
