"""SchedulingGates (PreEnqueue): a pod with ``spec.schedulingGates`` waits outside the active queue.

When the last gate is removed (a pod update), the pod enters activeQ at once. Reads:
``spec.schedulingGates``. Message: ``waiting for scheduling gates: [a b]`` (UnschedulableAndUnresolvable).
"""

from __future__ import annotations

from pysched.framework import (
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    EnqueueExtensions,
    PodInfo,
    PreEnqueuePlugin,
    Status,
)


class SchedulingGates(PreEnqueuePlugin, EnqueueExtensions):
    name = "SchedulingGates"

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        if not pod.gates:
            return None
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                      f"waiting for scheduling gates: [{' '.join(pod.gates)}]")

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (ClusterEventWithHint(ClusterEvent("Pod", "UpdatePodSchedulingGatesEliminated")),)
