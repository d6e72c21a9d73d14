"""The real cluster's control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler.

The binaries are hack/control-plane.sh's (1.37.2 by default; ``PYSCHED_BIN_DIR`` overrides), the
flags devcluster's with what a cluster with a real node needs: Node,RBAC authorization and the
NodeRestriction admission plugin, a client certificate for the kubelets, every controller
(``--controllers=*``) with per-controller service-account credentials, the root CA published to
pods, CSR signing by the cluster CA. kube-apiserver listens on the ``kubernetes`` Service's
ClusterIP, port 443 (network.py), and advertises it, so the Service's endpoint is itself. etcd,
the controller manager and the scheduler listen on loopback ports picked free.
"""

from __future__ import annotations

import ssl
import urllib.request
from collections.abc import Callable
from pathlib import Path

import yaml

from pysched_dev.devcluster import free_port


def http_ok(url: str, context: ssl.SSLContext | None = None) -> Callable[[], bool]:
    def check() -> bool:
        with urllib.request.urlopen(url, timeout=2, context=context) as resp:
            return resp.status == 200
    return check


def insecure() -> ssl.SSLContext:
    """For /healthz of a component's self-signed serving certificate on loopback."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def etcd_argv(bin_dir: Path, data_dir: Path) -> tuple[list[str], str]:
    client, peer = free_port(), free_port()
    url = f"http://127.0.0.1:{client}"
    return [
        str(bin_dir / "etcd"), "--name=default", f"--data-dir={data_dir}",
        f"--listen-client-urls={url}", f"--advertise-client-urls={url}",
        f"--listen-peer-urls=http://127.0.0.1:{peer}", f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
        f"--initial-cluster=default=http://127.0.0.1:{peer}",
        "--log-level=warn", "--unsafe-no-fsync", "--listen-metrics-urls=",
    ], url


def apiserver_argv(bin_dir: Path, *, etcd: str, address: str, service_cidr: str, pki: dict[str, Path],
                   tokens: Path, cert_dir: Path, extra: list[str]) -> list[str]:
    return [
        str(bin_dir / "kube-apiserver"),
        f"--etcd-servers={etcd}",
        f"--bind-address={address}", "--secure-port=443", f"--advertise-address={address}",
        f"--tls-cert-file={pki['apiserver.crt']}", f"--tls-private-key-file={pki['apiserver.key']}",
        f"--client-ca-file={pki['ca.crt']}",
        f"--token-auth-file={tokens}",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        f"--kubelet-client-certificate={pki['apiserver-kubelet-client.crt']}",
        f"--kubelet-client-key={pki['apiserver-kubelet-client.key']}",
        "--kubelet-preferred-address-types=InternalIP,Hostname",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki['sa.pub']}",
        f"--service-account-signing-key-file={pki['sa.key']}",
        f"--service-cluster-ip-range={service_cidr}",
        "--allow-privileged=true",
        "--profiling=false",
        f"--cert-dir={cert_dir}",
        *extra,
    ]


def controller_manager_argv(bin_dir: Path, *, kubeconfig: Path, pki: dict[str, Path], cert_dir: Path,
                            extra: list[str]) -> tuple[list[str], int]:
    port = free_port()
    return [
        str(bin_dir / "kube-controller-manager"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1", f"--secure-port={port}", f"--cert-dir={cert_dir}",
        "--controllers=*",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki['sa.key']}",
        f"--root-ca-file={pki['ca.crt']}",
        f"--cluster-signing-cert-file={pki['ca.crt']}",
        f"--cluster-signing-key-file={pki['ca.key']}",
        "--leader-elect=false",
        "--profiling=false", "--v=1",
        *extra,
    ], port


def scheduler_argv(bin_dir: Path, *, kubeconfig: Path, config_file: Path, extra: list[str]) -> tuple[list[str], int]:
    config_file.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "leaderElection": {"leaderElect": False},
    }))
    port = free_port()
    return [
        str(bin_dir / "kube-scheduler"), f"--config={config_file}",
        f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1", f"--secure-port={port}",
        f"--cert-dir={config_file.parent / 'kube-scheduler-certs'}", "--profiling=false", "--v=1",
        *extra,
    ], port
