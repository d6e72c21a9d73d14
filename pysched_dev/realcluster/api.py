"""A small synchronous client for the real cluster's API server (urllib, the admin token).

Enough for the cluster's own start and teardown: wait for readiness, create the KWOK nodes,
delete the node's pods. Tests use pysched's KubeClient or ``kubectl`` with the admin kubeconfig.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any


class Api:
    def __init__(self, server: str, ca: Path, token: str) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.ctx = ssl.create_default_context(cafile=str(ca))

    def request(self, method: str, path: str, body: Any = None, *, query: dict[str, str] | None = None,
                timeout: float = 10.0, content_type: str = "application/json") -> Any:
        url = self.server + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method,
                                     headers={"Authorization": f"Bearer {self.token}", "Accept": "application/json",
                                              **({"Content-Type": content_type} if data else {})})
        with urllib.request.urlopen(req, timeout=timeout, context=self.ctx) as resp:
            raw = resp.read()
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode(errors="replace")

    def get(self, path: str, **query: str) -> Any:
        return self.request("GET", path, query=query or None)

    def exists(self, path: str) -> bool:
        try:
            self.get(path)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return False
            raise
        return True

    def ready(self) -> bool:
        return self.request("GET", "/readyz", timeout=3.0) == "ok"

    def pods_on(self, node: str) -> list[dict[str, Any]]:
        return self.get("/api/v1/pods", fieldSelector=f"spec.nodeName={node}")["items"]

    def delete_pod(self, namespace: str, name: str, grace: int) -> None:
        try:
            self.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}",
                         {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": grace})
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise


def node_ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in node.get("status", {}).get("conditions") or ())


def untainted(node: dict[str, Any], keys: tuple[str, ...] = ("node.kubernetes.io/not-ready",
                                                           "node.kubernetes.io/unreachable")) -> bool:
    return not any(t.get("key") in keys for t in node.get("spec", {}).get("taints") or ())
