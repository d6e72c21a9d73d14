"""Calling external scheduler extenders from our scheduling cycle, as kube-scheduler does.

Per ``extenders:`` entry (``pkg/scheduler/extender.go`` semantics):

* ``IsInterested``: with ``managedResources`` only pods whose containers or init containers
  request or limit one of them are sent; ``ignoredByScheduler`` resources are also skipped by
  our NodeResourcesFit.
* filter: called in configuration order after our Filter plugins, with ``NodeNames``
  (``nodeCacheCapable``) or the full ``NodeList``; ``FailedAndUnresolvableNodes`` beats
  ``FailedNodes``; an error (non-200, timeout, ``Error`` field, malformed answer, or a node that
  was not sent) fails the cycle unless the extender is ``ignorable``, in which case it is skipped
  with a warning.
* prioritize: all extenders at once; each score 0-10 counts ``score x weight x 10``; errors are
  ignored, as upstream, but logged with the extender's name - and so are answers outside the
  contract (unknown hosts, scores outside 0-10), which kube-scheduler silently accepts.
* bind: the first interested extender with ``bindVerb`` binds instead of our Bind plugins. The
  extender writes the binding on our behalf, so the call goes through the write fence
  (``scheduler.fence``) like our own binds: checked after every wait, right before it is sent.
* ``httpTimeout`` (default 5 s) bounds every call; ``enableHTTPS`` without a CA means an
  unverified connection, as upstream; ``tlsConfig`` supplies CA, client certificate (mTLS) and
  ``serverName``.
* preempt (``preemptVerb``): DefaultPreemption sends its candidates - node -> victims and PDB
  violations - to every interested extender with the verb, in order, each seeing the previous
  one's answer (``callExtenders``); ``nodeCacheCapable`` extenders get ``NodeNameToMetaVictims``
  (UIDs), the others ``NodeNameToVictims`` whose pods carry identity, node and priority only (we
  keep no full object of running pods). An answer naming a node we do not know or a pod that is
  not on that node is an error, as upstream.
"""

from __future__ import annotations

import base64
import logging
import os
import ssl
import tempfile
import time

import aiohttp
import orjson

from pysched.apis.config import ExtenderConfig
from pysched.apis.core.resources import limits_declare
from pysched.client.httppool import HTTPPool
from pysched.extender.wire import (
    ExtenderError,
    WireError,
    parse_filter_result,
    parse_preemption_result,
    parse_priorities,
    victim_ref,
)
from pysched.metrics import METRICS
from pysched.util.logs import kv

log = logging.getLogger("pysched.extender.client")


def _material(path: str, data: str, suffix: str) -> str | None:
    if path:
        return path
    if data:
        f = tempfile.NamedTemporaryFile(prefix="pysched-ext-", suffix=suffix, delete=False)
        f.write(base64.b64decode(data) if not data.lstrip().startswith("-----") else data.encode())
        f.close()
        os.chmod(f.name, 0o600)
        return f.name
    return None


class HTTPExtender:
    def __init__(self, cfg: ExtenderConfig, *, fence=None):
        """``fence``: a ``client.fence.WriteFence`` the bind verb must pass (with leader election)."""
        self.cfg = cfg
        self.url = cfg.url_prefix.rstrip("/")
        self.name = self.url
        self.managed = {m.name for m in cfg.managed_resources}
        self.filter_verb = cfg.filter_verb
        self.prioritize_verb = cfg.prioritize_verb
        self.bind_verb = cfg.bind_verb
        self.preempt_verb = cfg.preempt_verb
        self.weight = cfg.weight
        self.ignorable = cfg.ignorable
        self.node_cache_capable = cfg.node_cache_capable
        self.timeout = cfg.http_timeout
        self.fence = fence
        self._session: aiohttp.ClientSession | None = None
        self._bind_pool: HTTPPool | None = None
        self._ssl = self._ssl_context()

    def _ssl_context(self):
        cfg = self.cfg
        t = cfg.tls_config
        https = cfg.enable_https or self.url.startswith("https://")
        if not https:
            return None
        ca = _material(t.ca_file, t.ca_data, ".crt") if t else None
        ctx = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
        if t and (t.insecure or not ca):
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if t:
            cert = _material(t.cert_file, t.cert_data, ".crt")
            key = _material(t.key_file, t.key_data, ".key")
            if cert and key:
                ctx.load_cert_chain(cert, key)
        elif not ca:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx

    def _base(self) -> str:
        if self.cfg.enable_https and self.url.startswith("http://"):
            return "https://" + self.url[len("http://"):]
        return self.url

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self._ssl if self._ssl else False))
        return self._session

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        if self._bind_pool is not None:
            await self._bind_pool.close()

    def is_interested(self, pod) -> bool:
        if not self.managed:
            return True
        spec = (pod.raw or {}).get("spec") or {}
        return limits_declare(spec, self.managed)

    def is_binder(self) -> bool:
        return bool(self.bind_verb)

    async def send(self, verb: str, args: dict):
        url = f"{self._base()}/{verb}"
        t0 = time.perf_counter()
        status = "error"
        try:
            async with self.session.post(url, data=orjson.dumps(args), headers={"Content-Type": "application/json"},
                                         timeout=aiohttp.ClientTimeout(total=self.timeout)) as resp:
                status = str(resp.status)
                raw = await resp.read()
                if resp.status != 200:
                    raise ExtenderError(f"failed {verb} with extender at URL {url}, code {resp.status}")
                try:
                    return orjson.loads(raw)
                except orjson.JSONDecodeError as exc:
                    raise ExtenderError(f"extender {self.name!r} answered {verb} with invalid JSON: {exc}") from None
        except TimeoutError:
            status = "timeout"
            raise ExtenderError(f"extender {self.name!r} {verb}: no answer within {self.timeout:g}s") from None
        except aiohttp.ClientError as exc:
            raise ExtenderError(f"extender {self.name!r} {verb}: {exc}") from None
        finally:
            METRICS.extender_calls.labels(self.name, verb, status).inc()
            METRICS.extender_duration.labels(self.name, verb).observe(time.perf_counter() - t0)

    def _args(self, pod, names: list[str], nodes_raw) -> dict:
        args = {"Pod": pod.raw, "Nodes": None, "NodeNames": None}
        if self.node_cache_capable:
            args["NodeNames"] = list(names)
        else:
            args["Nodes"] = {"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": nodes_raw(names)}
        return args

    async def filter(self, pod, names: list[str], nodes_raw) -> tuple[list[str], dict, dict]:
        body = await self.send(self.filter_verb, self._args(pod, names, nodes_raw))
        try:
            return parse_filter_result(body, names, self.node_cache_capable, self.name)
        except WireError as exc:
            raise ExtenderError(str(exc)) from None

    async def prioritize(self, pod, names: list[str], nodes_raw) -> dict[str, int]:
        body = await self.send(self.prioritize_verb, self._args(pod, names, nodes_raw))
        try:
            scores, problems = parse_priorities(body, names, self.name)
        except WireError as exc:
            raise ExtenderError(str(exc)) from None
        for p in problems:
            log.warning("extender answer outside the contract; entry ignored",
                        extra=kv(extender=self.name, pod=pod.key, problem=p))
        return scores

    async def process_preemption(self, pod, victims: dict, pods_on) -> dict:
        """``ProcessPreemption``: ``victims`` node -> (victim PodInfos, PDB violations); answers the
        same shape for the nodes the extender accepts. ``pods_on(node)``: uid -> pod on that node."""
        if not self.preempt_verb:
            raise ExtenderError(f"preempt verb is not defined for extender {self.url} but run into ProcessPreemption")
        if self.node_cache_capable:
            args = {"Pod": pod.raw, "NodeNameToMetaVictims": {
                node: {"Pods": [{"UID": v.uid} for v in vs], "NumPDBViolations": n}
                for node, (vs, n) in victims.items()}}
        else:
            args = {"Pod": pod.raw, "NodeNameToVictims": {
                node: {"Pods": [victim_ref(v.namespace, v.name, v.uid, node, v.priority) for v in vs],
                       "NumPDBViolations": n}
                for node, (vs, n) in victims.items()}}
        body = await self.send(self.preempt_verb, args)
        try:
            answer = parse_preemption_result(body, self.name)
        except WireError as exc:
            raise ExtenderError(str(exc)) from None
        out = {}
        for node, (uids, n_pdb) in answer.items():
            pods = pods_on(node)
            if pods is None:
                raise ExtenderError(f"extender {self.name!r} preempt: node {node!r} not found")
            chosen = []
            for uid in uids:
                p = pods.get(uid)
                if p is None:
                    raise ExtenderError(f"extender: {self.url} claims to preempt pod (UID: {uid}) on node: {node}, "
                                        "but the pod is not found on that node")
                chosen.append(p)
            out[node] = (chosen, n_pdb)
        return out

    async def _send_fenced(self, verb: str, args: dict):
        """POST a verb that writes on our behalf, through the lean pool so the fence is checked
        immediately before the request is written."""
        if self._bind_pool is None:
            self._bind_pool = HTTPPool(self._base(), self._ssl, limit=8)
        fence = self.fence
        t0 = time.perf_counter()
        status = "error"
        try:
            resp = await self._bind_pool.request(
                "POST", f"/{verb}", {"Content-Type": "application/json", "Accept": "application/json"},
                orjson.dumps(args), self.timeout, guard=fence.check if fence is not None else None,
                on_sent=fence.sent if fence is not None else None)
            status = str(resp.status)
            if resp.status != 200:
                raise ExtenderError(f"failed {verb} with extender at URL {self._base()}/{verb}, code {resp.status}")
            try:
                return orjson.loads(resp.body)
            except orjson.JSONDecodeError as exc:
                raise ExtenderError(f"extender {self.name!r} answered {verb} with invalid JSON: {exc}") from None
        except TimeoutError:
            status = "timeout"
            raise ExtenderError(f"extender {self.name!r} {verb}: no answer within {self.timeout:g}s") from None
        except OSError as exc:
            raise ExtenderError(f"extender {self.name!r} {verb}: {exc}") from None
        finally:
            if fence is not None:
                fence.finished()
            METRICS.extender_calls.labels(self.name, verb, status).inc()
            METRICS.extender_duration.labels(self.name, verb).observe(time.perf_counter() - t0)

    async def bind(self, pod, node: str) -> None:
        body = await self._send_fenced(self.bind_verb, {"PodName": pod.name, "PodNamespace": pod.namespace,
                                                        "PodUID": pod.uid, "Node": node})
        if not isinstance(body, dict):
            raise ExtenderError(f"extender {self.name!r} bind: ExtenderBindingResult must be an object")
        err = body.get("Error") or body.get("error")
        if err:
            raise ExtenderError(f"extender {self.name!r} bind: {err}")
