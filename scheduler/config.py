"""KubeSchedulerConfiguration (``kubescheduler.config.k8s.io/v1``): strict parsing, defaults, validation.

The file kube-scheduler accepts is accepted here with the same defaults (``defaults.go``) and the
same rules (``validation.go``): profiles with unique ``schedulerName`` s sharing one queueSort,
plugins enabled/disabled per extension point or through ``multiPoint``, ``pluginConfig`` args,
``percentageOfNodesToScore`` in [0, 100], backoff seconds, ``leaderElection``,
``clientConnection`` and ``extenders``.

Decoding is strict like kube-scheduler's: an unknown field, a wrong type or a bad value raises
``ConfigError`` whose message starts with the field path
(``profiles[0].plugins.score.enabled[1].weight: ...``), and the process exits non-zero before
touching the cluster.

Defaults that differ from kube-scheduler's on purpose, because this runs beside it: the default
``schedulerName`` is ``pysched`` and the default Lease is ``pysched`` in the namespace the
scheduler runs in, so the two never fight over ``kube-system/kube-scheduler``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .yamlfile import YAMLFileError, read_yaml

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "pysched"
DEFAULT_LEASE_NAME = "pysched"
SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

EXTENSION_POINT_KEYS = ("preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore",
                        "score", "reserve", "permit", "preBind", "bind", "postBind", "multiPoint")

# kube-scheduler 1.35's default MultiPoint list (default_plugins.go), restricted to what exists
# in the registry; weights are upstream's. Names missing from the registry are skipped.
DEFAULT_MULTIPOINT: tuple[tuple[str, int], ...] = (
    ("SchedulingGates", 0),
    ("PrioritySort", 0),
    ("NodeUnschedulable", 0),
    ("NodeName", 0),
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
    ("DynamicResources", 0),
    ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    # The brief's own scores (not in kube-scheduler): on by default, weight 1 each.
    ("GPU", 1),
    ("AZSpread", 1),
    ("CapacityType", 1),
    ("InstanceType", 1),
    ("DefaultBinder", 0),
)


class ConfigError(ValueError):
    """Invalid configuration; the message names the field."""


# time.ParseDuration's units, in nanoseconds ("µs" is U+00B5 and "μs" U+03BC, both accepted).
_DURATION_UNITS = {"ns": 1, "us": 10**3, "\u00b5s": 10**3, "\u03bcs": 10**3, "ms": 10**6, "s": 10**9,
                   "m": 60 * 10**9, "h": 3600 * 10**9}
_MAX_DURATION = 2**63 - 1   # time.Duration is an int64 of nanoseconds


def go_duration_ns(text: str) -> int:
    """Nanoseconds in a Go duration string, by ``time.ParseDuration``'s grammar and limits:
    ``[-+]?([0-9]*(\\.[0-9]*)?[a-z]+)+`` or ``0``; beyond int64 nanoseconds (~292 years) it is
    invalid. Raises ``ValueError`` with Go's message."""
    quoted = '"' + text + '"'
    invalid = ValueError(f"time: invalid duration {quoted}")
    s, neg = text, False
    if s[:1] in ("-", "+"):
        neg, s = s[0] == "-", s[1:]
    if s == "0":
        return 0
    if not s:
        raise invalid
    total = 0
    while s:
        if not (s[0] == "." or s[0].isascii() and s[0].isdigit()):
            raise invalid
        i = 0
        while i < len(s) and "0" <= s[i] <= "9":
            i += 1
        whole, s = s[:i], s[i:]
        frac = ""
        if s[:1] == ".":
            j = 1
            while j < len(s) and "0" <= s[j] <= "9":
                j += 1
            frac, s = s[1:j], s[j:]
        if not whole and not frac:
            raise invalid
        j = 0
        while j < len(s) and s[j] != "." and not ("0" <= s[j] <= "9"):
            j += 1
        if j == 0:
            raise ValueError(f"time: missing unit in duration {quoted}")
        unit, s = s[:j], s[j:]
        scale = _DURATION_UNITS.get(unit)
        if scale is None:
            raise ValueError(f'time: unknown unit "{unit}" in duration {quoted}')
        v = int(whole or "0")
        if v > 2**63 // scale:
            raise invalid
        v *= scale
        if frac:
            v += int(int(frac) * scale // 10 ** len(frac))
            if v > 2**63:
                raise invalid
        total += v
        if total > 2**63:
            raise invalid
    if neg:
        return -total
    if total > _MAX_DURATION:
        raise invalid
    return total


def parse_duration(value: Any, path: str) -> float:
    """A ``metav1.Duration`` ("15s", "1m30s", "500ms") to seconds; errors name the field."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigError(f"{path}: expected a duration such as \"15s\", got {value!r}")
    if isinstance(value, (int, float)):
        # A bare number is nanoseconds in Go's JSON encoding of time.Duration.
        if not -(2**63) <= value <= _MAX_DURATION:
            raise ConfigError(f"{path}: Invalid value: {value!r}: out of range for a duration (int64 nanoseconds)")
        return float(value) / 1e9
    text = value.strip()
    if text == "":
        return 0.0
    try:
        return go_duration_ns(text) / 1e9
    except ValueError as exc:
        raise ConfigError(f'{path}: Invalid value: "{text}": {exc}') from None


def format_duration(seconds: float) -> str:
    if seconds == int(seconds):
        s = int(seconds)
        if s and s % 3600 == 0:
            return f"{s // 3600}h0m0s"
        if s >= 60:
            return f"{s // 60}m{s % 60}s"
        return f"{s}s"
    return f"{int(round(seconds * 1000))}ms"


# -- strict decoding helpers --------------------------------------------------------------------

def _mapping(raw: Any, path: str, allowed: tuple[str, ...]) -> dict:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path or 'config'}: expected a mapping, got {type(raw).__name__}")
    for k in raw:
        if k not in allowed:
            where = f"{path}.{k}" if path else str(k)
            raise ConfigError(f"{where}: unknown field")
    return raw


def _bool(raw: dict, key: str, path: str, default: bool) -> bool:
    v = raw.get(key, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise ConfigError(f"{path}{key}: expected true or false, got {v!r}")
    return v


def _int(raw: dict, key: str, path: str, default: int | None, bits: int = 64) -> int | None:
    """An integer field of Go type int32/int64 (``bits``): a larger number fails to decode."""
    v = raw.get(key, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        raise ConfigError(f"{path}{key}: expected an integer, got {v!r}")
    if not -(2 ** (bits - 1)) <= v < 2 ** (bits - 1):
        raise ConfigError(f"{path}{key}: Invalid value: {v}: cannot unmarshal number {v} into Go value of type int{bits}")
    return v


_FLOAT32_MAX = 3.4028234663852886e38


def _float(raw: dict, key: str, path: str, default: float) -> float:
    """A float32 field (``clientConnection.qps``)."""
    v = raw.get(key, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigError(f"{path}{key}: expected a number, got {v!r}")
    if not abs(v) <= _FLOAT32_MAX:
        raise ConfigError(f"{path}{key}: Invalid value: {v!r}: cannot unmarshal number {v!r} into Go value of type float32")
    return float(v)


def _str(raw: dict, key: str, path: str, default: str) -> str:
    v = raw.get(key, default)
    if v is None:
        return default
    if not isinstance(v, str):
        raise ConfigError(f"{path}{key}: expected a string, got {v!r}")
    return v


def _list(raw: dict, key: str, path: str) -> list:
    v = raw.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise ConfigError(f"{path}{key}: expected a list, got {type(v).__name__}")
    return v


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


# -- parsing -----------------------------------------------------------------------------------

_TOP = ("apiVersion", "kind", "parallelism", "leaderElection", "clientConnection",
        "healthzBindAddress", "metricsBindAddress", "enableProfiling", "enableContentionProfiling",
        "percentageOfNodesToScore", "podInitialBackoffSeconds", "podMaxBackoffSeconds", "profiles",
        "extenders", "delayCacheUntilActive")


def own_namespace() -> str:
    ns = os.environ.get("POD_NAMESPACE")
    if ns:
        return ns
    try:
        return Path(SA_NAMESPACE_FILE).read_text().strip() or "kube-system"
    except OSError:
        return "kube-system"


def load_file(path: str | os.PathLike) -> SchedulerConfig:
    try:
        raw = read_yaml(path)
    except YAMLFileError as exc:
        raise ConfigError(f"--config {path}: {exc}") from None
    cfg = parse(raw)
    cfg.source = str(path)
    return cfg


def parse(raw: Any) -> SchedulerConfig:
    raw = _mapping(raw, "", _TOP)
    api = raw.get("apiVersion")
    if api is None:
        raise ConfigError(f"apiVersion: required (use {API_VERSION})")
    if api != API_VERSION:
        raise ConfigError(f"apiVersion: {api!r} is not supported; use {API_VERSION}")
    if raw.get("kind") != KIND:
        raise ConfigError(f"kind: must be {KIND}, got {raw.get('kind')!r}")

    cfg = SchedulerConfig()
    cfg.parallelism = _int(raw, "parallelism", "", 16, bits=32)
    if cfg.parallelism <= 0:
        raise ConfigError(f"parallelism: should be an integer value greater than zero, got {cfg.parallelism}")
    cfg.enable_profiling = _bool(raw, "enableProfiling", "", False)
    cfg.enable_contention_profiling = _bool(raw, "enableContentionProfiling", "", False)
    cfg.delay_cache_until_active = _bool(raw, "delayCacheUntilActive", "", False)
    _str(raw, "healthzBindAddress", "", "")
    _str(raw, "metricsBindAddress", "", "")

    cfg.leader_election = _parse_leader_election(raw.get("leaderElection"))
    cfg.client_connection = _parse_client_connection(raw.get("clientConnection"))

    pct = _int(raw, "percentageOfNodesToScore", "", 0, bits=32)
    if not 0 <= pct <= 100:
        raise ConfigError(f"percentageOfNodesToScore: {pct} not in valid range [0-100]")
    cfg.percentage_of_nodes_to_score = pct
    cfg.pod_initial_backoff_seconds = _int(raw, "podInitialBackoffSeconds", "", 1)
    if cfg.pod_initial_backoff_seconds <= 0:
        raise ConfigError(f"podInitialBackoffSeconds: {cfg.pod_initial_backoff_seconds} must be greater than 0")
    cfg.pod_max_backoff_seconds = _int(raw, "podMaxBackoffSeconds", "", 10)
    if cfg.pod_max_backoff_seconds < cfg.pod_initial_backoff_seconds:
        raise ConfigError(f"podMaxBackoffSeconds: {cfg.pod_max_backoff_seconds} must be greater than "
                          "or equal to podInitialBackoffSeconds")

    profiles_raw = _list(raw, "profiles", "")
    if not profiles_raw:
        profiles_raw = [{}]
    seen: dict[str, int] = {}
    for i, p in enumerate(profiles_raw):
        prof = _parse_profile(p, f"profiles[{i}]", default_name=DEFAULT_SCHEDULER_NAME if len(profiles_raw) == 1 else None)
        if prof.scheduler_name in seen:
            raise ConfigError(f"profiles[{i}].schedulerName: Duplicate value: {prof.scheduler_name!r} "
                              f"(also profiles[{seen[prof.scheduler_name]}].schedulerName)")
        seen[prof.scheduler_name] = i
        cfg.profiles.append(prof)
    _validate_common_queue_sort(cfg.profiles)

    binders = 0
    managed: set[str] = set()
    for i, e in enumerate(_list(raw, "extenders", "")):
        ext = _parse_extender(e, f"extenders[{i}]")
        if ext.bind_verb:
            binders += 1
        for j, mr in enumerate(ext.managed_resources):
            if mr.name in managed:
                raise ConfigError(f"extenders[{i}].managedResources[{j}].name: {mr.name!r} duplicate extender managed resource name")
            managed.add(mr.name)
        cfg.extenders.append(ext)
    if binders > 1:
        raise ConfigError(f"extenders: found {binders} extenders implementing bind; only one extender can implement bind")
    return cfg


def default_config() -> SchedulerConfig:
    return parse({"apiVersion": API_VERSION, "kind": KIND})


def _parse_leader_election(raw: Any) -> LeaderElection:
    path = "leaderElection."
    raw = _mapping(raw, "leaderElection", ("leaderElect", "leaseDuration", "renewDeadline", "retryPeriod",
                                           "resourceLock", "resourceName", "resourceNamespace"))
    le = LeaderElection()
    le.leader_elect = _bool(raw, "leaderElect", path, True)
    for key, attr in (("leaseDuration", "lease_duration"), ("renewDeadline", "renew_deadline"),
                      ("retryPeriod", "retry_period")):
        if raw.get(key) is not None:
            setattr(le, attr, parse_duration(raw[key], path + key))
    le.resource_lock = _str(raw, "resourceLock", path, "leases")
    le.resource_name = _str(raw, "resourceName", path, DEFAULT_LEASE_NAME) or DEFAULT_LEASE_NAME
    le.resource_namespace = _str(raw, "resourceNamespace", path, "") or own_namespace()
    if le.leader_elect:
        for key, attr in (("leaseDuration", "lease_duration"), ("renewDeadline", "renew_deadline"),
                          ("retryPeriod", "retry_period")):
            if getattr(le, attr) <= 0:
                raise ConfigError(f"{path}{key}: must be greater than zero")
        if le.lease_duration >= 2**31:
            # The Lease stores whole seconds in an int32 (leaseDurationSeconds): a longer duration
            # would be refused by the API server and leave this replica unable to ever lead.
            raise ConfigError(f"{path}leaseDuration: must be less than 2147483648s (the Lease's int32 "
                              f"leaseDurationSeconds), got {format_duration(le.lease_duration)}")
        if le.lease_duration <= le.renew_deadline:
            raise ConfigError(f"{path}leaseDuration: must be greater than `renewDeadline` "
                              f"({format_duration(le.lease_duration)} <= {format_duration(le.renew_deadline)})")
        if le.renew_deadline <= 1.2 * le.retry_period:
            raise ConfigError(f"{path}renewDeadline: must be greater than retryPeriod*1.2 "
                              f"({format_duration(le.renew_deadline)} <= 1.2*{format_duration(le.retry_period)})")
        if le.resource_lock != "leases":
            raise ConfigError(f'{path}resourceLock: {le.resource_lock!r}: resourceLock value must be "leases"')
    return le


def _parse_client_connection(raw: Any) -> ClientConnection:
    path = "clientConnection."
    raw = _mapping(raw, "clientConnection", ("kubeconfig", "acceptContentTypes", "contentType", "qps", "burst"))
    cc = ClientConnection()
    cc.kubeconfig = _str(raw, "kubeconfig", path, "")
    cc.accept_content_types = _str(raw, "acceptContentTypes", path, "")
    cc.content_type = _str(raw, "contentType", path, "application/json")
    cc.qps = _float(raw, "qps", path, 50.0) or 50.0
    cc.burst = _int(raw, "burst", path, 100, bits=32) or 100
    if cc.qps < 0:
        raise ConfigError(f"{path}qps: must be positive, got {cc.qps}")
    if cc.burst < 0:
        raise ConfigError(f"{path}burst: must be positive, got {cc.burst}")
    return cc


def _parse_profile(raw: Any, path: str, default_name: str | None) -> Profile:
    raw = _mapping(raw, path, ("schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"))
    name = raw.get("schedulerName", default_name)
    if not name or not isinstance(name, str):
        raise ConfigError(f"{path}.schedulerName: Required value")
    prof = Profile(scheduler_name=name, path=path)
    pct = _int(raw, "percentageOfNodesToScore", path + ".", None, bits=32)
    if pct is not None and not 0 <= pct <= 100:
        raise ConfigError(f"{path}.percentageOfNodesToScore: {pct} not in valid range [0-100]")
    prof.percentage_of_nodes_to_score = pct
    plugins = _mapping(raw.get("plugins"), f"{path}.plugins", EXTENSION_POINT_KEYS)
    for ep, ps in plugins.items():
        prof.plugins[ep] = _parse_plugin_set(ps, f"{path}.plugins.{ep}")
    for i, pc in enumerate(_list(raw, "pluginConfig", path + ".")):
        pcp = f"{path}.pluginConfig[{i}]"
        pc = _mapping(pc, pcp, ("name", "args"))
        pname = pc.get("name")
        if not pname or not isinstance(pname, str):
            raise ConfigError(f"{pcp}.name: Required value")
        if pname in prof.plugin_config:
            raise ConfigError(f"{pcp}: Duplicate value: {pname!r}")
        args = pc.get("args") or {}
        if not isinstance(args, dict):
            raise ConfigError(f"{pcp}.args: expected a mapping")
        prof.plugin_config[pname] = dict(args)
    return prof


def _parse_plugin_set(raw: Any, path: str) -> PluginSet:
    raw = _mapping(raw, path, ("enabled", "disabled"))
    ps = PluginSet()
    for i, p in enumerate(_list(raw, "enabled", path + ".")):
        pp = f"{path}.enabled[{i}]"
        p = _mapping(p, pp, ("name", "weight"))
        name = p.get("name")
        if not name or not isinstance(name, str):
            raise ConfigError(f"{pp}.name: Required value")
        weight = _int(p, "weight", pp + ".", 0, bits=32)   # v1 Plugin.Weight is *int32
        if weight < 0:
            raise ConfigError(f"{pp}.weight: must not be negative, got {weight}")
        ps.enabled.append(PluginRef(name, weight))
    for i, p in enumerate(_list(raw, "disabled", path + ".")):
        pp = f"{path}.disabled[{i}]"
        p = _mapping(p, pp, ("name", "weight"))
        name = p.get("name")
        if not name or not isinstance(name, str):
            raise ConfigError(f"{pp}.name: Required value")
        ps.disabled.append(name)
    return ps


def _validate_common_queue_sort(profiles: list[Profile]) -> None:
    def qs(p: Profile):
        ps = p.plugins.get("queueSort")
        return tuple((r.name for r in ps.enabled)) if ps else None, tuple(ps.disabled) if ps else None
    if not profiles:
        return
    first = qs(profiles[0])
    for i, p in enumerate(profiles[1:], 1):
        if qs(p) != first:
            raise ConfigError(f"profiles[{i}].plugins.queueSort: must be the same for all profiles")


def _parse_extender(raw: Any, path: str) -> ExtenderConfig:
    raw = _mapping(raw, path, ("urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight",
                               "bindVerb", "enableHTTPS", "tlsConfig", "httpTimeout",
                               "nodeCacheCapable", "managedResources", "ignorable"))
    p = path + "."
    url = _str(raw, "urlPrefix", p, "")
    if not url:
        raise ConfigError(f"{p}urlPrefix: Required value")
    if not re.match(r"^https?://[^/\s]+", url):
        raise ConfigError(f"{p}urlPrefix: {url!r} must be an http:// or https:// URL")
    ext = ExtenderConfig(url_prefix=url, path=path)
    ext.filter_verb = _str(raw, "filterVerb", p, "")
    ext.preempt_verb = _str(raw, "preemptVerb", p, "")
    ext.prioritize_verb = _str(raw, "prioritizeVerb", p, "")
    ext.bind_verb = _str(raw, "bindVerb", p, "")
    ext.weight = _int(raw, "weight", p, 0)
    if ext.prioritize_verb and ext.weight <= 0:
        raise ConfigError(f"{p}weight: {ext.weight} must have a positive weight applied to it")
    ext.enable_https = _bool(raw, "enableHTTPS", p, False)
    ext.node_cache_capable = _bool(raw, "nodeCacheCapable", p, False)
    ext.ignorable = _bool(raw, "ignorable", p, False)
    if raw.get("httpTimeout") is not None:
        ext.http_timeout = parse_duration(raw["httpTimeout"], p + "httpTimeout")
        if ext.http_timeout <= 0:
            raise ConfigError(f"{p}httpTimeout: must be greater than zero")
    if raw.get("tlsConfig") is not None:
        t = _mapping(raw["tlsConfig"], p + "tlsConfig", ("insecure", "serverName", "certFile", "keyFile",
                                                          "caFile", "certData", "keyData", "caData"))
        tp = p + "tlsConfig."
        ext.tls_config = TLSConfig(
            insecure=_bool(t, "insecure", tp, False), server_name=_str(t, "serverName", tp, ""),
            cert_file=_str(t, "certFile", tp, ""), key_file=_str(t, "keyFile", tp, ""),
            ca_file=_str(t, "caFile", tp, ""), cert_data=_str(t, "certData", tp, ""),
            key_data=_str(t, "keyData", tp, ""), ca_data=_str(t, "caData", tp, ""))
    for j, mr in enumerate(_list(raw, "managedResources", p)):
        mp = f"{p}managedResources[{j}]"
        mr = _mapping(mr, mp, ("name", "ignoredByScheduler"))
        name = _str(mr, "name", mp + ".", "")
        if not name:
            raise ConfigError(f"{mp}.name: Required value")
        from .resources import is_extended_resource
        if not is_extended_resource(name):
            raise ConfigError(f"{mp}.name: {name!r} is an invalid extended resource name")
        ext.managed_resources.append(ManagedResource(name, _bool(mr, "ignoredByScheduler", mp + ".", False)))
    return ext


# -- effective plugin sets ------------------------------------------------------------------------

def merged_plugin_sets(profile: Profile, available: set[str]) -> dict[str, PluginSet]:
    """Profile plugins with kube-scheduler's default MultiPoint merged in (``mergePlugins``)."""
    default_mp = PluginSet(enabled=[PluginRef(n, w) for n, w in DEFAULT_MULTIPOINT if n in available])
    out: dict[str, PluginSet] = {}
    for ep in EXTENSION_POINT_KEYS:
        custom = profile.plugins.get(ep, PluginSet())
        default = default_mp if ep == "multiPoint" else PluginSet()
        out[ep] = _merge_plugin_set(default, custom)
    return out


def _merge_plugin_set(default: PluginSet, custom: PluginSet) -> PluginSet:
    disabled = list(custom.disabled) + list(default.disabled)
    disabled_set = set(disabled)
    custom_by_name = {p.name: (i, p) for i, p in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[PluginRef] = []
    if "*" not in disabled_set:
        for p in default.enabled:
            if p.name in disabled_set:
                continue
            if p.name in custom_by_name:
                idx, cp = custom_by_name[p.name]
                p = cp
                replaced.add(idx)
            enabled.append(p)
    for i, p in enumerate(custom.enabled):
        if i not in replaced:
            enabled.append(p)
    return PluginSet(enabled=enabled, disabled=disabled)


# -- output ---------------------------------------------------------------------------------------

def to_dict(cfg: SchedulerConfig, plugin_args: dict[str, dict[str, dict]] | None = None,
            effective_plugins: dict[str, dict[str, PluginSet]] | None = None) -> dict:
    """The effective configuration in v1 form (``--write-config-to``)."""
    le = cfg.leader_election
    cc = cfg.client_connection
    out: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "parallelism": cfg.parallelism,
        "leaderElection": {
            "leaderElect": le.leader_elect,
            "leaseDuration": format_duration(le.lease_duration),
            "renewDeadline": format_duration(le.renew_deadline),
            "retryPeriod": format_duration(le.retry_period),
            "resourceLock": le.resource_lock,
            "resourceName": le.resource_name,
            "resourceNamespace": le.resource_namespace,
        },
        "clientConnection": {
            "kubeconfig": cc.kubeconfig, "acceptContentTypes": cc.accept_content_types,
            "contentType": cc.content_type, "qps": cc.qps, "burst": cc.burst,
        },
        "enableProfiling": cfg.enable_profiling,
        "enableContentionProfiling": cfg.enable_contention_profiling,
        "percentageOfNodesToScore": cfg.percentage_of_nodes_to_score,
        "podInitialBackoffSeconds": cfg.pod_initial_backoff_seconds,
        "podMaxBackoffSeconds": cfg.pod_max_backoff_seconds,
        "delayCacheUntilActive": cfg.delay_cache_until_active,
        "profiles": [],
    }
    for prof in cfg.profiles:
        pd: dict[str, Any] = {"schedulerName": prof.scheduler_name}
        if prof.percentage_of_nodes_to_score is not None:
            pd["percentageOfNodesToScore"] = prof.percentage_of_nodes_to_score
        sets = (effective_plugins or {}).get(prof.scheduler_name) or prof.plugins
        plugins: dict[str, Any] = {}
        for ep in EXTENSION_POINT_KEYS:
            ps = sets.get(ep)
            if not ps or (not ps.enabled and not ps.disabled):
                continue
            entry: dict[str, Any] = {}
            if ps.enabled:
                entry["enabled"] = [{"name": r.name, **({"weight": r.weight} if r.weight else {})}
                                    for r in ps.enabled]
            if ps.disabled:
                entry["disabled"] = [{"name": n} for n in ps.disabled]
            plugins[ep] = entry
        pd["plugins"] = plugins
        args = (plugin_args or {}).get(prof.scheduler_name) or prof.plugin_config
        pd["pluginConfig"] = [{"name": n, "args": a} for n, a in args.items()]
        out["profiles"].append(pd)
    if cfg.extenders:
        out["extenders"] = []
        for e in cfg.extenders:
            ed: dict[str, Any] = {"urlPrefix": e.url_prefix}
            for k, v in (("filterVerb", e.filter_verb), ("preemptVerb", e.preempt_verb),
                         ("prioritizeVerb", e.prioritize_verb), ("bindVerb", e.bind_verb)):
                if v:
                    ed[k] = v
            ed.update({"weight": e.weight, "enableHTTPS": e.enable_https,
                       "httpTimeout": format_duration(e.http_timeout),
                       "nodeCacheCapable": e.node_cache_capable, "ignorable": e.ignorable})
            if e.managed_resources:
                ed["managedResources"] = [{"name": m.name, "ignoredByScheduler": m.ignored_by_scheduler}
                                          for m in e.managed_resources]
            if e.tls_config:
                t = e.tls_config
                ed["tlsConfig"] = {k: v for k, v in (
                    ("insecure", t.insecure), ("serverName", t.server_name), ("certFile", t.cert_file),
                    ("keyFile", t.key_file), ("caFile", t.ca_file)) if v}
            out["extenders"].append(ed)
    return out
