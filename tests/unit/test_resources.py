"""Effective pod requests follow the API's rules (component-helpers PodRequests)."""

from pysched.apis.core.resources import is_extended_resource, is_scalar, pod_requests, pod_resource

MI = 2**20


def c(name="c", requests=None, limits=None, restart=None):
    out = {"name": name, "resources": {}}
    if requests:
        out["resources"]["requests"] = requests
    if limits:
        out["resources"]["limits"] = limits
    if restart:
        out["restartPolicy"] = restart
    return out


def test_containers_are_summed():
    spec = {"containers": [c("a", {"cpu": "100m", "memory": "100Mi"}), c("b", {"cpu": "200m"})]}
    assert pod_requests(spec) == {"cpu": 300, "memory": 100 * MI}


def test_init_container_max():
    spec = {"containers": [c("a", {"cpu": "100m"})],
            "initContainers": [c("i1", {"cpu": "500m"}), c("i2", {"cpu": "200m", "memory": "1Gi"})]}
    assert pod_requests(spec) == {"cpu": 500, "memory": 1024 * MI}


def test_sidecars_add_and_accumulate_for_later_init_containers():
    # sidecar 200m runs alongside; init after it needs 300m + 200m = 500m; containers 100m + sidecar 200m = 300m
    spec = {"containers": [c("a", {"cpu": "100m"})],
            "initContainers": [c("side", {"cpu": "200m"}, restart="Always"), c("i", {"cpu": "300m"})]}
    assert pod_requests(spec) == {"cpu": 500}
    # init container before the sidecar does not see it
    spec2 = {"containers": [c("a", {"cpu": "100m"})],
             "initContainers": [c("i", {"cpu": "250m"}), c("side", {"cpu": "200m"}, restart="Always")]}
    assert pod_requests(spec2) == {"cpu": 300}


def test_overhead_is_added():
    spec = {"containers": [c("a", {"cpu": "100m", "memory": "10Mi"})], "overhead": {"cpu": "50m", "memory": "5Mi"}}
    assert pod_requests(spec) == {"cpu": 150, "memory": 15 * MI}


def test_limits_only_gets_request():
    spec = {"containers": [c("a", None, {"nvidia.com/gpu": "2", "cpu": "1"})]}
    assert pod_requests(spec) == {"nvidia.com/gpu": 2, "cpu": 1000}


def test_explicit_request_wins_over_limit():
    spec = {"containers": [c("a", {"cpu": "100m"}, {"cpu": "2"})]}
    assert pod_requests(spec) == {"cpu": 100}


def test_zero_request_is_kept_as_zero():
    spec = {"containers": [c("a", {"cpu": "0", "memory": "0"})]}
    reqs, non0_cpu, non0_mem = pod_resource(spec)
    assert reqs == {"cpu": 0, "memory": 0}
    # explicit zeros are not "missing": no scoring defaults
    assert (non0_cpu, non0_mem) == (0, 0)


def test_non_zero_defaults_for_missing_requests():
    spec = {"containers": [c("a", {"cpu": "300m"}), c("b")]}
    reqs, non0_cpu, non0_mem = pod_resource(spec)
    assert reqs == {"cpu": 300}
    assert non0_cpu == 400  # b gets 100m
    assert non0_mem == 2 * 200 * MI


def test_pod_level_resources_override():
    spec = {"resources": {"requests": {"cpu": "2", "memory": "1Gi"}},
            "containers": [c("a", {"cpu": "100m"})]}
    assert pod_requests(spec) == {"cpu": 2000, "memory": 1024 * MI}


def test_in_place_resize_uses_max_of_spec_actuated_allocated():
    spec = {"containers": [c("a", {"cpu": "100m"})]}
    status = {"containerStatuses": [{"name": "a", "resources": {"requests": {"cpu": "500m"}},
                                     "allocatedResources": {"cpu": "300m"}}]}
    assert pod_requests(spec, status, use_status=True) == {"cpu": 500}
    assert pod_requests(spec, status, use_status=False) == {"cpu": 100}


def test_in_place_resize_infeasible_ignores_spec():
    spec = {"containers": [c("a", {"cpu": "4"})]}
    status = {"conditions": [{"type": "PodResizePending", "reason": "Infeasible"}],
              "containerStatuses": [{"name": "a", "resources": {"requests": {"cpu": "1"}},
                                     "allocatedResources": {"cpu": "1"}}]}
    assert pod_requests(spec, status, use_status=True) == {"cpu": 1000}


def test_resource_classes():
    assert is_extended_resource("nvidia.com/gpu")
    assert not is_extended_resource("kubernetes.io/foo")
    assert not is_extended_resource("cpu")
    assert is_scalar("hugepages-2Mi") and is_scalar("nvidia.com/gpu") and not is_scalar("memory")
