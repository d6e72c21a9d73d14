"""``Scheduler.under_way``: what the secure port waits for before it opens (``SchedulerApp._serve``).

Set once the first bind has been answered, the first attempt has failed, or there is nothing to
schedule - never while the first pod's bind is still on its way, so importing and building the
server does not delay the first bind.
"""

from __future__ import annotations

import asyncio

from pysched.apis import config as configmod
from pysched.framework import BindPlugin
from pysched.profile import default_registry
from pysched.tools.offline import OfflineScheduler

from .conftest import node, pod
from .livekit import run_live, until


class HeldBinder(BindPlugin):
    """Binds once ``release`` is set."""
    name = "HeldBinder"
    release: asyncio.Event | None = None
    bound: list[str] = []

    async def bind(self, state, pod, node_name):
        assert HeldBinder.release is not None
        await HeldBinder.release.wait()
        HeldBinder.bound.append(pod.name)
        return None


def sim_with_held_binder() -> OfflineScheduler:
    registry = default_registry()
    registry["HeldBinder"] = HeldBinder
    cfg = configmod.parse({
        "apiVersion": configmod.API_VERSION, "kind": configmod.KIND,
        "profiles": [{"schedulerName": "pysched", "plugins": {
            "bind": {"enabled": [{"name": "HeldBinder"}], "disabled": [{"name": "*"}]}}}]})
    HeldBinder.bound = []
    return OfflineScheduler(cfg, registry=registry)


def test_under_way_once_the_first_bind_is_answered_not_while_it_is_in_flight():
    sim = sim_with_held_binder()
    sim.add_node(node("a"))

    async def body():
        HeldBinder.release = asyncio.Event()
        sim.add_pod(pod("p"))
        sim.add_pod(pod("q"))
        await until(lambda: len(sim.scheduler.binding_tasks) == 2)   # both cycles done, binds held
        await asyncio.sleep(0.05)
        assert not sim.scheduler.under_way.is_set()
        HeldBinder.release.set()
        await until(sim.scheduler.under_way.is_set)
        assert HeldBinder.bound
    run_live(sim, body)


def test_under_way_when_there_is_nothing_to_schedule():
    sim = sim_with_held_binder()

    async def body():
        await until(sim.scheduler.under_way.is_set)
    run_live(sim, body)


def test_under_way_after_a_failed_first_attempt():
    sim = sim_with_held_binder()
    sim.add_node(node("small", cpu="1"))

    async def body():
        HeldBinder.release = asyncio.Event()
        sim.add_pod(pod("big", cpu="4"))
        await until(sim.scheduler.under_way.is_set)
        assert not HeldBinder.bound
    run_live(sim, body)
