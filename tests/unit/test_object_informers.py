"""The low-volume kinds' informers: ``ObjectStore.informer_handlers`` (a Reflector's callbacks into
the store) and a Reflector whose LIST the API server refuses for good (``refused_retry``: a CRD
not installed yet, a kind RBAC does not allow)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from pysched.apis.core.errors import ApiError
from pysched.client.objectstore import ObjectStore, store_key
from pysched.client.reflector import Reflector

PVCS = "persistentvolumeclaims"


def _pvc(name: str, rv: str) -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}, "spec": {}}


def test_informer_callbacks_tell_an_add_from_an_update_and_delete_by_key():
    store = ObjectStore()
    events = []
    store.subscribe(lambda plural, typ, old, obj: events.append(
        (typ, obj["metadata"]["name"], old["metadata"]["resourceVersion"] if old else None)))
    upsert, delete = store.informer_handlers(PVCS)
    upsert(_pvc("a", "1"))
    upsert(_pvc("a", "2"))
    upsert(_pvc("b", "3"))
    delete("ns/a", _pvc("a", "4"))        # a watch's DELETED carries the object
    delete("ns/b", None)                  # a re-list that no longer has it: what the store holds
    delete("ns/never", None)              # nothing stored: nothing to tell
    assert events == [("ADDED", "a", None), ("MODIFIED", "a", "1"), ("ADDED", "b", None),
                      ("DELETED", "a", "2"), ("DELETED", "b", "3")]
    assert store.list(PVCS) == []


def test_kind_version_moves_only_with_its_own_kind():
    store = ObjectStore()
    slices, claims = store.kind_version("resourceslices"), store.kind_version("resourceclaims")
    store.add({"kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "default", "resourceVersion": "1"}})
    assert store.kind_version("resourceslices") == slices and store.kind_version("resourceclaims") == claims + 1
    store.add({"kind": "ResourceSlice", "metadata": {"name": "s", "resourceVersion": "1"}})
    assert store.kind_version("resourceslices") == slices + 1
    store.apply("resourceslices", "DELETED", {"kind": "ResourceSlice", "metadata": {"name": "s"}})
    assert store.kind_version("resourceslices") == slices + 2


class _ScriptedServer:
    """A client whose LISTs and WATCHes answer from scripts: an ApiError is raised, a list of
    items is one page; a watch script entry of None blocks until cancelled."""

    def __init__(self, lists: list, watches: list):
        self.lists, self.watches = lists, watches
        self.listed = 0

    async def list_pages(self, path, params, page_size=500):
        self.listed += 1
        got = self.lists.pop(0) if self.lists else ApiError(404, "NotFound", "the server could not find it")
        if isinstance(got, ApiError):
            raise got
        yield got, str(100 + self.listed)

    async def watch(self, path, params):
        got = self.watches.pop(0) if self.watches else None
        if isinstance(got, ApiError):
            raise got
        await asyncio.Event().wait()
        yield {}


async def _until(cond, what: str):
    for _ in range(500):
        if cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(what)


async def test_a_refused_list_is_an_empty_synced_kind_until_the_crd_appears_and_again_when_it_goes():
    store = ObjectStore()
    upsert, delete = store.informer_handlers(PVCS)
    not_found = ApiError(404, "NotFound", "the server could not find the requested resource")
    server = _ScriptedServer(lists=[not_found, not_found, [_pvc("a", "5")]],
                             watches=[ApiError(404, "NotFound", "gone")])
    r = Reflector(server, name=PVCS, path="/api/v1/persistentvolumeclaims", on_upsert=upsert, on_delete=delete,
                  key=lambda o: store_key(PVCS, o), refused_retry=0.01, quiet_statuses=frozenset({404}))
    task = asyncio.create_task(r.run())
    try:
        await asyncio.wait_for(r.synced.wait(), 5)       # the first refusal: synced, and empty
        assert store.list(PVCS) == [] and r.refused == 404
        await _until(lambda: store.get(PVCS, "ns/a") is not None, "the LIST that was accepted at last")
        # the watch is refused next (the CRD was removed): the re-list is too, and what was there goes
        await _until(lambda: store.get(PVCS, "ns/a") is None, "the objects of a kind no longer served")
        assert r.refused == 404 and r.synced.is_set()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_without_refused_retry_a_refused_list_is_retried_and_never_synced_empty():
    server = _ScriptedServer(lists=[ApiError(403, "Forbidden", "no")] * 3, watches=[])
    r = Reflector(server, name="pods", path="/api/v1/pods", on_upsert=lambda o: None, on_delete=lambda k, o: None)
    task = asyncio.create_task(r.run())
    try:
        await _until(lambda: server.listed >= 2, "a second LIST")
        assert not r.synced.is_set()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class _Clock:
    """The reflector's ``asyncio`` with a ``sleep`` that records each delay and returns at once -
    ``limit`` times, then never (so the reflector stops where the test looks)."""

    def __init__(self, limit: int = 10):
        self.slept: list[float] = []
        self.limit = limit
        self.asyncio = SimpleNamespace(Event=asyncio.Event, CancelledError=asyncio.CancelledError,
                                       wrap_future=asyncio.wrap_future, sleep=self.sleep)

    async def sleep(self, seconds):
        self.slept.append(seconds)
        if len(self.slept) >= self.limit:
            await asyncio.Event().wait()
        await asyncio.sleep(0)


async def test_a_kind_listed_before_keeps_its_objects_through_one_refusal(monkeypatch):
    """A custom resource answers 404 for a moment while an API server starts: one refusal of a
    kind that was listed must not empty it (PodGroups gone would hold every gang back)."""
    import pysched.client.reflector as reflector_mod
    clock = _Clock()
    monkeypatch.setattr(reflector_mod, "asyncio", clock.asyncio)
    store = ObjectStore()
    deleted = []
    upsert, delete = store.informer_handlers(PVCS)
    server = _ScriptedServer(lists=[[_pvc("a", "5")], [_pvc("a", "5"), _pvc("b", "6")]],
                             watches=[ApiError(404, "NotFound", "not served yet")])
    r = Reflector(server, name=PVCS, path="/api/v1/persistentvolumeclaims", on_upsert=upsert,
                  on_delete=lambda k, o: (deleted.append(k), delete(k, o)),
                  key=lambda o: store_key(PVCS, o), refused_retry=7.0)
    task = asyncio.create_task(r.run())
    try:
        await _until(lambda: store.get(PVCS, "ns/b") is not None, "the LIST after the refusal")
        assert deleted == [] and store.get(PVCS, "ns/a") is not None
        assert clock.slept == [7.0] and r.refused is None
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_refused_watch_is_tried_again_at_the_refusal_interval_not_at_once(monkeypatch):
    """LIST allowed, WATCH forbidden: each round waits ``refused_retry``, not the 0.2 s watch
    backoff (a LIST every fraction of a second, each taking the client's rate tokens)."""
    import pysched.client.reflector as reflector_mod
    clock = _Clock(limit=3)
    monkeypatch.setattr(reflector_mod, "asyncio", clock.asyncio)
    forbidden = ApiError(403, "Forbidden", "cannot watch")
    server = _ScriptedServer(lists=[[_pvc("a", "5")]] * 50, watches=[forbidden] * 50)
    r = Reflector(server, name=PVCS, path="/api/v1/persistentvolumeclaims", on_upsert=lambda o: None,
                  on_delete=lambda k, o: None, key=lambda o: store_key(PVCS, o), refused_retry=7.0)
    task = asyncio.create_task(r.run())
    try:
        await _until(lambda: len(clock.slept) >= 3, "three rounds")
        assert clock.slept == [7.0, 7.0, 7.0] and server.listed == 3
        assert r.synced.is_set() and r.known == {"ns/a": "5"}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_a_pod_that_fails_after_the_first_listing_is_counted_once_as_a_kubelet_rejection():
    """The failed-pods informer: those that failed before the scheduler started are not news; a
    rejection is counted once however often the pod is delivered again (a re-list)."""
    from pysched.apis import config as configmod
    from pysched.app import Options, SchedulerApp
    from pysched.client.auth import Credentials
    from pysched.metrics import METRICS
    app = SchedulerApp(configmod.default_config(), Options(serve=False),
                       Credentials(server="https://127.0.0.1:1", insecure=True))   # never contacted

    def failed(uid):
        return {"metadata": {"uid": uid, "name": uid, "namespace": "default"},
                "spec": {"schedulerName": "pysched", "nodeName": "n1"},
                "status": {"phase": "Failed", "reason": "OutOfcpu", "message": "Pod was rejected"}}
    counted = METRICS.kubelet_rejections.labels("OutOfcpu")
    before = counted.value
    informers = app.informers
    informers.on_failed_pod(failed("old"))          # the first LIST: failed before we started
    informers.failed_reflector.synced.set()
    informers.on_failed_pod(failed("new"))
    informers.on_failed_pod(failed("new"))          # delivered again
    assert counted.value == before + 1
    assert informers.failed_reflector.params == {"fieldSelector": "status.phase=Failed"}
