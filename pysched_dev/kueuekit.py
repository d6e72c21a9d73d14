"""Kueue's manager (``sigs.k8s.io/kueue``) on loopback beside a control plane: Kueue admits Jobs
into quota, pysched places their pods.

``hack/kueue.sh`` provides the manager (``PYSCHED_KUEUE``, else built once from the Go module proxy)
with its CRDs and webhook manifest next to it. ``Kueue``:

* installs Kueue's CRDs (with the conversion webhook, as Kueue's kustomization does);
* starts the manager on random free loopback ports (webhooks, health, metrics) with its
  configuration, certificates and log in ``<control plane dir>/kueue``: serving certificates from
  the control plane's CA, no internal certificate management, no leader election, no visibility
  API server. Kueue reads its metrics certificate from the fixed path
  ``/etc/kueue/metrics/certs/tls.{crt,key}``: it runs in a private mount namespace (an unprivileged
  user namespace when the kernel allows one) where that file is laid over ``/etc`` with overlayfs;
* registers the nine webhooks of Kueue's own kinds and of ``batch/v1`` Jobs with
  ``url: https://127.0.0.1:<port>/...`` and the CA bundle, and waits until the API server applies
  them (a queued dry-run Job comes back suspended, one naming an invalid queue is refused);
* stops, leaving no process behind.

Kueue acts as ``kueue-controller-manager`` (a client certificate in ``system:masters``). Used by the
e2e tests (``tests/e2e/kueue_kit.py``) and by ``make dev-cluster`` (``devcluster_examples``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shlex
import shutil
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pysched_dev.devcluster import (
    REPO_ROOT,
    ControlPlane,
    ControlPlaneError,
    free_port,
    hack_output,
    on_fresh_ports,
    terminate_process,
    wait_http,
    write_kubeconfig,
)

KUEUE_SCRIPT = REPO_ROOT / "hack" / "kueue.sh"
GROUP = "kueue.x-k8s.io"
API = f"/apis/{GROUP}/v1beta2"
QUEUE_LABEL = f"{GROUP}/queue-name"
#: Kueue's client certificate: its user name in the audit log.
KUEUE_USER = "kueue-controller-manager"
#: The CRDs Kueue's kustomization gives a conversion webhook (config/components/crd/patches).
CONVERTED = ("localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters")


class KueueError(ControlPlaneError):
    """Kueue could not be started or did not come up."""


def kueue_binary() -> Path:
    """Kueue's manager (``PYSCHED_KUEUE``, else built once by ``hack/kueue.sh``), checked to have its CRDs
    and webhook manifest next to it (``crds/*.yaml``, ``webhook-manifests.yaml``)."""
    binary = hack_output("PYSCHED_KUEUE", KUEUE_SCRIPT)
    if not os.access(binary, os.X_OK):
        raise KueueError(f"{binary} (PYSCHED_KUEUE) is not an executable file")
    for what in ("crds", "webhook-manifests.yaml"):
        if not (binary.parent / what).exists():
            raise KueueError(f"{binary.parent / what} missing: hack/kueue.sh puts Kueue's CRDs and webhook "
                             "manifest next to the binary")
    return binary


# -- synchronous API access (the cluster starts outside the event loop) ------------------------------

def _api(cp: ControlPlane, method: str, path: str, body: Any = None, *,
         content_type: str = "application/json", params: str = "") -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"{cp.url}{path}{'?' + params if params else ''}", data=data, method=method,
                                 headers={"Authorization": f"Bearer {cp.admin_token}",
                                          "Accept": "application/json",
                                          **({"Content-Type": content_type} if data else {})})
    ctx = ssl.create_default_context(cafile=str(cp.ca_file))
    with urllib.request.urlopen(req, timeout=30, context=ctx) as resp:
        return json.loads(resp.read() or b"null")


def _http_error(exc: urllib.error.HTTPError) -> str:
    with contextlib.suppress(Exception):
        return f"{exc.code} {json.loads(exc.read()).get('message')}"
    return str(exc)


def _overlay_mode() -> list[str]:
    """How to get a private mount namespace: an unprivileged user namespace mapped to root, else
    (as root, where user namespaces are off) a plain mount namespace."""
    tried = []
    for argv in (["unshare", "--user", "--map-root-user", "--mount"],
                 ["unshare", "--mount", "--propagation", "private"]):
        proc = subprocess.run([*argv, "true"], capture_output=True, text=True)
        if proc.returncode == 0:
            return argv
        tried.append(f"{' '.join(argv)}: {proc.stderr.strip()}")
    raise KueueError("Kueue reads its metrics certificate from /etc/kueue/metrics/certs, which is provided "
                     "in a private mount namespace, but none could be made here: " + "; ".join(tried))


@dataclass
class Kueue:
    """Kueue's manager against ``cp``: ``install_crds`` (before kube-controller-manager), ``start``
    (also registers the webhooks and waits until they apply), ``stop`` (also when ``Paused``)."""

    cp: ControlPlane
    binary: Path = field(default_factory=kueue_binary)
    frameworks: tuple[str, ...] = ("batch/job",)
    feature_gates: dict[str, bool] = field(default_factory=lambda: {"VisibilityOnDemand": False})
    proc: subprocess.Popen | None = None
    webhook_port: int = 0
    health_port: int = 0
    metrics_port: int = 0
    crds_installed: bool = False

    def __post_init__(self) -> None:
        assert self.cp.workdir is not None, "the control plane is not started"
        self.dir = self.cp.workdir / "kueue"
        self.dir.mkdir(exist_ok=True)
        self.ca_bundle = base64.b64encode(self.cp.ca_file.read_bytes()).decode()
        # The webhook server's certificate, also the metrics server's (Kueue serves both over TLS).
        crt, key = self.cp.issue_cert("kueue-webhook")
        self.cert_dir = self.dir / "webhook-certs"
        metrics_certs = self.dir / "etc-overlay" / "upper" / "kueue" / "metrics" / "certs"
        (self.dir / "etc-overlay" / "work").mkdir(parents=True, exist_ok=True)
        for d in (self.cert_dir, metrics_certs):
            d.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(crt, d / "tls.crt")
            shutil.copyfile(key, d / "tls.key")
        ccrt, ckey = self.cp.issue_cert(KUEUE_USER, client=True, groups=("system:masters",))
        self.kubeconfig = write_kubeconfig(self.dir / "kueue.kubeconfig", server=self.cp.url,
                                           ca_file=self.cp.ca_file, cert=(ccrt, ckey), user=KUEUE_USER)
        self.webhook_port = free_port()

    # -- lifecycle ---------------------------------------------------------------------------

    def install_crds(self, timeout: float = 60.0) -> None:
        """Create Kueue's CRDs and wait until every one is Established."""
        names = []
        for f in sorted((self.binary.parent / "crds").glob("*.yaml")):
            crd = yaml.safe_load(f.read_text())
            if crd["spec"]["names"]["plural"] in CONVERTED:
                crd["spec"]["conversion"] = self._conversion()
            try:
                _api(self.cp, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
            except urllib.error.HTTPError as exc:
                raise KueueError(f"creating CRD {crd['metadata']['name']}: {_http_error(exc)}") from exc
            names.append(crd["metadata"]["name"])
        self.crds_installed = True
        deadline = time.monotonic() + timeout
        pending = list(names)
        while pending:
            got = _api(self.cp, "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{pending[0]}")
            if any(c["type"] == "Established" and c["status"] == "True"
                   for c in (got.get("status") or {}).get("conditions") or ()):
                pending.pop(0)
            elif time.monotonic() > deadline:
                raise KueueError(f"CRDs not Established after {timeout}s: {pending}")
            else:
                time.sleep(0.1)

    def start(self, timeout: float = 120.0) -> Kueue:
        if not self.crds_installed:
            self.install_crds(timeout)
        self._argv_prefix = _overlay_mode()
        on_fresh_ports(self._start, timeout)
        self.register_webhooks()
        self.wait_webhooks(timeout)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGCONT)   # a paused manager would ignore SIGTERM
        terminate_process(self.proc)
        self.proc = None

    # -- accessors ---------------------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        return self.cp.workdir / "kueue.log"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    # -- internals ---------------------------------------------------------------------------

    def _conversion(self) -> dict[str, Any]:
        return {"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"url": f"https://127.0.0.1:{self.webhook_port}/convert", "caBundle": self.ca_bundle}}}

    def _start(self, timeout: float) -> None:
        """One attempt on fresh ports (``on_fresh_ports`` retries when one was taken meanwhile)."""
        if self.health_port:   # a retry: the conversion webhook moves with the webhook server
            self.webhook_port = free_port()
            for plural in CONVERTED:
                _api(self.cp, "PATCH", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.{GROUP}",
                     {"spec": {"conversion": self._conversion()}}, content_type="application/merge-patch+json")
        self.health_port, self.metrics_port = free_port(), free_port()
        config = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": "kueue-system",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": f"127.0.0.1:{self.metrics_port}"},
            "webhook": {"host": "127.0.0.1", "port": self.webhook_port, "certDir": str(self.cert_dir)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "clientConnection": {"qps": 100, "burst": 200},
            "integrations": {"frameworks": list(self.frameworks)},
            "featureGates": dict(self.feature_gates),
        }
        cfg = self.dir / "config.yaml"
        cfg.write_text(yaml.safe_dump(config, sort_keys=False))
        overlay = self.dir / "etc-overlay"
        kueue = [str(self.binary), f"--config={cfg}", f"--kubeconfig={self.kubeconfig}", "--zap-log-level=2"]
        script = (f"mount -t overlay overlay -o lowerdir=/etc,upperdir={shlex.quote(str(overlay / 'upper'))},"
                  f"workdir={shlex.quote(str(overlay / 'work'))} /etc && exec {shlex.join(kueue)}")
        log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.proc = subprocess.Popen([*self._argv_prefix, "sh", "-c", script], stdout=self.cp._log("kueue"),
                                     stderr=subprocess.STDOUT, start_new_session=True)
        wait_http(f"http://127.0.0.1:{self.health_port}/readyz", timeout, self.proc, "kueue", self.log_path,
                  log_start=log_start)

    def register_webhooks(self) -> None:
        """Kueue's webhook manifest with each service reference made a loopback URL; only the webhooks
        of the kinds served here (Kueue's own and batch/v1 Jobs): the others' CRDs are not installed."""
        docs = [d for d in yaml.safe_load_all((self.binary.parent / "webhook-manifests.yaml").read_text()) if d]
        for d in docs:
            d["metadata"]["name"] = "kueue-" + d["metadata"]["name"]
            kept = []
            for w in d["webhooks"]:
                path = w["clientConfig"]["service"]["path"]
                if "-kueue-x-k8s-io-" in path or path.endswith("-batch-v1-job"):
                    w["clientConfig"] = {"url": f"https://127.0.0.1:{self.webhook_port}{path}",
                                         "caBundle": self.ca_bundle}
                    kept.append(w)
            d["webhooks"] = kept
        for d in sorted(docs, key=lambda d: d["kind"] != "ValidatingWebhookConfiguration"):
            plural = d["kind"].lower() + "s"
            try:
                _api(self.cp, "POST", f"/apis/admissionregistration.k8s.io/v1/{plural}", d)
            except urllib.error.HTTPError as exc:
                raise KueueError(f"registering {d['metadata']['name']}: {_http_error(exc)}") from exc
        self.webhooks = [w["name"] for d in docs for w in d["webhooks"]]

    def wait_webhooks(self, timeout: float) -> None:
        """Until the API server calls the webhooks: a queued Job created with ``dryRun`` comes back
        suspended (Kueue's Job defaulting), and one naming an invalid queue is refused."""
        probe = {"apiVersion": "batch/v1", "kind": "Job",
                 "metadata": {"name": "kueue-webhook-probe", "namespace": "default",
                              "labels": {QUEUE_LABEL: "probe"}},
                 "spec": {"template": {"spec": {"restartPolicy": "Never",
                                                "containers": [{"name": "c", "image": "pause"}]}}}}
        bad = json.loads(json.dumps(probe))
        bad["metadata"]["labels"][QUEUE_LABEL] = "Not_A_Queue"
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise KueueError(f"kueue exited while its webhooks were registered:\n{self.log_tail()}")
            try:
                got = _api(self.cp, "POST", "/apis/batch/v1/namespaces/default/jobs", probe, params="dryRun=All")
                if got["spec"].get("suspend") is True:
                    try:
                        _api(self.cp, "POST", "/apis/batch/v1/namespaces/default/jobs", bad, params="dryRun=All")
                        last = "a Job naming an invalid queue was accepted"
                    except urllib.error.HTTPError as exc:
                        if exc.code in (400, 403, 422):
                            return
                        last = _http_error(exc)
                else:
                    last = "a dry-run Job was not suspended"
            except urllib.error.HTTPError as exc:
                last = _http_error(exc)
            time.sleep(0.2)
        raise KueueError(f"Kueue's webhooks not applied after {timeout}s ({last}):\n{self.log_tail()}")
