"""A kubelet for pysched's own pods in the living cluster: KWOK runs pods on paper only, so the test
runs each Running pysched pod's container as a real ``pysched`` process and stops it when the pod
is deleted, as a kubelet would.

For a pod that is bound, Running (KWOK's report) and not being deleted, the runner starts the image's
ENTRYPOINT (``Dockerfile``) with the container's ``args`` and ``env`` (downward-API ``fieldRef``s
resolved), its ``configMap`` volumes written out as files and ``emptyDir`` volumes made, under a
private directory that stands in for the container's root: an argument naming a mount path is
rewritten to the same path under that directory, and ``--secure-port`` to a free port. The process
authenticates as the pod's ServiceAccount (a bound token from the TokenRequest API in a kubeconfig),
so the manifests' RBAC is what it gets. When the pod gets a deletionTimestamp the process gets
SIGTERM, and SIGKILL after the pod's grace period.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from pysched_dev.devcluster import ControlPlane, free_port, write_kubeconfig
from pysched_dev.testkit import list_pods

from .conftest import REPO
from .test_image_entrypoint import final_stage

VENV_BIN = Path(sys.executable).parent


@dataclass
class Container:
    pod: str
    uid: str
    proc: subprocess.Popen
    log: Path
    grace: float
    stopping: bool = False


@dataclass
class PodRunner:
    cp: ControlPlane
    admin: object
    namespace: str
    selector: str
    root: Path
    containers: dict[str, Container] = field(default_factory=dict)
    exited: dict[str, int] = field(default_factory=dict)     # pod name -> exit code
    _task: asyncio.Task | None = None

    def start(self) -> PodRunner:
        self.stage = final_stage((REPO / "Dockerfile").read_text())
        self._task = asyncio.create_task(self._loop())
        return self

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for c in self.containers.values():
            _signal(c.proc, signal.SIGKILL)
            c.proc.wait()

    def logs(self) -> str:
        return "\n".join(f"--- {c.pod}\n{c.log.read_text(errors='replace')[-3000:]}" for c in self.containers.values())

    async def _loop(self) -> None:
        while True:
            pods = await list_pods(self.admin, self.namespace, labelSelector=self.selector)
            seen = set()
            for pod in pods:
                uid = pod["metadata"]["uid"]
                seen.add(uid)
                c = self.containers.get(uid)
                if pod["metadata"].get("deletionTimestamp"):
                    if c and not c.stopping:
                        self._terminate(c)
                elif c is None and pod["spec"].get("nodeName") and pod["status"].get("phase") == "Running":
                    self.containers[uid] = await self._run(pod)
            for uid, c in self.containers.items():
                if uid not in seen and not c.stopping:
                    self._terminate(c)
                if c.proc.poll() is not None:
                    self.exited.setdefault(c.pod, c.proc.returncode)
            await asyncio.sleep(0.2)

    def _terminate(self, c: Container) -> None:
        c.stopping = True
        _signal(c.proc, signal.SIGTERM)
        loop = asyncio.get_running_loop()
        loop.call_later(c.grace, _signal, c.proc, signal.SIGKILL)

    async def _run(self, pod: dict) -> Container:
        meta, spec = pod["metadata"], pod["spec"]
        (ctr,) = spec["containers"]
        root = self.root / meta["name"]
        root.mkdir(parents=True)
        volumes = {v["name"]: v for v in spec.get("volumes") or ()}
        mounts = {}
        for m in ctr.get("volumeMounts") or ():
            if m["mountPath"].startswith("/var/run/secrets"):
                continue                  # the projected token: a kubeconfig stands in for it
            path = root / m["mountPath"].lstrip("/")
            path.mkdir(parents=True, exist_ok=True)
            vol = volumes[m["name"]]
            if "configMap" in vol:
                cm = await self.admin.get(f"/api/v1/namespaces/{meta['namespace']}/configmaps/"
                                          f"{vol['configMap']['name']}")
                for key, value in (cm.get("data") or {}).items():
                    (path / key).write_text(value)
            mounts[m["mountPath"]] = path
        port = free_port()
        args = []
        for a in ctr.get("args") or self.stage["cmd"]:
            if a.startswith("--secure-port="):
                a = f"--secure-port={port}"
            flag, eq, value = a.partition("=") if a.startswith("--") else ("", "", a)
            for mount_path, local in sorted(mounts.items(), key=lambda m: -len(m[0])):
                if value == mount_path or value.startswith(mount_path.rstrip("/") + "/"):
                    value = str(local) + value[len(mount_path):]
                    break
            args.append(flag + eq + value)
        env = {**os.environ, **self.stage["env"], "HOME": str(root), "TMPDIR": str(root),
               "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}"}
        for e in ctr.get("env") or ():
            ref = (e.get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath")
            env[e["name"]] = {"metadata.name": meta["name"], "metadata.namespace": meta["namespace"]}.get(ref, e.get(
                "value", ""))
        sa = spec.get("serviceAccountName", "default")
        tr = await self.admin.request(
            "POST", f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{sa}/token", rate_limit=False,
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                  "spec": {"expirationSeconds": 3600, "boundObjectRef": {"kind": "Pod", "apiVersion": "v1",
                                                                          "name": meta["name"], "uid": meta["uid"]}}})
        kubeconfig = write_kubeconfig(root / "kubeconfig", server=self.cp.url, ca_file=self.cp.ca_file,
                                      token=tr["status"]["token"], user=sa)
        log = root / "container.log"
        with open(log, "wb") as f:
            proc = subprocess.Popen([*self.stage["entrypoint"], *args, "--kubeconfig", str(kubeconfig),
                                     "--bind-address", "127.0.0.1"],
                                    cwd=root, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        return Container(meta["name"], meta["uid"], proc, log, float(spec.get("terminationGracePeriodSeconds", 30)))


def _signal(proc: subprocess.Popen, sig: int) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
