"""kopf's settings for the scheduler's read-only streams (``client.kopf_watch.configure_settings``)."""

from __future__ import annotations

import kopf
from kopf._cogs.structs import bodies

from pysched.client.kopf_watch import WatchSpec, configure_settings


def _replicaset() -> dict:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web-7d9f", "namespace": "team-a", "uid": "u1", "resourceVersion": "42",
                         "labels": {"app": "web"},
                         "annotations": {"deployment.kubernetes.io/revision": "3"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
            "status": {"replicas": 3, "readyReplicas": 2}}


def _configured(specs=()) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    configure_settings(settings, list(specs))
    return settings


def test_no_diff_base_is_built_or_read_for_the_event_only_handlers():
    # kopf's default builds one per event (a deep copy of the body without its status) for
    # on.update handlers; the scheduler has none, so it must cost nothing.
    default = kopf.OperatorSettings().persistence.diffbase_storage
    body = bodies.Body(_replicaset())
    assert default.build(body=body)   # what the default would have done on every event
    storage = _configured().persistence.diffbase_storage
    assert storage.build(body=body, extra_fields=[]) is None
    assert storage.fetch(body=body) is None


def test_streams_are_read_only_standalone_and_selected_as_asked():
    specs = [WatchSpec("", "v1", "pods", lambda t, o: None, field_selector="status.phase=Failed"),
             WatchSpec("apps", "v1", "replicasets", lambda t, o: None, label_selector="tier=web")]
    settings = _configured(specs)
    assert settings.peering.standalone and settings.scanning.disabled and not settings.posting.enabled
    assert settings.watching.field_selectors[("v1", "pods")] == "status.phase=Failed"
    assert settings.watching.label_selectors[("apps", "v1", "replicasets")] == "tier=web"
    assert ("apps", "v1", "replicasets") not in settings.watching.field_selectors
