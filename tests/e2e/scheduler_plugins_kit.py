"""Starting scheduler-plugins' kube-scheduler (``hack/scheduler-plugins.sh``) and pysched one after
the other on one API server, for the differential tests against scheduler-plugins: each starter
returns an async ``stop()``."""

from __future__ import annotations

from pysched_dev.devcluster import KubeSchedulerProcess, scheduler_plugins_binary

from .conftest import scheduler_config


def upstream_starter(control_plane, profile: dict):
    async def start():
        proc = KubeSchedulerProcess(control_plane, {"profiles": [profile]}, name="scheduler-plugins",
                                    binary=scheduler_plugins_binary()).start()

        async def stop():
            proc.stop()
        return stop
    return start


def pysched_starter(scheduler_factory, profile: dict):
    async def start():
        proc = scheduler_factory(scheduler_config(profiles=[profile]))
        proc.start()
        await proc.wait_log("caches synced", 60)

        async def stop():
            proc.terminate()
        return stop
    return start
