"""Decoding and validation of a KubeSchedulerConfiguration file, as kube-scheduler's
``defaults.go`` and ``validation.go`` do it; every error names the field."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pysched.apis.config.fields import (
    format_duration,
    parse_duration,
    read_bool,
    read_float,
    read_int,
    read_list,
    read_mapping,
    read_str,
)
from pysched.apis.config.types import (
    API_VERSION,
    DEFAULT_LEASE_NAME,
    DEFAULT_SCHEDULER_NAME,
    EXTENSION_POINT_KEYS,
    KIND,
    SA_NAMESPACE_FILE,
    ClientConnection,
    ConfigError,
    ExtenderConfig,
    LeaderElection,
    ManagedResource,
    PluginRef,
    PluginSet,
    Profile,
    SchedulerConfig,
    TLSConfig,
)
from pysched.util.yamlfile import YAMLFileError, read_yaml

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
    raw = read_mapping(raw, "", _TOP)
    api = raw.get("apiVersion")
    if api is None:
        raise ConfigError(f"apiVersion: required (use {API_VERSION})")
    if api != API_VERSION:
        raise ConfigError(f"apiVersion: {api!r} is not supported; use {API_VERSION}")
    if raw.get("kind") != KIND:
        raise ConfigError(f"kind: must be {KIND}, got {raw.get('kind')!r}")

    cfg = SchedulerConfig()
    cfg.parallelism = read_int(raw, "parallelism", "", 16, bits=32)
    if cfg.parallelism <= 0:
        raise ConfigError(f"parallelism: should be an integer value greater than zero, got {cfg.parallelism}")
    cfg.enable_profiling = read_bool(raw, "enableProfiling", "", False)
    cfg.enable_contention_profiling = read_bool(raw, "enableContentionProfiling", "", False)
    cfg.delay_cache_until_active = read_bool(raw, "delayCacheUntilActive", "", False)
    read_str(raw, "healthzBindAddress", "", "")
    read_str(raw, "metricsBindAddress", "", "")

    cfg.leader_election = _parse_leader_election(raw.get("leaderElection"))
    cfg.client_connection = _parse_client_connection(raw.get("clientConnection"))

    pct = read_int(raw, "percentageOfNodesToScore", "", 0, bits=32)
    if not 0 <= pct <= 100:
        raise ConfigError(f"percentageOfNodesToScore: {pct} not in valid range [0-100]")
    cfg.percentage_of_nodes_to_score = pct
    cfg.pod_initial_backoff_seconds = read_int(raw, "podInitialBackoffSeconds", "", 1)
    if cfg.pod_initial_backoff_seconds <= 0:
        raise ConfigError(f"podInitialBackoffSeconds: {cfg.pod_initial_backoff_seconds} must be greater than 0")
    cfg.pod_max_backoff_seconds = read_int(raw, "podMaxBackoffSeconds", "", 10)
    if cfg.pod_max_backoff_seconds < cfg.pod_initial_backoff_seconds:
        raise ConfigError(f"podMaxBackoffSeconds: {cfg.pod_max_backoff_seconds} must be greater than "
                          "or equal to podInitialBackoffSeconds")

    profiles_raw = read_list(raw, "profiles", "")
    if not profiles_raw:
        profiles_raw = [{}]
    seen: dict[str, int] = {}
    for i, p in enumerate(profiles_raw):
        prof = _parse_profile(p, f"profiles[{i}]",
                              default_name=DEFAULT_SCHEDULER_NAME if len(profiles_raw) == 1 else None)
        if prof.scheduler_name in seen:
            raise ConfigError(f"profiles[{i}].schedulerName: Duplicate value: {prof.scheduler_name!r} "
                              f"(also profiles[{seen[prof.scheduler_name]}].schedulerName)")
        seen[prof.scheduler_name] = i
        cfg.profiles.append(prof)
    _validate_common_queue_sort(cfg.profiles)

    binders = 0
    managed: set[str] = set()
    for i, e in enumerate(read_list(raw, "extenders", "")):
        ext = _parse_extender(e, f"extenders[{i}]")
        if ext.bind_verb:
            binders += 1
        for j, mr in enumerate(ext.managed_resources):
            if mr.name in managed:
                raise ConfigError(f"extenders[{i}].managedResources[{j}].name: {mr.name!r} "
                                  "duplicate extender managed resource name")
            managed.add(mr.name)
        cfg.extenders.append(ext)
    if binders > 1:
        raise ConfigError(f"extenders: found {binders} extenders implementing bind; "
                          "only one extender can implement bind")
    return cfg


def default_config() -> SchedulerConfig:
    return parse({"apiVersion": API_VERSION, "kind": KIND})


def _parse_leader_election(raw: Any) -> LeaderElection:
    path = "leaderElection."
    raw = read_mapping(raw, "leaderElection", ("leaderElect", "leaseDuration", "renewDeadline", "retryPeriod",
                                           "resourceLock", "resourceName", "resourceNamespace"))
    le = LeaderElection()
    le.leader_elect = read_bool(raw, "leaderElect", path, True)
    for key, attr in (("leaseDuration", "lease_duration"), ("renewDeadline", "renew_deadline"),
                      ("retryPeriod", "retry_period")):
        if raw.get(key) is not None:
            setattr(le, attr, parse_duration(raw[key], path + key))
    le.resource_lock = read_str(raw, "resourceLock", path, "leases")
    le.resource_name = read_str(raw, "resourceName", path, DEFAULT_LEASE_NAME) or DEFAULT_LEASE_NAME
    le.resource_namespace = read_str(raw, "resourceNamespace", path, "") or own_namespace()
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
    raw = read_mapping(raw, "clientConnection", ("kubeconfig", "acceptContentTypes", "contentType", "qps", "burst"))
    cc = ClientConnection()
    cc.kubeconfig = read_str(raw, "kubeconfig", path, "")
    cc.accept_content_types = read_str(raw, "acceptContentTypes", path, "")
    cc.content_type = read_str(raw, "contentType", path, "application/json")
    cc.qps = read_float(raw, "qps", path, 50.0) or 50.0
    cc.burst = read_int(raw, "burst", path, 100, bits=32) or 100
    if cc.qps < 0:
        raise ConfigError(f"{path}qps: must be positive, got {cc.qps}")
    if cc.burst < 0:
        raise ConfigError(f"{path}burst: must be positive, got {cc.burst}")
    return cc


def _parse_profile(raw: Any, path: str, default_name: str | None) -> Profile:
    raw = read_mapping(raw, path, ("schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"))
    name = raw.get("schedulerName", default_name)
    if not name or not isinstance(name, str):
        raise ConfigError(f"{path}.schedulerName: Required value")
    prof = Profile(scheduler_name=name, path=path)
    pct = read_int(raw, "percentageOfNodesToScore", path + ".", None, bits=32)
    if pct is not None and not 0 <= pct <= 100:
        raise ConfigError(f"{path}.percentageOfNodesToScore: {pct} not in valid range [0-100]")
    prof.percentage_of_nodes_to_score = pct
    plugins = read_mapping(raw.get("plugins"), f"{path}.plugins", EXTENSION_POINT_KEYS)
    for ep, ps in plugins.items():
        prof.plugins[ep] = _parse_plugin_set(ps, f"{path}.plugins.{ep}")
    for i, pc in enumerate(read_list(raw, "pluginConfig", path + ".")):
        pcp = f"{path}.pluginConfig[{i}]"
        pc = read_mapping(pc, pcp, ("name", "args"))
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
    raw = read_mapping(raw, path, ("enabled", "disabled"))
    ps = PluginSet()
    for i, p in enumerate(read_list(raw, "enabled", path + ".")):
        pp = f"{path}.enabled[{i}]"
        p = read_mapping(p, pp, ("name", "weight"))
        name = p.get("name")
        if not name or not isinstance(name, str):
            raise ConfigError(f"{pp}.name: Required value")
        weight = read_int(p, "weight", pp + ".", 0, bits=32)   # v1 Plugin.Weight is *int32
        if weight < 0:
            raise ConfigError(f"{pp}.weight: must not be negative, got {weight}")
        ps.enabled.append(PluginRef(name, weight))
    for i, p in enumerate(read_list(raw, "disabled", path + ".")):
        pp = f"{path}.disabled[{i}]"
        p = read_mapping(p, pp, ("name", "weight"))
        name = p.get("name")
        if not name or not isinstance(name, str):
            raise ConfigError(f"{pp}.name: Required value")
        ps.disabled.append(name)
    return ps


def _validate_common_queue_sort(profiles: list[Profile]) -> None:
    def qs(p: Profile):
        ps = p.plugins.get("queueSort")
        return tuple(r.name for r in ps.enabled) if ps else None, tuple(ps.disabled) if ps else None
    if not profiles:
        return
    first = qs(profiles[0])
    for i, p in enumerate(profiles[1:], 1):
        if qs(p) != first:
            raise ConfigError(f"profiles[{i}].plugins.queueSort: must be the same for all profiles")


def _parse_extender(raw: Any, path: str) -> ExtenderConfig:
    raw = read_mapping(raw, path, ("urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight",
                               "bindVerb", "enableHTTPS", "tlsConfig", "httpTimeout",
                               "nodeCacheCapable", "managedResources", "ignorable"))
    p = path + "."
    url = read_str(raw, "urlPrefix", p, "")
    if not url:
        raise ConfigError(f"{p}urlPrefix: Required value")
    if not re.match(r"^https?://[^/\s]+", url):
        raise ConfigError(f"{p}urlPrefix: {url!r} must be an http:// or https:// URL")
    ext = ExtenderConfig(url_prefix=url, path=path)
    ext.filter_verb = read_str(raw, "filterVerb", p, "")
    ext.preempt_verb = read_str(raw, "preemptVerb", p, "")
    ext.prioritize_verb = read_str(raw, "prioritizeVerb", p, "")
    ext.bind_verb = read_str(raw, "bindVerb", p, "")
    ext.weight = read_int(raw, "weight", p, 0)
    if ext.prioritize_verb and ext.weight <= 0:
        raise ConfigError(f"{p}weight: {ext.weight} must have a positive weight applied to it")
    ext.enable_https = read_bool(raw, "enableHTTPS", p, False)
    ext.node_cache_capable = read_bool(raw, "nodeCacheCapable", p, False)
    ext.ignorable = read_bool(raw, "ignorable", p, False)
    if raw.get("httpTimeout") is not None:
        ext.http_timeout = parse_duration(raw["httpTimeout"], p + "httpTimeout")
        if ext.http_timeout <= 0:
            raise ConfigError(f"{p}httpTimeout: must be greater than zero")
    if raw.get("tlsConfig") is not None:
        t = read_mapping(raw["tlsConfig"], p + "tlsConfig", ("insecure", "serverName", "certFile", "keyFile",
                                                          "caFile", "certData", "keyData", "caData"))
        tp = p + "tlsConfig."
        ext.tls_config = TLSConfig(
            insecure=read_bool(t, "insecure", tp, False), server_name=read_str(t, "serverName", tp, ""),
            cert_file=read_str(t, "certFile", tp, ""), key_file=read_str(t, "keyFile", tp, ""),
            ca_file=read_str(t, "caFile", tp, ""), cert_data=read_str(t, "certData", tp, ""),
            key_data=read_str(t, "keyData", tp, ""), ca_data=read_str(t, "caData", tp, ""))
    for j, mr in enumerate(read_list(raw, "managedResources", p)):
        mp = f"{p}managedResources[{j}]"
        mr = read_mapping(mr, mp, ("name", "ignoredByScheduler"))
        name = read_str(mr, "name", mp + ".", "")
        if not name:
            raise ConfigError(f"{mp}.name: Required value")
        from pysched.apis.core.resources import is_extended_resource
        if not is_extended_resource(name):
            raise ConfigError(f"{mp}.name: {name!r} is an invalid extended resource name")
        ext.managed_resources.append(ManagedResource(name, read_bool(mr, "ignoredByScheduler", mp + ".", False)))
    return ext


