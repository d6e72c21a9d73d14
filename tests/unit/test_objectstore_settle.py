"""ObjectStore.drop_vanished: what our start-up LIST stored but a later LIST no longer has, while no
watch reported a change (kopf lists after us and never reports a deletion it did not see)."""

from pysched.client.objectstore import ObjectStore, store_key


def _pvc(name: str, rv: str) -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}, "spec": {}}


def test_only_objects_still_at_the_listed_version_and_missing_from_the_later_list_are_dropped():
    store = ObjectStore()
    events = []
    store.subscribe(lambda plural, typ, old, obj: events.append((typ, obj["metadata"]["name"])))
    for name, rv in (("gone", "1"), ("kept", "2"), ("updated", "3"), ("deleted-by-watch", "4")):
        store.apply("persistentvolumeclaims", None, _pvc(name, rv))
    expected = {store_key("persistentvolumeclaims", _pvc(n, "")): rv
                for n, rv in (("gone", "1"), ("kept", "2"), ("updated", "3"), ("deleted-by-watch", "4"))}
    store.apply("persistentvolumeclaims", "MODIFIED", _pvc("updated", "9"))        # kopf saw a newer one
    store.apply("persistentvolumeclaims", "DELETED", _pvc("deleted-by-watch", "4"))  # kopf saw the delete
    events.clear()

    dropped = store.drop_vanished("persistentvolumeclaims", expected, {"ns/kept"})
    assert dropped == ["ns/gone"]
    assert events == [("DELETED", "gone")]
    assert store.get("persistentvolumeclaims", "ns/kept") is not None
    assert store.get("persistentvolumeclaims", "ns/updated")["metadata"]["resourceVersion"] == "9"
    assert expected == {"ns/kept": "2"}          # the rest is settled; "kept" is checked again next time
    assert store.drop_vanished("persistentvolumeclaims", expected, set()) == ["ns/kept"]


def test_kind_version_moves_only_with_its_own_kind():
    from pysched.client.objectstore import ObjectStore
    store = ObjectStore()
    slices, claims = store.kind_version("resourceslices"), store.kind_version("resourceclaims")
    store.add({"kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "default", "resourceVersion": "1"}})
    assert store.kind_version("resourceslices") == slices and store.kind_version("resourceclaims") == claims + 1
    store.add({"kind": "ResourceSlice", "metadata": {"name": "s", "resourceVersion": "1"}})
    assert store.kind_version("resourceslices") == slices + 1
    store.apply("resourceslices", "DELETED", {"kind": "ResourceSlice", "metadata": {"name": "s"}})
    assert store.kind_version("resourceslices") == slices + 2
