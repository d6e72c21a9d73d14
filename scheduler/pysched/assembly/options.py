"""The scheduler process's settings that are not part of KubeSchedulerConfiguration (``Options``,
from the command line), and what they decide for every builder at once (``Mode``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pysched.apis.features import NEWEST
from pysched.framework.features import default_gates
from pysched.podrecovery import DEFAULT_INTERVAL as DEFAULT_RECOVERY_INTERVAL
from pysched.server.delegated_auth import AuthOptions

if TYPE_CHECKING:
    from pysched.runtime.framework import Framework


@dataclass
class Options:
    """Command-line settings that are not part of KubeSchedulerConfiguration."""
    kubeconfig: str | None = None
    plugin_modules: list[str] = field(default_factory=list)
    resync_period: float = 0.0
    seed: int | None = None
    leader_elect: bool | None = None  # None: from the config file
    secure_port: int = 10259
    bind_address: str = "0.0.0.0"
    cert_dir: str | None = None
    tls_cert_file: str | None = None
    tls_private_key_file: str | None = None
    identity: str | None = None
    serve: bool = True
    explain_all: bool = False
    shadow: bool = False
    shadow_scheduler_names: list[str] = field(default_factory=lambda: ["default-scheduler"])
    kopf: bool = True   # False: no PodGroup status controller (its kopf thread), whatever --podgroup-controller says
    podgroup_controller: str = "auto"   # auto | on | off (controllers.podgroup)
    elasticquota_controller: str = "auto"   # auto | off (controllers.elasticquota)
    auth: AuthOptions = field(default_factory=AuthOptions)  # the secure port's delegated authn/authz
    event_backlog_limit: int | None = None  # None: events.DEFAULT_LIMIT
    # A low-volume kind the API server refuses to list - an optional CRD (PodGroups) not installed,
    # a kind RBAC does not allow - is LISTed again this often, and watched once it can be.
    optional_crd_poll_seconds: float = 10.0
    # The safety net's period (``podrecovery``): a pending pod held nowhere is put back within two.
    pod_recovery_interval: float = DEFAULT_RECOVERY_INTERVAL
    # The kube-scheduler release pysched behaves as and the feature gates on (kube's and pysched's own;
    # ``cmd.release`` settles both from the API server's version and the flags). Default: the newest.
    kube_version: tuple[int, int] = NEWEST
    feature_gates: frozenset[str] = field(default_factory=default_gates)
    # Read the API server's version at start and follow its release (``SchedulerApp.settle_release``);
    # kube_version/feature_gates above are then provisional. The flags it resolves the gates from:
    discover_release: bool = False
    emulated_version: str | None = None
    feature_gate_flags: str = ""


@dataclass(frozen=True)
class Mode:
    """What the process does with the pods it watches: every difference shadow mode makes.

    Normally it schedules its profiles' pods: it binds, writes status and Events, may hold the
    Lease, and runs the status controllers and the pod-recovery safety net. In shadow mode
    (``--shadow``, ``pysched.shadow``) it watches the pods of other schedulers (``shadowed``) instead,
    predicts each one's node through its first profile, and writes nothing: only predictions,
    metrics, logs and /debug/explain."""
    shadow: bool = False
    shadowed: tuple[str, ...] = ()

    @classmethod
    def of(cls, options: Options) -> Mode:
        return cls(options.shadow, tuple(options.shadow_scheduler_names))

    @property
    def writes(self) -> bool:
        """Binds, status patches, Events, the status controllers and pod recovery: not in shadow mode."""
        return not self.shadow

    def leads(self, leader_elect: bool) -> bool:
        """Whether the process elects a leader, when the configuration says ``leader_elect``: a shadow
        never binds, so it must not hold (or wait for) the Lease."""
        return leader_elect and not self.shadow

    def routing(self, frameworks: dict[str, Framework]) -> dict[str, Framework]:
        """Which framework handles a pod, by schedulerName: our profiles, or in shadow mode the first
        profile standing in for each shadowed scheduler."""
        if not self.shadow:
            return frameworks
        first = next(iter(frameworks.values()))
        first.percentage_of_nodes_to_score = 100  # compare against every node, not a sample
        return {name: first for name in self.shadowed}
