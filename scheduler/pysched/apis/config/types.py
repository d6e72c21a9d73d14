"""KubeSchedulerConfiguration's types: the decoded, defaulted configuration the rest of pysched reads."""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "pysched"
DEFAULT_LEASE_NAME = "pysched"
SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

EXTENSION_POINT_KEYS = ("preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore",
                        "score", "reserve", "permit", "preBind", "bind", "postBind", "multiPoint",
                        "placementGenerate", "placementScore", "podGroupPostFilter")
# Extension points of kube-scheduler 1.36/1.37's pod-group cycle (GenericWorkload,
# TopologyAwareWorkloadScheduling: off by default). placementGenerate and placementScore run in
# pysched's pod-group cycle (``schedule_one_podgroup``); podGroupPostFilter is accepted and
# validated, and pysched's group preemption is not a plugin yet.
WORKLOAD_EXTENSION_POINT_KEYS = ("placementGenerate", "placementScore", "podGroupPostFilter")

# kube-scheduler's default MultiPoint list (``getDefaultPlugins`` and ``applyFeatureGates`` in
# pkg/scheduler/apis/config/v1/default_plugins.go), per release: plugins, order and weights exactly
# as upstream. 1.37 put NodeName before NodeUnschedulable. ``applyFeatureGates`` then adds
# NodeDeclaredFeatures at the end (its gate: beta, on, in 1.36; GA in 1.37), DynamicResources before
# DefaultPreemption with weight 2 (DynamicResourceAllocation: GA, locked on, since 1.34),
# DeferredPodScheduling, GangScheduling, TopologyPlacementGenerator and PodGroupPodsCount when their
# (alpha or opt-in) gates are on. Names missing from the registry are skipped. pysched's own plugins
# (GPU, AZSpread, CapacityType, InstanceType) are not here: a profile enables them explicitly.
_DEFAULT_MULTIPOINT_TAIL: tuple[tuple[str, int], ...] = (
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", 0),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", 0),
    ("NodeVolumeLimits", 0),
    ("VolumeBinding", 0),
    ("VolumeZone", 0),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", 0),
)


def default_multipoint(release: tuple[int, int], gates: Container[str]) -> tuple[tuple[str, int], ...]:
    """kube-scheduler ``release``'s default MultiPoint plugins and weights with ``gates`` on."""
    head: tuple[tuple[str, int], ...] = (("SchedulingGates", 0), ("PrioritySort", 0))
    if release >= (1, 37):
        head += (("NodeName", 0), ("NodeUnschedulable", 0))
    else:
        head += (("NodeUnschedulable", 0), ("NodeName", 0))
    out = list(head + _DEFAULT_MULTIPOINT_TAIL)
    if "NodeDeclaredFeatures" in gates:
        out.append(("NodeDeclaredFeatures", 0))
    if "InPlacePodVerticalScalingSchedulerPreemption" in gates:   # before NodeResourcesFit (1.37)
        out.insert(next(i for i, (n, _) in enumerate(out) if n == "NodeResourcesFit"), ("DeferredPodScheduling", 0))
    if "DynamicResourceAllocation" in gates:
        i = next(i for i, (n, _) in enumerate(out) if n == "DefaultPreemption")
        out.insert(i, ("DynamicResources", 2))
    if "GenericWorkload" in gates:
        out.append(("GangScheduling", 0))
    if "TopologyAwareWorkloadScheduling" in gates:
        out += [("TopologyPlacementGenerator", 0), ("PodGroupPodsCount", 1)]
    return tuple(out)


# The default list of the oldest release pysched follows, with its default gates (kept for readers
# of the 1.35 list; the engine asks ``default_multipoint``).
DEFAULT_MULTIPOINT: tuple[tuple[str, int], ...] = default_multipoint((1, 35), ("DynamicResourceAllocation",))


class ConfigError(ValueError):
    """Invalid configuration; the message names the field."""


# -- types -------------------------------------------------------------------------------------

@dataclass
class LeaderElection:
    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_lock: str = "leases"
    resource_name: str = DEFAULT_LEASE_NAME
    resource_namespace: str = ""


@dataclass
class ClientConnection:
    kubeconfig: str = ""
    accept_content_types: str = ""
    content_type: str = "application/json"
    qps: float = 50.0
    burst: int = 100


@dataclass
class PluginRef:
    name: str
    weight: int = 0


@dataclass
class PluginSet:
    enabled: list[PluginRef] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)


@dataclass
class Profile:
    scheduler_name: str
    percentage_of_nodes_to_score: int | None = None
    plugins: dict[str, PluginSet] = field(default_factory=dict)
    plugin_config: dict[str, dict] = field(default_factory=dict)
    path: str = "profiles[0]"


@dataclass
class ManagedResource:
    name: str
    ignored_by_scheduler: bool = False


@dataclass
class TLSConfig:
    insecure: bool = False
    server_name: str = ""
    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    cert_data: str = ""
    key_data: str = ""
    ca_data: str = ""


@dataclass
class ExtenderConfig:
    url_prefix: str
    filter_verb: str = ""
    preempt_verb: str = ""
    prioritize_verb: str = ""
    weight: int = 0
    bind_verb: str = ""
    enable_https: bool = False
    tls_config: TLSConfig | None = None
    http_timeout: float = 5.0
    node_cache_capable: bool = False
    managed_resources: list[ManagedResource] = field(default_factory=list)
    ignorable: bool = False
    path: str = "extenders[0]"


@dataclass
class SchedulerConfig:
    parallelism: int = 16
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    client_connection: ClientConnection = field(default_factory=ClientConnection)
    percentage_of_nodes_to_score: int = 0
    pod_initial_backoff_seconds: int = 1
    pod_max_backoff_seconds: int = 10
    profiles: list[Profile] = field(default_factory=list)
    extenders: list[ExtenderConfig] = field(default_factory=list)
    delay_cache_until_active: bool = False
    enable_profiling: bool = False
    enable_contention_profiling: bool = False
    source: str = "<defaults>"

    def profile(self, scheduler_name: str) -> Profile | None:
        for p in self.profiles:
            if p.scheduler_name == scheduler_name:
                return p
        return None

    @property
    def scheduler_names(self) -> set[str]:
        return {p.scheduler_name for p in self.profiles}


