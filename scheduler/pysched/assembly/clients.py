"""Every API client the scheduler process uses, the write fence in front of them, and leader election.

Each client has a rate limiter and connections of its own, so that one kind of traffic never
queues behind another: ``client`` (binds, status, reads, the node and pod informers),
``event_client`` (Events), ``informer_client`` (the low-volume kinds' and the failed pods' LISTs
and WATCHes), ``le_client`` (the Lease, with leader election) and one per status controller
(``controller_client``). Every write on the scheduler's behalf passes the fence right before it goes
out: the elector's (open while this replica holds a fresh Lease) or, without leader election, one
that is open until shutdown.
"""

from __future__ import annotations

from collections.abc import Callable

from pysched.apis.config import SchedulerConfig
from pysched.assembly.options import Mode, Options
from pysched.client.auth import Credentials
from pysched.client.events import WORKERS as EVENT_WORKERS
from pysched.client.fence import WriteFence
from pysched.client.leaderelection import LeaderElector
from pysched.client.rest import KubeClient


class Clients:
    def __init__(self, cfg: SchedulerConfig, options: Options, creds: Credentials, mode: Mode, *,
                 on_lease_lost: Callable[[], None], on_new_leader: Callable[[str], None]):
        """``on_lease_lost``, ``on_new_leader``: the elector's callbacks (with leader election)."""
        self.creds = creds
        cc = cfg.client_connection
        le = cfg.leader_election
        self.elector: LeaderElector | None = None
        self.le_client: KubeClient | None = None
        # How long a bind that went out may take (its request timeout); None: the client's own.
        self.bind_timeout: float | None = None
        if mode.leads(le.leader_elect if options.leader_elect is None else options.leader_elect):
            # Its own client and rate limiter: lease renewals must never queue behind binds.
            self.le_client = KubeClient(creds, qps=max(cc.qps, 5.0), burst=max(cc.burst, 10), max_connections=4,
                                        timeout=le.renew_deadline / 2)
            self.elector = LeaderElector(self.le_client, namespace=le.resource_namespace, name=le.resource_name,
                                         identity=options.identity, lease_duration=le.lease_duration,
                                         renew_deadline=le.renew_deadline, retry_period=le.retry_period,
                                         on_stopped=on_lease_lost, on_new_leader=on_new_leader)
            self.fence = self.elector.fence
            self.bind_timeout = max(1.0, le.lease_duration - le.renew_deadline)
        else:
            self.fence = WriteFence(lambda: True, description="process")  # open until shutdown
        # Every write on the scheduler's behalf passes the fence right before it goes out.
        self.client = KubeClient(creds, qps=cc.qps, burst=cc.burst, fence=self.fence)
        self.event_client = KubeClient(creds, qps=cc.qps, burst=cc.burst, max_connections=EVENT_WORKERS,
                                       fence=self.fence)
        # The low-volume kinds the plugins read (``client.objectstore``) are LISTed and WATCHed
        # on a client with a rate limiter (and connections) of its own: sixteen LISTs and WATCHes
        # at start-up must not queue the binds behind them.
        self.informer_client = KubeClient(creds, qps=cc.qps, burst=cc.burst, max_connections=4)

    def controller_client(self) -> KubeClient:
        """A status controller's client (it writes while this replica leads): its own rate limiter
        and connections, behind the same fence. The controller closes it when it stops."""
        return KubeClient(self.creds, qps=20, burst=50, max_connections=4, fence=self.fence)

    async def close(self) -> None:
        """Close the process's clients (the status controllers' are closed as those stop)."""
        await self.client.close()
        await self.informer_client.close()
        await self.event_client.close()
        if self.le_client is not None:
            await self.le_client.close()
