"""Prometheus metrics with kube-scheduler's names, labels and buckets, plus our own.

Names and buckets follow ``pkg/scheduler/metrics/metrics.go`` so existing kube-scheduler
dashboards work unchanged (set ``profile`` to our schedulerName; tell the schedulers apart by the
``job`` label). Metrics that only this scheduler has are prefixed ``pysched_``: bind conflicts
(HTTP 409 from another binder), kubelet rejections of pods we bound (OutOfcpu, OutOfmemory, ...),
the event recorder (written, aggregated into series, failed, dropped, backlog) and informer relists.
The API client's ``rest_client_*`` metrics follow client-go (``k8s.io/component-base/metrics/
prometheus/restclient``): the same names, labels and buckets, so the kubernetes-mixin panels on API
request rate and latency read them too.

Label children are cached because ``labels()`` costs more than ``observe()`` on the hot path.

Importing this module turns off prometheus-client's ``*_created`` series (one per counter,
histogram and summary child): Go components do not export them, they double the series count, and
every process that serves ``/metrics`` (the scheduler, ``pysched extender``) imports this module.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Gauge, disable_created_metrics

from pysched.util.fastmetrics import Counter, Histogram

disable_created_metrics()

# client-go's buckets for rest_client_request_duration_seconds and rest_client_rate_limiter_duration_seconds.
REST_CLIENT_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)


def _exp(start: float, factor: float, count: int) -> list[float]:
    return [start * factor**i for i in range(count)]


class Metrics:
    def __init__(self, registry: CollectorRegistry = REGISTRY):
        self.registry = registry
        r = registry
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts_total",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be "
            "scheduled, while 'error' means an internal scheduler problem.", ["result", "profile"], registry=r)
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"], buckets=_exp(0.001, 2, 15), registry=r)
        self.algorithm_duration = Histogram(
            "scheduler_scheduling_algorithm_duration_seconds", "Scheduling algorithm latency in seconds",
            buckets=_exp(0.001, 2, 15), registry=r)
        self.sli_duration = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue "
            "and might involve multiple scheduling attempts.", ["attempts"],
            buckets=_exp(0.01, 2, 20), registry=r)
        self.pod_attempts = Histogram(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.", buckets=_exp(1, 2, 5), registry=r)
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' "
            "means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods "
            "that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable "
            "pods that the scheduler never attempted to schedule because they are gated.", ["queue"], registry=r)
        self.permit_wait_duration = Histogram(
            "scheduler_permit_wait_duration_seconds", "Duration of waiting on permit.", ["result"],
            buckets=_exp(0.001, 2, 15), registry=r)
        self.extension_point_duration = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"], buckets=_exp(0.0001, 2, 12), registry=r)
        self.plugin_execution_duration = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"], buckets=_exp(0.00001, 1.5, 20), registry=r)
        self.queue_incoming = Counter(
            "scheduler_queue_incoming_pods_total",
            "Number of pods added to scheduling queues by event and queue type.", ["queue", "event"], registry=r)
        # kube-scheduler 1.37's entity metrics (type "pod" or "podgroup"; pysched queues pods only).
        self.queue_incoming_entities = Counter(
            "scheduler_queue_incoming_entities_total",
            "Number of scheduling entities added to scheduling queues by event, queue type, and entity type. "
            "Entity types are either 'pod' (for individual pods that are not members of any podgroup) or "
            "'podgroup'.", ["queue", "event", "type"], registry=r)
        self.queued_entities = Gauge(
            "scheduler_queued_entities",
            "Number of queued scheduling entities ('pod' or 'podgroup'; 'pod' stands for individual pods that "
            "are not members of any podgroup) by the queue type. 'active' means number of entities in activeQ; "
            "'backoff' means number of entities in backoffQ; 'unschedulable' means number of entities in "
            "unschedulableEntities that the scheduler attempted to schedule and failed; 'gated' is the number "
            "of unschedulable entities that the scheduler never attempted to schedule because they are gated.",
            ["queue", "type"], registry=r)
        # DynamicResources' binding conditions (DRADeviceBindingConditions, 1.36+)
        self.dra_binding_conditions_allocations = Counter(
            "scheduler_dra_bindingconditions_allocations",
            "Number of allocations using devices with BindingConditions, counted per driver per scheduling "
            "attempt", ["profile", "driver", "status"], registry=r)
        self.dra_binding_conditions_wait = Histogram(
            "scheduler_dra_bindingconditions_wait_duration_seconds",
            "Time in seconds spent waiting for BindingConditions to be satisfied during PreBind.",
            ["profile", "driver", "status"], buckets=_exp(0.1, 2, 14), registry=r)
        self.resource_claim_creates = Counter(
            "dynamic_resource_allocation_resourceclaim_creates",
            "Number of ResourceClaims creation requests, categorized by creation status, admin access, and owning "
            "API group and kind (either Pod or scheduling.k8s.io/PodGroup)",
            ["status", "admin_access", "owner_api_group", "owner_api_kind"], registry=r)
        self.pod_scheduled_after_flush = Counter(
            "scheduler_pod_scheduled_after_flush",
            "Number of pods that were successfully scheduled after being flushed from unschedulableEntities due "
            "to timeout. This metric helps detect potential queueing hint misconfigurations or event handling "
            "issues.", registry=r)
        self.unschedulable_pods = Gauge(
            "scheduler_unschedulable_pods",
            "The number of unschedulable pods broken down by plugin name. A pod will increment the gauge "
            "for all plugins that caused it to not schedule and so this metric have meaning only when "
            "broken down by plugin.", ["plugin", "profile"], registry=r)
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts_total", "Total preemption attempts in the cluster till now",
            registry=r)
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims", "Number of selected preemption victims for preemption initiated by a "
            "single pod",
            buckets=_exp(1, 2, 7), registry=r)
        self.cache_size = Gauge(
            "scheduler_cache_size", "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            ["type"], registry=r)
        self.goroutines = Gauge(
            "scheduler_goroutines", "Number of running goroutines split by the work they do such as binding.",
            ["operation"], registry=r)
        self.leader = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. "
            "'name' is the string used to identify the lease. Please make sure to group by name.", ["name"], registry=r)
        self.dra_cel_engine = Gauge(
            "pysched_dra_cel_engine", "The engine that evaluates DRA device selectors: 1 for the one this process "
            "uses. 'pysched-cel' is kube-scheduler's own CEL; 'builtin' is a subset in which many selectors fail "
            "to compile, used when the pysched-cel helper was not found (the log says how to fix it). Exported "
            "only when a profile enables DynamicResources.", ["engine"], registry=r)
        self.fenced_writes = Counter(
            "pysched_fenced_writes_total",
            "API writes this replica did not send because it could not prove it leads at that moment "
            "(the leader lease was not fresh, lost, or being handed over), by what was written.",
            ["kind"], registry=r)
        self.bind_retries = Counter(
            "pysched_bind_retries_total",
            "Binds sent again on the same node after a failure, the pod's reservation kept, because a plugin "
            "admitted it as part of a whole (a gang, CycleState.bind_until_bound): a member is never abandoned "
            "once its group is admitted.", ["profile"], registry=r)
        self.pod_status_writes = Counter(
            "pysched_pod_status_writes_total",
            "Pod status patches of failed scheduling attempts (the PodScheduled condition, nominatedNodeName, the "
            "explain annotations), by result: written, coalesced (merged into a patch still waiting for the same "
            "pod), superseded (dropped because the pod was about to be bound), retried (answered with no HTTP "
            "answer, 429 or 5xx: sent again later), failed (given up), fenced (not sent: not the leader).",
            ["result"], registry=r)
        self.bind_conflicts = Counter(
            "pysched_bind_conflicts_total",
            "Binds answered 409 Conflict or 404 Not Found, by where the pod turned out to be: already_bound "
            "(typically by another scheduler), took_effect (bound to the node this bind named: the write happened "
            "despite the error), not_found (deleted), still_pending (the API server refused "
            "the write for another reason, such as etcd being unavailable: the pod is retried).",
            ["profile", "reason"], registry=r)
        self.http_connections_shed = Counter(
            "pysched_http_connections_shed_total",
            "Connections to a pysched HTTP server (secure port, extender) closed by its connection cap: evicted "
            "(a connection holding no request - idle, slow or silent - closed to make room) or refused (answered "
            "503: it waited for a slot longer than the header timeout, the waiting line was full, or too many TLS "
            "handshakes were under way), by server.", ["server", "reason"], registry=r)
        self.http_requests_rejected = Counter(
            "pysched_http_requests_rejected_total",
            "Malformed requests a pysched HTTP server refused before routing them (too many or too long "
            "headers, a bad request line, ...), by server and reason.", ["server", "reason"], registry=r)
        self.pods_recovered = Counter(
            "pysched_pods_recovered_total",
            "Pending pods of our profiles that the scheduler held nowhere (in no queue, in flight with no cycle, "
            "or assumed with no bind while the API shows them pending), found by the periodic check and put "
            "back in the queue, by reason. Anything but 0 means a bug: the pod would have stayed Pending.",
            ["reason"], registry=r)
        self.kubelet_rejections = Counter(
            "pysched_kubelet_rejections_total",
            "Pods this scheduler bound that the kubelet then rejected at admission (status.reason such as "
            "OutOfcpu, OutOfmemory, OutOfpods, UnexpectedAdmissionError).", ["reason"], registry=r)
        self.events_posted = Counter(
            "pysched_events_posted_total", "Kubernetes Events written: 'create' a new Event object, 'series' "
            "a new count on an existing one.", ["type", "reason", "operation"], registry=r)
        self.events_aggregated = Counter(
            "pysched_events_aggregated_total", "Event occurrences merged into the series of an isomorphic Event "
            "recorded within six minutes instead of a new object.", ["type", "reason"], registry=r)
        self.events_post_errors = Counter(
            "pysched_events_post_errors_total", "Failed attempts to write an Event, by HTTP status or error "
            "class; every retry counts.", ["code"], registry=r)
        self.events_dropped = Counter(
            "pysched_events_dropped_total", "Kubernetes Events (or series counts) never written: backlog_full, "
            "rejected (a final 4xx), retries_exhausted, shutdown.", ["reason"], registry=r)
        self.events_backlog = Gauge(
            "pysched_events_backlog", "Events owed to the API: not created yet, series counts due, retries.",
            registry=r)
        self.asyncio_tasks = Gauge(
            "pysched_asyncio_tasks", "asyncio tasks alive in the scheduler's event loop (sampled every second): "
            "steady under steady load; growth is a leak.", registry=r)
        self.python_heap_blocks = Gauge(
            "pysched_python_heap_blocks", "Memory blocks the Python allocator has handed out and not freed "
            "(sys.getallocatedblocks, sampled every second): flat while the resident set grows means the "
            "growth is the allocators' (fragmentation), not objects kept.", registry=r)
        self.events_tracked = Gauge(
            "pysched_events_tracked", "Events the recorder holds for series aggregation, the backlog included.",
            registry=r)
        self.informer_relists = Counter(
            "pysched_informer_relists_total", "Full LISTs done by the informers, by reason.",
            ["resource", "reason"], registry=r)
        self.informer_events = Counter(
            "pysched_informer_events_total", "Watch events processed by the informers.",
            ["resource", "type"], registry=r)
        self.informer_handler_seconds = Counter(
            "pysched_informer_handler_seconds_total", "Seconds the informers' handlers spent applying watch "
            "events to the cache, the queue and the object store (decoding the events not included).",
            ["resource"], registry=r)
        self.extender_calls = Counter(
            "pysched_extender_requests_total", "Calls this scheduler made to external extenders, by verb and outcome "
            "(HTTP code, 'timeout' or 'error').", ["extender", "verb", "status"], registry=r)
        self.extender_duration = Histogram(
            "pysched_extender_request_duration_seconds", "Latency of calls to external extenders.",
            ["extender", "verb"], buckets=_exp(0.0005, 2, 15), registry=r)
        self.extender_served = Counter(
            "pysched_extender_server_requests_total", "Requests served by `pysched extender`, by verb and HTTP code.",
            ["verb", "code"], registry=r)
        self.extender_served_duration = Histogram(
            "pysched_extender_server_request_duration_seconds", "Time to answer an extender request.",
            ["verb"], buckets=_exp(0.0005, 2, 15), registry=r)
        self.shadow_placements = Counter(
            "pysched_shadow_placements_total", "Shadow mode: another scheduler's placements compared with ours "
            "(same_node, equivalent_node, feasible_node, infeasible_node, unschedulable_here).",
            ["result"], registry=r)
        self.shadow_agreement = Gauge(
            "pysched_shadow_agreement_ratio", "Shadow mode: fraction of compared placements where the other "
            "scheduler chose our node or one we score equally high.", registry=r)
        self.podgroups_waiting = Gauge(
            "pysched_podgroups_waiting", "Pod groups (gangs) with members held at Permit, waiting for their "
            "minMember quorum.", ["profile"], registry=r)
        self.podgroups_admitted = Counter(
            "pysched_podgroups_admitted_total", "Pod groups whose minMember quorum was reached at Permit: every "
            "waiting member was allowed to bind at once.", ["profile"], registry=r)
        self.podgroups_timed_out = Counter(
            "pysched_podgroups_timed_out_total", "Pod groups whose Permit wait timed out before quorum; every "
            "waiting member was rejected and its reservation released.", ["profile"], registry=r)
        self.quota_preemption_victims = Counter(
            "pysched_quota_preemption_victims_total", "Pods CapacityScheduling chose as preemption victims, by "
            "the ElasticQuota they counted against: reason 'reclaim' when a pod of another quota within its min "
            "took guaranteed capacity back, 'priority' when a higher-priority pod of the same quota needed it.",
            ["quota", "reason"], registry=r)
        self.rest_requests = Counter(
            "rest_client_requests_total", "Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "method", "host"], registry=r)
        self.rest_duration = Histogram(
            "rest_client_request_duration_seconds", "Request latency in seconds. Broken down by verb, and host.",
            ["verb", "host"], buckets=REST_CLIENT_BUCKETS, registry=r)
        self.rest_rate_limiter_duration = Histogram(
            "rest_client_rate_limiter_duration_seconds",
            "Client side rate limiter latency in seconds. Broken down by verb, and host.",
            ["verb", "host"], buckets=REST_CLIENT_BUCKETS, registry=r)
        self.metrics_source_up = Gauge(
            "pysched_metrics_source_up", "Load metrics: 1 when the source's last fetch worked, 0 when it failed "
            "or timed out.", ["source"], registry=r)
        self.metrics_sample_age = Gauge(
            "pysched_metrics_sample_age_seconds", "Load metrics: seconds since the source's last successful "
            "fetch.", ["source"], registry=r)
        self.metrics_fetch_duration = Histogram(
            "pysched_metrics_fetch_duration_seconds", "Load metrics: how long one fetch round took, by result "
            "(ok, error, timeout).", ["source", "result"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10), registry=r)
        self.metrics_fallbacks = Counter(
            "pysched_metrics_fallbacks_total", "Load-aware plugin cycles that used their fallback, by reason "
            "(source_down, missing, stale); counted once per cycle and reason.", ["plugin", "reason"], registry=r)
        self._ep_children: dict = {}
        self._plugin_children: dict = {}

    def observe_extension_point(self, ep: str, status: str, profile: str, seconds: float) -> None:
        key = (ep, status, profile)
        child = self._ep_children.get(key)
        if child is None:
            child = self._ep_children[key] = self.extension_point_duration.labels(ep, status, profile)
        child.observe(seconds)

    def incoming(self, queue: str, event: str) -> None:
        """A pod added to ``queue`` by ``event``: queue_incoming_pods_total and 1.37's entity twin."""
        self.queue_incoming.labels(queue, event).inc()
        self.queue_incoming_entities.labels(queue, event, "pod").inc()

    def observe_plugin(self, plugin: str, ep: str, status: str, seconds: float) -> None:
        key = (plugin, ep, status)
        child = self._plugin_children.get(key)
        if child is None:
            child = self._plugin_children[key] = self.plugin_execution_duration.labels(plugin, ep, status)
        child.observe(seconds)


class RestClientMetrics:
    """client-go's ``rest_client_*`` metrics for the requests of one client to one API server host.

    As client-go counts them: ``rest_client_requests_total`` once per request sent, retries and
    watches' initial requests included, with code ``<error>`` when no HTTP response came back;
    ``rest_client_request_duration_seconds`` once per call, from before the rate limiter to the
    last response (retries included; watches not observed); the rate limiter's wait. The label
    children's bound ``inc``/``observe`` are looked up once per (code, method) or verb and kept.
    """

    __slots__ = ("metrics", "host", "_results", "_durations", "_waits")

    def __init__(self, metrics: Metrics, host: str):
        self.metrics = metrics
        self.host = host
        self._results: dict = {}
        self._durations: dict = {}
        self._waits: dict = {}

    def result(self, status: int | None, method: str) -> None:
        """One request sent: ``status`` is the HTTP status, None for a transport error."""
        inc = self._results.get((status, method))
        if inc is None:
            code = "<error>" if status is None else str(status)
            inc = self._results[(status, method)] = self.metrics.rest_requests.labels(code, method, self.host).inc
        inc()

    def duration(self, verb: str, seconds: float) -> None:
        observe = self._durations.get(verb)
        if observe is None:
            observe = self._durations[verb] = self.metrics.rest_duration.labels(verb, self.host).observe
        observe(seconds)

    def rate_limiter_wait(self, verb: str, seconds: float) -> None:
        observe = self._waits.get(verb)
        if observe is None:
            observe = self._waits[verb] = self.metrics.rest_rate_limiter_duration.labels(verb, self.host).observe
        observe(seconds)


METRICS = Metrics()


def _status_name(status) -> str:
    return "Success" if status is None else status.code.upstream


def extension_point(ep: str, status, profile: str, seconds: float) -> None:
    METRICS.observe_extension_point(ep, _status_name(status), profile, seconds)


def extension_point_code(ep: str, code, profile: str, seconds: float) -> None:
    METRICS.observe_extension_point(ep, code.upstream, profile, seconds)


def plugin_duration(plugin: str, ep: str, status, seconds: float) -> None:
    METRICS.observe_plugin(plugin, ep, _status_name(status), seconds)


def permit_wait(status, seconds: float) -> None:
    """``scheduler_permit_wait_duration_seconds{result}``: a pod that waited at Permit, by how the
    wait ended (``Success``, ``Unschedulable``...), as the framework's ``WaitOnPermit``."""
    METRICS.permit_wait_duration.labels(_status_name(status)).observe(seconds)
