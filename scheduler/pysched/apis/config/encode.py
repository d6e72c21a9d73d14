"""The effective configuration written back in v1 form (``--write-config-to``, ``/configz``)."""

from __future__ import annotations

from typing import Any

from pysched.apis.config.fields import format_duration
from pysched.apis.config.types import API_VERSION, EXTENSION_POINT_KEYS, KIND, PluginSet, SchedulerConfig


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
                entry["enabled"] = [{"name": r.name, "weight": r.weight} for r in ps.enabled]
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
