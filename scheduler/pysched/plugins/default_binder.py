"""DefaultBinder (Bind): POSTs the ``pods/binding`` subresource, with the pod's UID as precondition.

The API server answers 409 when the pod is already bound (by another scheduler or client) and
404 when it is gone; both come back as statuses the binding cycle understands (drop the pod, do
not retry). Other failures return an Error status so the pod is forgotten and retried.
"""

from __future__ import annotations

import aiohttp

from pysched.framework import BindPlugin, Code, CycleState, PodInfo, Status
from pysched.framework.api import ApiError

ALREADY_BOUND = "already bound"
POD_GONE = "pod not found"


class DefaultBinder(BindPlugin):
    name = "DefaultBinder"

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        client = self.handle.client
        if client is None:
            return Status(Code.ERROR, "binding needs an API client, and the framework has none")
        try:
            await client.bind_pod(pod.namespace, pod.name, pod.uid, node_name,
                                  timeout=self.handle.bind_timeout)
        except ApiError as exc:
            if exc.status == 409:
                return Status(Code.ERROR, f"{ALREADY_BOUND}: {exc.message}", error=exc)
            if exc.status == 404:
                return Status(Code.ERROR, f"{POD_GONE}: {exc.message}", error=exc)
            return Status.as_error(exc)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            return Status(Code.ERROR, f"binding rejected: {exc or type(exc).__name__}", error=exc)
        return None
