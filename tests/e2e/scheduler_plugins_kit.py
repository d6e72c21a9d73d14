"""Starting scheduler-plugins' kube-scheduler or its status controller (``hack/scheduler-plugins.sh``)
and pysched one after the other on one API server, for the differential tests against
scheduler-plugins: each starter returns an async ``stop()``."""

from __future__ import annotations

from pysched_dev.devcluster import KubeSchedulerProcess, SchedulerPluginsControllerProcess, scheduler_plugins_binary

from .conftest import scheduler_config, wait_for


def upstream_starter(control_plane, profile: dict):
    async def start():
        proc = KubeSchedulerProcess(control_plane, {"profiles": [profile]}, name="scheduler-plugins",
                                    binary=scheduler_plugins_binary()).start()

        async def stop():
            proc.stop()
        return stop
    return start


# scheduler-plugins' kube-scheduler is built on Kubernetes 1.34/1.35's scheduler: pysched is
# compared with it as kube-scheduler 1.35 (the oldest release it follows), whatever the API server.
ORACLE_RELEASE = ["--emulated-version=1.35"]


def pysched_starter(scheduler_factory, profile: dict):
    async def start():
        proc = scheduler_factory(scheduler_config(profiles=[profile]), extra_args=ORACLE_RELEASE)
        proc.start()
        await proc.wait_log("caches synced", 60)

        async def stop():
            proc.terminate()
        return stop
    return start


def upstream_controller_starter(control_plane):
    """scheduler-plugins' ``cmd/controller`` (PodGroup and ElasticQuota status), started once both of
    its controllers run; needs both CRDs served (the manager watches both kinds)."""
    async def start():
        proc = SchedulerPluginsControllerProcess(control_plane).start()

        async def ready():
            return proc.ready()
        await wait_for(ready, 60, interval=0.1, what="scheduler-plugins' controllers started")

        async def stop():
            proc.stop()
        return stop
    return start


def pysched_controllers_starter(scheduler_factory, config: dict):
    """pysched with ``config``, started once its PodGroup and ElasticQuota status controllers run
    (a profile must enable Coscheduling and CapacityScheduling)."""
    async def start():
        proc = scheduler_factory(config)
        proc.start()
        await proc.wait_log("podgroup controller started", 60)
        await proc.wait_log("elasticquota controller started", 60)

        async def stop():
            proc.terminate()
        return stop
    return start
