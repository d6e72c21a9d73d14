"""PrioritySort (QueueSort): higher ``spec.priority`` first, then the earlier queue timestamp.

Reads: the pod's priority (set by the Priority admission plugin from its PriorityClass) and the
time it was (re)added to the queue, exactly as kube-scheduler's PrioritySort ``Less``.
"""

from __future__ import annotations

from pysched.framework.interface import QueueSortPlugin


class PrioritySort(QueueSortPlugin):
    name = "PrioritySort"

    def sort_key(self, qpi) -> tuple:
        return (-qpi.pod.priority, qpi.timestamp)
