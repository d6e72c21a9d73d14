"""The informer's per-event accounting: events counted by type, handler time by resource."""

from __future__ import annotations

from pysched.client.reflector import Reflector
from pysched.metrics import METRICS


def _value(child) -> float:
    return child.value


def test_handler_time_is_counted_per_resource_and_excludes_bookmarks():
    seen = []

    def slow_upsert(obj):
        seen.append(obj["metadata"]["name"])
        sum(range(20000))                     # some work, so the time counted is not zero

    r = Reflector(None, name="widgets", path="/apis/x/v1/widgets", on_upsert=slow_upsert,
                  on_delete=lambda k, o: None,
                  key=lambda o: o["metadata"]["name"])
    seconds = METRICS.informer_handler_seconds.labels("widgets")
    added = METRICS.informer_events.labels("widgets", "ADDED")
    before_s, before_n = _value(seconds), _value(added)
    r._dispatch({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "7"}}})
    assert _value(seconds) == before_s                          # a bookmark runs no handler
    r._dispatch({"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "8"}}})
    assert seen == ["a"] and _value(added) == before_n + 1
    assert _value(seconds) > before_s


async def test_each_list_page_is_delivered_inside_one_batch():
    """``batch`` (``ClusterEvents.batch`` in the app) wraps each LIST page, so a page's cluster
    events requeue waiting pods once, not once per object."""
    import contextlib

    log: list[str] = []

    @contextlib.contextmanager
    def batch():
        log.append("open")
        yield
        log.append("close")

    r = Reflector(None, name="widgets", path="/apis/x/v1/widgets",
                  on_upsert=lambda o: log.append(o["metadata"]["name"]), on_delete=lambda k, o: None,
                  key=lambda o: o["metadata"]["name"], batch=batch)

    async def pages():
        yield [{"metadata": {"name": "a", "resourceVersion": "1"}},
               {"metadata": {"name": "b", "resourceVersion": "2"}}], "2"
        yield [{"metadata": {"name": "c", "resourceVersion": "3"}}], "3"

    seen, rv = await r._apply_pages(pages())
    assert rv == "3" and set(seen) == {"a", "b", "c"}
    assert log == ["open", "a", "b", "close", "open", "c", "close"]
