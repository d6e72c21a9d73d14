"""EventBacklog: isomorphic keys, series aggregation, the six-minute window, what is written next,
and what goes when the cap is reached (fake clock, no API)."""

from __future__ import annotations

import pytest

from pysched.apis.config import default_config
from pysched.app import Options, SchedulerApp
from pysched.cli import build_parser
from pysched.client import events
from pysched.client.auth import Credentials
from pysched.client.eventseries import SERIES_WINDOW, EventBacklog, PendingEvent, event_name, isomorphic_key
from pysched.client.rest import ApiError


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def regarding(name: str, rv: str = "7") -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": name, "uid": f"uid-{name}",
            "resourceVersion": rv}


def key(name: str, reason: str = "FailedScheduling", rv: str = "7") -> tuple:
    return isomorphic_key(regarding(name, rv), None, controller="pysched", instance="pysched-host",
                          type_="Warning", reason=reason, action="Scheduling")


def observe(b: EventBacklog, name: str, reason: str = "FailedScheduling", rv: str = "7", note: str = "n"):
    k = key(name, reason, rv)
    return b.observe(k, lambda: PendingEvent(k, namespace="default", name=f"{name}.1", regarding=regarding(name, rv),
                                             controller="pysched", instance="pysched-host", type_="Warning",
                                             reason=reason, action="Scheduling", note=note,
                                             event_time="2026-01-01T00:00:00.000000Z"))


def write(b: EventBacklog) -> PendingEvent:
    e = b.next_ready()
    assert e is not None and e.state == "writing"
    b.written(e, e.count)
    return e


def test_note_is_not_part_of_the_key_but_the_regarding_resource_version_is():
    a = isomorphic_key(regarding("p"), None, controller="c", instance="i", type_="Warning", reason="R", action="A")
    b = isomorphic_key(regarding("p"), None, controller="c", instance="i", type_="Warning", reason="R", action="A")
    assert a == b
    assert a != isomorphic_key(regarding("p", rv="8"), None, controller="c", instance="i", type_="Warning",
                               reason="R", action="A")
    assert a != isomorphic_key(regarding("p"), None, controller="c", instance="i2", type_="Warning",
                               reason="R", action="A")
    assert a != isomorphic_key(regarding("p"), {"kind": "Node", "name": "n"}, controller="c", instance="i",
                               type_="Warning", reason="R", action="A")
    b = EventBacklog(10)
    e1, agg1, _ = observe(b, "p", note="first message")
    e2, agg2, _ = observe(b, "p", note="second message")
    assert e1 is e2 and not agg1 and agg2 and e1.count == 2 and e1.note == "first message"
    assert b.tracked == 1 and b.pending == 1


def test_hundred_failures_of_one_pod_cost_one_entry_and_one_create():
    clock = Clock()
    b = EventBacklog(10, clock=clock)
    for _ in range(100):
        clock.t += 1
        observe(b, "p")
    assert b.tracked == 1
    e = b.next_ready()
    assert e.written == 0 and e.count == 100
    body = e.body(e.count, e.last_observed_time)
    assert body["series"]["count"] == 100  # created directly as a series: no create-then-patch
    b.written(e, 100)
    assert b.pending == 0 and e.state == "idle"


def test_first_repeat_is_written_at_once_later_ones_at_the_next_sync():
    clock = Clock()
    b = EventBacklog(10, clock=clock)
    observe(b, "p")
    e = write(b)
    assert e.written == 1 and b.pending == 0
    observe(b, "p")                       # count 2: due now, as client-go patches it at once
    assert e.state == "update" and b.has_ready
    assert write(b) is e and e.written == 2
    observe(b, "p")
    observe(b, "p")                       # counts 3, 4: held until the sync
    assert e.state == "dirty" and not b.has_ready and b.pending == 1
    b.sync()
    assert e.state == "update"
    assert write(b) is e and e.written == 4 and b.pending == 0


def test_repeats_while_writing_are_not_lost():
    b = EventBacklog(10)
    observe(b, "p")
    e = b.next_ready()
    sent = e.count
    observe(b, "p")
    observe(b, "p")
    b.written(e, sent)
    assert e.written == 1 and e.state == "update"  # the count 3 is still owed
    assert write(b).written == 3


def test_a_series_ends_six_minutes_after_its_last_occurrence():
    clock = Clock()
    b = EventBacklog(10, clock=clock)
    observe(b, "p")
    first = write(b)
    clock.t += SERIES_WINDOW - 1
    e, aggregated, _ = observe(b, "p")
    assert aggregated and e is first
    write(b)
    clock.t += SERIES_WINDOW - 1          # still within six minutes of the last occurrence
    assert observe(b, "p")[1]
    b.sync()
    write(b)
    clock.t += SERIES_WINDOW              # idle for six minutes: a repeat starts a new Event
    e, aggregated, _ = observe(b, "p")
    assert not aggregated and e is not first and e.written == 0 and b.tracked == 1


def test_sync_forgets_ended_series_and_keeps_running_ones():
    clock = Clock()
    b = EventBacklog(10, clock=clock)
    observe(b, "old")
    write(b)
    clock.t += SERIES_WINDOW / 2
    observe(b, "young")
    write(b)
    clock.t += SERIES_WINDOW / 2
    b.sync()
    assert b.tracked == 1 and key("young") in b.entries


def test_creates_and_count_updates_are_written_in_arrival_order():
    b = EventBacklog(10)
    observe(b, "a")
    write(b)
    observe(b, "b")                        # new event first
    observe(b, "a")                        # then a's count 2
    observe(b, "c")
    order = [write(b).regarding["name"] for _ in range(3)]
    assert order == ["b", "a", "c"] and b.next_ready() is None


def test_retry_waits_for_its_time_and_give_up_forgets_an_uncreated_event():
    b = EventBacklog(10)
    observe(b, "p")
    e = b.next_ready()
    assert b.failed(e) == 1 and e.state == "retry"
    assert b.next_ready() is None and b.pending == 1
    assert b.retry_due(e) and b.next_ready() is e
    assert b.failed(e) == 2
    b.give_up(e)
    assert b.tracked == 0 and b.pending == 0
    assert not b.retry_due(e)              # a stale timer does nothing


def test_give_up_on_a_count_update_keeps_the_event_for_its_series():
    b = EventBacklog(10)
    observe(b, "p")
    e = write(b)
    observe(b, "p")
    assert b.next_ready() is e
    b.give_up(e)                           # a final error
    assert e.state == "idle" and b.pending == 0
    assert observe(b, "p")[1]              # still aggregates into the existing object
    assert e.state == "dirty"
    b.sync()
    assert b.next_ready() is e and e.count == 3
    b.failed(e)
    b.give_up(e)                           # retries exhausted while waiting for the next try
    assert e.state == "idle" and e.written == 3 and b.pending == 0


def test_cap_evicts_idle_entries_first_without_dropping():
    b = EventBacklog(2)
    observe(b, "a")
    write(b)
    observe(b, "b")
    e, aggregated, dropped = observe(b, "c")
    assert e is not None and dropped == [] and b.tracked == 2
    assert key("a") not in b.entries


def test_cap_drops_count_updates_before_retries_before_new_events_oldest_first():
    b = EventBacklog(4)
    observe(b, "created")
    write(b)
    observe(b, "failing")
    b.failed(b.next_ready())              # waits for a retry
    observe(b, "created")                 # due count update
    observe(b, "new1")
    observe(b, "new2")
    assert b.tracked == 4 and b.pending == 4
    dropped = [observe(b, f"x{i}")[2] for i in range(3)]
    assert [d[0].regarding["name"] for d in dropped] == ["created", "failing", "new1"]
    assert all(d[0].state == "dropped" for d in dropped)
    assert b.tracked == 4 and b.pending == 4


def test_dirty_counts_go_before_due_ones():
    b = EventBacklog(2)
    for n in ("d", "u"):
        observe(b, n)
        write(b)
        observe(b, n)
        write(b)                          # both series at count 2
    observe(b, "u")                       # u: count 3, dirty
    b.sync()                              # u due
    observe(b, "d")                       # d: count 3, dirty (newer than u)
    _, _, dropped = observe(b, "z")
    assert [e.regarding["name"] for e in dropped] == ["d"]
    assert b.entries[key("u")].state == "update"


def test_entries_being_written_are_never_evicted():
    b = EventBacklog(1)
    observe(b, "a")
    e = b.next_ready()
    got, aggregated, dropped = observe(b, "b")
    assert got is None and dropped == [] and b.tracked == 1
    b.written(e, 1)
    assert b.pending == 0


def test_abandon_pending_returns_everything_owed():
    b = EventBacklog(10)
    observe(b, "idle")
    write(b)
    observe(b, "new")
    observe(b, "writing")
    b.next_ready()
    w = b.next_ready()
    assert w.regarding["name"] == "writing"
    left = b.abandon_pending()
    assert sorted(e.regarding["name"] for e in left) == ["new", "writing"]
    assert b.pending == 0 and b.tracked == 1
    b.written(w, 1)                       # the cancelled write finishing late changes nothing
    assert b.pending == 0 and b.tracked == 1


def test_limit_must_be_positive():
    with pytest.raises(ValueError, match="limit"):
        EventBacklog(0)


def test_event_name_is_client_go_shaped_and_always_valid():
    n = event_name("web-0")
    prefix, _, suffix = n.partition(".")
    assert prefix == "web-0" and int(suffix, 16) > 0
    long = event_name("x" * 250)
    assert len(long) <= 253 and len(long) == 36  # a UUID, as client-go falls back to


# -- the recorder's retry policy and its flag (pure classification, no API) ------------------------


@pytest.mark.parametrize("exc, recreating, retry", [
    (ConnectionRefusedError(), False, True),         # no answer: client-go's default branch retries
    (TimeoutError(), False, True),
    (RuntimeError("not the leader"), False, True),   # any other client error is a failed post too
    (ApiError(0, "ClientClosed"), False, True),
    (ApiError(429, "TooManyRequests"), False, True),
    (ApiError(500, "InternalError"), False, True),
    (ApiError(503, "ServiceUnavailable"), False, True),
    (ApiError(504, "Timeout"), False, True),
    (ApiError(422, "Invalid"), False, False),
    (ApiError(403, "Forbidden"), False, False),
    (ApiError(404, "NotFound"), False, False),
    (ApiError(409, "AlreadyExists"), False, False),  # a plain create: the Event exists
    (ApiError(409, "AlreadyExists"), True, True),    # re-creating a series after a 404: retried
])
def test_which_failed_writes_are_retried(exc, recreating, retry):
    assert events._retryable(exc, recreating=recreating) is retry


def test_error_codes_for_the_errors_metric():
    assert events._error_code(ApiError(503, "ServiceUnavailable")) == "503"
    assert events._error_code(ApiError(0, "ClientClosed")) == "ApiError"
    assert events._error_code(TimeoutError()) == "timeout"
    assert events._error_code(ConnectionRefusedError()) == "ConnectionRefusedError"


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_event_backlog_limit_flag_must_be_a_positive_integer(value, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--event-backlog-limit", value])
    assert "--event-backlog-limit" in capsys.readouterr().err


def test_event_backlog_limit_reaches_the_recorder():
    assert build_parser().parse_args(["run", "--event-backlog-limit", "5000"]).event_backlog_limit == 5000
    creds = Credentials(server="https://127.0.0.1:1", insecure=True)  # never contacted
    app = SchedulerApp(default_config(), Options(serve=False, kopf=False, event_backlog_limit=5000), creds)
    assert app.recorder.backlog.limit == 5000
    assert SchedulerApp(default_config(), Options(serve=False, kopf=False), creds).recorder.backlog.limit == \
        events.DEFAULT_LIMIT
