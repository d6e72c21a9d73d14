"""The status controllers, which write only while this replica leads: PodGroup status (beside
Coscheduling, ``controllers.podgroup``) and ElasticQuota ``status.used`` (``controllers.elasticquota``)
from a plugin that declares ``QuotaStatusSource`` (CapacityScheduling).

Each runs on a client of its own behind the process's fence (``Clients.controller_client``);
neither runs in shadow mode, nor without kopf (``Options.kopf``: tests and the extender). The app
starts them once this replica leads, cancels them when the Lease is lost or at shutdown, and stops
them (closing their clients) before the process's own clients close.
"""

from __future__ import annotations

from pysched.assembly.clients import Clients
from pysched.assembly.options import Mode, Options
from pysched.client.rest import KubeClient
from pysched.controllers.elasticquota import ElasticQuotaController
from pysched.controllers.podgroup import PodGroupController
from pysched.framework import QuotaStatusSource
from pysched.runtime.framework import Framework


def quota_status_source(frameworks: dict[str, Framework]) -> QuotaStatusSource | None:
    """The plugin whose usage the ElasticQuota status controller publishes: the first that declares
    ``QuotaStatusSource``, profile by profile."""
    return next((pl for fw in frameworks.values() for pl in fw.plugins.values()
                 if isinstance(pl, QuotaStatusSource)), None)


class Controllers:
    def __init__(self, options: Options, mode: Mode, clients: Clients, frameworks: dict[str, Framework],
                 object_kinds: list[str]):
        # PodGroup status. ``auto``: only when a profile schedules PodGroups (Coscheduling reads
        # them); ``on``: always.
        self.podgroups: PodGroupController | None = None
        self.podgroup_client: KubeClient | None = None
        wanted = options.podgroup_controller == "on" or (options.podgroup_controller == "auto"
                                                         and "podgroups" in object_kinds)
        if wanted and options.kopf and mode.writes:
            self.podgroup_client = clients.controller_client()
            self.podgroups = PodGroupController(self.podgroup_client, clients.creds, mode=options.podgroup_controller)
        # ElasticQuota status, from the usage the quota plugin keeps (and tells of each change).
        self.elasticquotas: ElasticQuotaController | None = None
        self.elasticquota_client: KubeClient | None = None
        source = quota_status_source(frameworks)
        if source is not None and options.elasticquota_controller == "auto" and options.kopf and mode.writes:
            self.elasticquota_client = clients.controller_client()
            self.elasticquotas = ElasticQuotaController(self.elasticquota_client, clients.creds, source.bound_used)
            source.watch_usage(self.elasticquotas.usage_changed)

    def start(self) -> None:
        """This replica leads (or is the only one): start writing status."""
        if self.podgroups is not None:
            self.podgroups.start()
        if self.elasticquotas is not None:
            self.elasticquotas.start()

    def cancel(self) -> None:
        """Stop writing at once (the Lease is lost, or shutdown began)."""
        if self.podgroups is not None:
            self.podgroups.cancel()
        if self.elasticquotas is not None:
            self.elasticquotas.cancel()

    async def stop(self) -> None:
        """Wait for each controller to end, then close its client."""
        if self.podgroups is not None and self.podgroup_client is not None:
            await self.podgroups.stop()
            await self.podgroup_client.close()
        if self.elasticquotas is not None and self.elasticquota_client is not None:
            await self.elasticquotas.stop()
            await self.elasticquota_client.close()
