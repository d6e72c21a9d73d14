"""AllocatedDevices: the devices the store's ResourceClaims hold, kept per change, always equal to
reading them off every claim (what DynamicResources' PreFilter did per pod)."""

from __future__ import annotations

import random

from pysched.client.objectstore import ObjectStore
from pysched.plugins.dynamic_resources.allocated import AllocatedDevices, Unavailable, claim_devices


def claim(name: str, devices: list[tuple[str, str, str, bool]], rv: int, ns: str = "default") -> dict:
    results = [{"driver": d, "pool": p, "device": dev, "request": "r", **({"adminAccess": True} if admin else {})}
               for d, p, dev, admin in devices]
    c = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
         "metadata": {"name": name, "namespace": ns, "resourceVersion": str(rv), "uid": f"u-{ns}-{name}"},
         "spec": {}}
    if devices:
        c["status"] = {"allocation": {"devices": {"results": results}}}
    return c


def brute_force(store: ObjectStore) -> set:
    return {d for c in store.list("resourceclaims") for d in claim_devices(c)}


def test_the_index_follows_every_change_as_a_full_scan_would():
    rng = random.Random(7)
    store = ObjectStore()
    store.apply("resourceclaims", None, claim("pre", [("gpu", "n0", "d0", False)], 1))   # before subscribing
    index = AllocatedDevices(store.list("resourceclaims"))
    store.subscribe(index.on_change)
    pool = [("gpu", f"n{i % 4}", f"d{i}", False) for i in range(12)]
    rv = 1
    for _ in range(600):
        rv += 1
        name = f"c{rng.randrange(10)}"
        ns = rng.choice(["default", "team-a"])
        op = rng.random()
        if op < 0.15:
            current = store.get("resourceclaims", f"{ns}/{name}")
            if current is not None:
                store.apply("resourceclaims", "DELETED", current)
        else:
            picked = rng.sample(pool, rng.randrange(0, 3))
            if picked and rng.random() < 0.2:
                picked[0] = (*picked[0][:3], True)                 # admin access: not held
            store.apply("resourceclaims", rng.choice([None, "ADDED", "MODIFIED"]), claim(name, picked, rv, ns))
        expected = brute_force(store)
        assert set(index.holders) == expected
        assert all(d in index for d in expected) and all((d in index) == (d in expected) for d in pool)


def test_two_claims_holding_one_device_free_it_only_when_both_let_go():
    index = AllocatedDevices()
    dev = ("gpu", "n0", "d0")
    index.on_change("resourceclaims", "ADDED", None, claim("a", [(*dev, False)], 1))
    index.on_change("resourceclaims", "ADDED", None, claim("b", [(*dev, False)], 2))
    index.on_change("resourceclaims", "MODIFIED", None, claim("a", [], 3))       # deallocated
    assert dev in index
    index.on_change("resourceclaims", "DELETED", None, claim("b", [(*dev, False)], 2))
    assert dev not in index and len(index) == 0
    index.on_change("persistentvolumeclaims", "ADDED", None, claim("a", [(*dev, False)], 4))   # other kinds ignored
    assert dev not in index


def test_unavailable_is_the_store_and_the_allocations_in_flight():
    index = AllocatedDevices([claim("a", [("gpu", "n0", "d0", False)], 1)])
    taken = Unavailable(index, {("gpu", "n0", "d1")})
    assert ("gpu", "n0", "d0") in taken and ("gpu", "n0", "d1") in taken and ("gpu", "n0", "d2") not in taken
