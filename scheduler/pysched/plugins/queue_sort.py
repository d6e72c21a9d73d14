"""PrioritySort (QueueSort): higher ``spec.priority`` first, then the earlier queue timestamp.

Reads: the pod's priority (set by the Priority admission plugin from its PriorityClass) and the
time it was (re)added to the queue, exactly as kube-scheduler's PrioritySort ``Less``.
"""

from __future__ import annotations

from pysched.framework import QueuedPod, QueueSortPlugin


class PrioritySort(QueueSortPlugin):
    name = "PrioritySort"

    def sort_key(self, qpi: QueuedPod) -> tuple[int, float]:
        """``qpi`` is the queue's QueuedPodInfo (``pod``: PodInfo, ``timestamp``: seconds)."""
        return (-qpi.pod.priority, qpi.timestamp)
