"""In-process scheduler for e2e tests that must hold a pod mid-cycle: a SchedulerApp on the test's
event loop (no HTTP server, no kopf) and a PreBind plugin the test opens and closes."""

from __future__ import annotations

import asyncio

from pysched.apis import config as configmod
from pysched.app import Options, SchedulerApp
from pysched.client.auth import load_kubeconfig
from pysched.framework.features import default_gates
from pysched.framework.interface import PreBindPlugin
from pysched.framework.status import Status
from pysched.profile import default_registry
from pysched_dev.devcluster import binaries_version


class PauseBeforeBind(PreBindPlugin):
    """Holds every pod in PreBind until the test releases it, then returns ``outcome``."""
    name = "PauseBeforeBind"
    waiting: asyncio.Event
    release: asyncio.Event
    nodes: list[str]
    outcome: Status | None

    @classmethod
    def reset(cls, outcome: Status | None = None) -> None:
        cls.waiting, cls.release, cls.nodes, cls.outcome = asyncio.Event(), asyncio.Event(), [], outcome

    async def pre_bind(self, state, pod, node_name):
        type(self).waiting.set()
        type(self).nodes.append(node_name)
        await type(self).release.wait()
        return type(self).outcome


def paused_profile(**profile) -> dict:
    """A profile with PauseBeforeBind enabled at PreBind."""
    return {"schedulerName": "pysched", "plugins": {"preBind": {"enabled": [{"name": "PauseBeforeBind"}]}}, **profile}


async def in_process_app(control_plane, cfg_raw: dict, *, pause: bool = False) -> SchedulerApp:
    registry = None
    if pause:
        registry = default_registry()
        registry.register(PauseBeforeBind)
    cfg = configmod.parse(cfg_raw)
    release = binaries_version(control_plane.bin)   # behave as the control plane's release, as `pysched run` does
    return SchedulerApp(cfg, Options(kubeconfig=str(control_plane.kubeconfig), serve=False, kopf=False, seed=1,
                                     kube_version=release, feature_gates=default_gates(release)),
                        load_kubeconfig(control_plane.kubeconfig), registry)
