"""DefaultBinder (Bind): POSTs the ``pods/binding`` subresource, with the pod's UID as precondition
and the annotations plugins chose for the pod (``framework.bindmeta``; the API server copies them
onto the pod as it binds it).

Every failure comes back as an Error status carrying the exception. The binding cycle does not
trust the answer's code to say where the pod is (kube-apiserver answers 409 both for "already
bound" and for a write etcd could not take): it looks the pod up and retries it while it is
still pending (``pysched.podlocation``).
"""

from __future__ import annotations

from pysched.framework import BindPlugin, Code, CycleState, PodInfo, Status
from pysched.framework.api import ApiError
from pysched.framework.bindmeta import bind_annotations


class DefaultBinder(BindPlugin):
    name = "DefaultBinder"

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        client = self.handle.client
        if client is None:
            return Status(Code.ERROR, "binding needs an API client, and the framework has none")
        try:
            extra = bind_annotations(state)
            if extra:
                await client.bind_pod(pod.namespace, pod.name, pod.uid, node_name,
                                      timeout=self.handle.bind_timeout, annotations=extra)
            else:
                await client.bind_pod(pod.namespace, pod.name, pod.uid, node_name, timeout=self.handle.bind_timeout)
        except ApiError as exc:
            return Status(Code.ERROR, exc.message, error=exc)   # the API's message, as upstream's AsStatus
        except OSError as exc:
            return Status(Code.ERROR, f"binding rejected: {exc or type(exc).__name__}", error=exc)
        return None
