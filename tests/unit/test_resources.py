"""Effective pod requests follow the API's rules (component-helpers PodRequests)."""

from pysched.apis.core.resources import (
    Accounting,
    accounting,
    accounting_for,
    current_accounting,
    is_extended_resource,
    is_scalar,
    pod_requests,
    pod_resource,
)
from pysched.framework.features import default_gates

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


# -- in-place resize, per release (component-helpers PodRequests of 1.35/1.36 vs 1.37) ----------

def release(minor):
    """The accounting kube-scheduler 1.<minor> does with its default gates."""
    return accounting(accounting_for((1, minor), default_gates((1, minor))))


def cs(name, actuated=None, allocated=None):
    out = {"name": name}
    if actuated is not None:
        out["resources"] = {"requests": actuated}
    if allocated is not None:
        out["allocatedResources"] = allocated
    return out


def test_the_default_accounting_is_the_newest_release_with_its_gates():
    assert current_accounting() == accounting_for((1, 37), default_gates((1, 37))) == Accounting(True, True)
    assert accounting_for((1, 36), default_gates((1, 36))) == Accounting(separate_sums=False, pod_level_status=True)
    assert accounting_for((1, 35), default_gates((1, 35))) == Accounting(separate_sums=False, pod_level_status=False)
    with release(35):
        assert current_accounting() == Accounting(False, False)
    assert current_accounting() == Accounting(True, True)


def test_resize_in_both_directions_sums_then_takes_the_maximum_from_1_37():
    """a grows (spec 2, allocated 2, running at 1), b shrinks (spec 1, allocated 1, running at 2)."""
    spec = {"containers": [c("a", {"cpu": "2"}), c("b", {"cpu": "1"})]}
    status = {"containerStatuses": [cs("a", {"cpu": "1"}, {"cpu": "2"}), cs("b", {"cpu": "2"}, {"cpu": "1"})]}
    for minor in (35, 36):
        with release(minor):
            # per container: a max(2, 1, 2) = 2, b max(1, 2, 1) = 2
            assert pod_requests(spec, status, use_status=True) == {"cpu": 4000}
    with release(37):
        # spec 2+1 = 3, actuated 1+2 = 3, allocated 2+1 = 3 -> 3
        assert pod_requests(spec, status, use_status=True) == {"cpu": 3000}
        assert pod_requests(spec, status, use_status=False) == {"cpu": 3000}


def test_infeasible_resize_counts_no_spec_for_a_container_without_status_from_1_37():
    spec = {"containers": [c("a", {"cpu": "4"}), c("b", {"cpu": "1"})]}
    status = {"conditions": [{"type": "PodResizePending", "reason": "Infeasible"}],
              "containerStatuses": [cs("a", {"cpu": "1"}, {"cpu": "1"})]}
    with release(35):
        # a: max(actuated 1, allocated 1); b has no status: its spec, 1
        assert pod_requests(spec, status, use_status=True) == {"cpu": 2000}
    with release(37):
        # actuated: a 1, b none (Infeasible: no spec) = 1; allocated the same -> 1
        assert pod_requests(spec, status, use_status=True) == {"cpu": 1000}


def test_an_init_containers_status_counts_from_1_37():
    spec = {"initContainers": [c("i", {"cpu": "500m"})], "containers": [c("a", {"cpu": "1"})]}
    status = {"initContainerStatuses": [cs("i", allocated={"cpu": "3"})]}
    with release(35):
        assert pod_requests(spec, status, use_status=True) == {"cpu": 1000}   # max(1, 0.5): spec only
    with release(37):
        # allocated and actuated (no resources: the allocated list) of i are 3 -> max(1, 3) = 3
        assert pod_requests(spec, status, use_status=True) == {"cpu": 3000}


def test_status_resources_without_requests_fall_back_to_allocated_from_1_37():
    spec = {"containers": [c("a", {"cpu": "1"})]}
    status = {"containerStatuses": [{"name": "a", "resources": {"limits": {"cpu": "9"}},
                                     "allocatedResources": {"cpu": "2"}}]}
    with release(35):
        assert pod_requests(spec, status, use_status=True) == {"cpu": 2000}   # max(1, none, 2)
    with release(37):
        assert pod_requests(spec, status, use_status=True) == {"cpu": 2000}   # max(1, 2, 2)
    status["conditions"] = [{"type": "PodResizePending", "reason": "Infeasible"}]
    status["containerStatuses"][0]["allocatedResources"] = {"cpu": "500m"}
    with release(35):
        assert pod_requests(spec, status, use_status=True) == {"cpu": 500}    # max(none, 0.5)
    with release(37):
        assert pod_requests(spec, status, use_status=True) == {"cpu": 500}    # max(0.5, 0.5)


def test_pod_level_status_with_pod_level_requests_follows_the_gate():
    spec = {"resources": {"requests": {"cpu": "2"}}, "containers": [c("a", {"cpu": "1"})]}
    status = {"resources": {"requests": {"cpu": "3"}}, "allocatedResources": {"cpu": "3"}}
    with release(35):   # InPlacePodLevelResourcesVerticalScaling off: the spec
        assert pod_requests(spec, status, use_status=True) == {"cpu": 2000}
    for minor in (36, 37):   # on: max(spec 2, actuated 3, allocated 3)
        with release(minor):
            assert pod_requests(spec, status, use_status=True) == {"cpu": 3000}
            assert pod_requests(spec, status, use_status=False) == {"cpu": 2000}
    with accounting(Accounting(separate_sums=True, pod_level_status=False)):
        assert pod_requests(spec, status, use_status=True) == {"cpu": 2000}
    status["conditions"] = [{"type": "PodResizePending", "reason": "Infeasible"}]
    status["resources"]["requests"]["cpu"] = status["allocatedResources"]["cpu"] = "1500m"
    for minor in (36, 37):   # Infeasible: max(actuated, allocated), the spec left out
        with release(minor):
            assert pod_requests(spec, status, use_status=True) == {"cpu": 1500}


def test_pod_level_status_names_resources_the_spec_does_not_from_1_37():
    spec = {"resources": {"requests": {"cpu": "2"}}, "containers": [c("a", {"cpu": "1", "memory": "1Gi"})]}
    status = {"resources": {"requests": {"cpu": "2", "memory": "512Mi"}}, "allocatedResources": {"cpu": "2"}}
    with release(36):   # only the resources spec.resources.requests names; memory from the containers
        assert pod_requests(spec, status, use_status=True) == {"cpu": 2000, "memory": 1024 * MI}
    with release(37):
        # containers: max(spec {1, 1Gi}, pod actuated {2, 512Mi}, pod allocated {2}) = {2, 1Gi};
        # pod level: max({2}, {2, 512Mi}, {2}) = {2, 512Mi} replaces cpu and memory
        assert pod_requests(spec, status, use_status=True) == {"cpu": 2000, "memory": 512 * MI}


def test_pod_level_status_stands_for_the_containers_from_1_37():
    """A pod without pod-level requests whose kubelet reports pod-level status: 1.37 takes the
    status as the actuated and allocated sums (with the gate); earlier releases ignore it."""
    spec = {"containers": [c("a", {"cpu": "1"}), c("b", {"cpu": "1"})]}
    status = {"resources": {"requests": {"cpu": "2"}}, "allocatedResources": {"cpu": "3"},
              "containerStatuses": [cs("a", {"cpu": "1"}, {"cpu": "1"}), cs("b", {"cpu": "1"}, {"cpu": "1"})]}
    for minor in (35, 36):
        with release(minor):
            assert pod_requests(spec, status, use_status=True) == {"cpu": 2000}
    with release(37):
        assert pod_requests(spec, status, use_status=True) == {"cpu": 3000}   # max(2, 2, 3)
    with accounting(Accounting(separate_sums=True, pod_level_status=False)):
        assert pod_requests(spec, status, use_status=True) == {"cpu": 2000}   # the containers' statuses
    del status["resources"]   # both pod-level fields are needed
    with release(37):
        assert pod_requests(spec, status, use_status=True) == {"cpu": 2000}


def test_non_zero_defaults_fill_each_list_from_1_37():
    """The 100m/200Mi non-zero defaults fill whatever a container's spec, actuated or allocated
    list omits: a status list without memory counts 200Mi from 1.37."""
    spec = {"containers": [c("a", {"cpu": "1", "memory": "100Mi"})]}
    status = {"containerStatuses": [cs("a", {"cpu": "1"}, {"cpu": "1", "memory": "100Mi"})]}
    with release(35):
        reqs, non0_cpu, non0_mem = pod_resource(spec, status, use_status=True)
        assert (reqs, non0_cpu, non0_mem) == ({"cpu": 1000, "memory": 100 * MI}, 1000, 100 * MI)
    with release(37):
        reqs, non0_cpu, non0_mem = pod_resource(spec, status, use_status=True)
        # requests: max(spec, {cpu 1}, allocated) = {1, 100Mi}; non-zero: actuated {1, 200Mi} wins
        assert (reqs, non0_cpu, non0_mem) == ({"cpu": 1000, "memory": 100 * MI}, 1000, 200 * MI)


def test_sidecar_rules_apply_to_each_sum_from_1_37():
    """A sidecar's resize counts in every later init container's need, in each list."""
    spec = {"initContainers": [c("s", {"cpu": "1"}, restart="Always"), c("i", {"cpu": "2"})],
            "containers": [c("a", {"cpu": "1"})]}
    status = {"initContainerStatuses": [cs("s", {"cpu": "2"}, {"cpu": "2"})]}
    with release(37):
        # spec: containers 1 + sidecar 1 = 2, init i needs 2 + 1 = 3 -> 3
        # actuated = allocated: 1 + 2 = 3, i needs 2 + 2 = 4 -> 4
        assert pod_requests(spec, status, use_status=True) == {"cpu": 4000}
    with release(35):   # per container: the sidecar counts max(1, 2, 2) = 2 -> same
        assert pod_requests(spec, status, use_status=True) == {"cpu": 4000}


def test_an_infeasible_resize_can_leave_memory_to_the_non_zero_default():
    """Infeasible: the container counts its status lists only; when they omit memory, the non-zero
    memory is the 200Mi default though the spec states 64Mi (every release)."""
    spec = {"containers": [c("a", {"cpu": "250m", "memory": "64Mi"})]}
    status = {"conditions": [{"type": "PodResizePending", "reason": "Infeasible"}],
              "containerStatuses": [cs("a", {"cpu": "250m"}, {"cpu": "250m"})]}
    for minor in (35, 37):
        with release(minor):
            assert pod_resource(spec, status, use_status=True) == ({"cpu": 250}, 250, 200 * MI)


def test_the_scheduler_counts_pods_as_the_release_it_behaves_as():
    from pysched.apis import config as configmod
    from pysched.apis.core.resources import set_accounting
    from pysched.app import Options, SchedulerApp
    from pysched.client.auth import Credentials
    try:
        SchedulerApp(configmod.default_config(),
                     Options(serve=False, kube_version=(1, 35), feature_gates=default_gates((1, 35))),
                     Credentials(server="https://127.0.0.1:1", insecure=True))   # never contacted
        assert current_accounting() == Accounting(separate_sums=False, pod_level_status=False)
    finally:
        set_accounting(Accounting())
