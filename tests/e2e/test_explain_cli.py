"""``pysched explain POD`` against the real API server and the scheduler process, as kube users run it.

Each user has a kubeconfig of their own (a ServiceAccount token, or a client certificate from the
control plane's CA) and only the RBAC the test binds: the command reads the pod with it and
presents the same credentials to the scheduler's secure port, whose delegated authorization
(SubjectAccessReview on ``/debug/explain``) decides. The manifests' ``pysched:explainer``
ClusterRole is what grants it. The scheduler's self-signed certificate is verified: with
``--certificate-authority``, by default for a scheduler on this host, and never skipped silently.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from pysched import cli
from pysched.client.rest import ApiError
from pysched.tools import explain_cmd
from pysched_dev.devcluster import write_kubeconfig
from pysched_dev.testkit import create_nodes, make_node, make_pod

from . import kustomize
from .conftest import REPO, scheduler_config, wait_for
from .test_delegated_auth import sa_token, wait_ready

pytestmark = pytest.mark.e2e
RBAC = "/apis/rbac.authorization.k8s.io/v1"
PODS = "/api/v1/namespaces/default/pods"
ASK = {"pysched.io/explain": "true"}


async def create_ignoring_conflict(admin, path: str, body: dict) -> None:
    try:
        await admin.request("POST", path, body=body, rate_limit=False)
    except ApiError as exc:
        if not exc.conflict:
            raise


async def bind(admin, name: str, role: str, subject: dict) -> None:
    await create_ignoring_conflict(admin, f"{RBAC}/clusterrolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [subject]})


async def shipped_explainer_role(admin) -> None:
    role = next(o for o in kustomize.build(REPO / "manifests")
                if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "pysched:explainer")
    await create_ignoring_conflict(admin, f"{RBAC}/clusterroles", role)


def explain(*args: str, kubeconfig, env: dict | None = None) -> subprocess.CompletedProcess:
    """``pysched explain`` as a user runs it (no PYSCHED_SCHEDULER_URL unless ``env`` sets it)."""
    base = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", explain_cmd.SCHEDULER_URL_ENV)}
    return subprocess.run([sys.executable, "-m", "pysched", "explain", *args, "--kubeconfig", str(kubeconfig)],
                          cwd=REPO, capture_output=True, text=True, timeout=120, env={**base, **(env or {})})


async def test_explain_with_the_users_kubeconfig_and_rbac(control_plane, admin, scheduler_factory, capsys,
                                                          monkeypatch):
    cp = control_plane
    await create_nodes(admin, [make_node("node-0", cpu="4"), make_node("node-1", cpu="4"),
                               make_node("tainted", cpu="4", taints=[{"key": "dedicated", "value": "x",
                                                                      "effect": "NoSchedule"}])])
    sched = scheduler_factory(scheduler_config()).start()
    await wait_ready(sched.url, sched.proc, sched.log)
    await sched.wait_log("caches synced")
    for pod in (make_pod("late", cpu="40", annotations=ASK), make_pod("placed", cpu="1", annotations=ASK),
                make_pod("quiet", cpu="40"), make_pod("gated", gates=["example.com/hold"], annotations=ASK),
                make_pod("foreign", cpu="1", scheduler="default-scheduler")):
        await admin.request("POST", PODS, body=pod)

    async def explained(name):
        pod = await admin.get(f"{PODS}/{name}")
        return pod if "pysched.io/explanation" in (pod["metadata"].get("annotations") or {}) else None
    for name in ("late", "placed"):
        await wait_for(lambda name=name: explained(name), 60, what=f"{name} explained")

    # The users: one bound to the shipped ClusterRole, one that may only read pods, one with nothing,
    # one that logs in with a client certificate.
    await shipped_explainer_role(admin)
    dev = cp.kubeconfig_for_token(await sa_token(admin, "dev"), "dev")
    await bind(admin, "dev-explainer", "pysched:explainer", {"kind": "ServiceAccount", "name": "dev",
                                                              "namespace": "default"})
    await create_ignoring_conflict(admin, f"{RBAC}/clusterroles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "pod-reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})
    reader = cp.kubeconfig_for_token(await sa_token(admin, "reader"), "reader")
    await bind(admin, "reader-pods", "pod-reader", {"kind": "ServiceAccount", "name": "reader",
                                                    "namespace": "default"})
    stranger = cp.kubeconfig_for_token(await sa_token(admin, "stranger"), "stranger")
    crt, key = cp.issue_cert("carol", client=True)
    carol = write_kubeconfig(cp.workdir / "carol.kubeconfig", server=cp.url, ca_file=cp.ca_file, user="carol",
                             cert=(crt, key))
    await bind(admin, "carol-explainer", "pysched:explainer", {"kind": "User", "name": "carol",
                                                                "apiGroup": "rbac.authorization.k8s.io"})
    ca = str(sched.cert_dir / "pysched.crt")
    to = ["--scheduler", sched.url, "--certificate-authority", ca]

    # With the role: the trace, naming the rejecting plugin and the nodes.
    out = explain("late", *to, kubeconfig=dev)
    assert out.returncode == 0, out.stderr
    assert "Pod default/late: Pending, not on a node (schedulerName pysched;" in out.stdout
    assert "Explain default/late: Unschedulable: 0/3 nodes are available:" in out.stdout
    assert "2 nodes: NodeResourcesFit: Insufficient cpu  [node-0, node-1]" in out.stdout
    assert "1 node: TaintToleration: node(s) had untolerated taint(s)  [tainted]" in out.stdout
    assert "--nodes all lists each" in out.stdout
    placed = await admin.get(f"{PODS}/placed")
    out = explain("default/placed", *to, kubeconfig=dev)
    assert out.returncode == 0, out.stderr
    assert f"Explain default/placed: {placed['spec']['nodeName']}" in out.stdout
    assert "Score (raw / normalised / weighted):" in out.stdout and "NodeResourcesFit" in out.stdout
    out = explain("pod/placed", "-n", "default", *to, "--nodes", "all", kubeconfig=dev)
    assert out.returncode == 0 and "tainted  TaintToleration: node(s) had untolerated taint(s)" in out.stdout

    # -o json: the trace as served.
    out = explain("late", "-o", "json", *to, kubeconfig=dev)
    status, served = await sched.get("/debug/explain?pod=default/late")
    assert out.returncode == 0 and status == 200 and json.loads(out.stdout) == json.loads(served)

    # A client certificate works the same way (the scheduler trusts the cluster's client CA).
    out = explain("late", *to, kubeconfig=carol)
    assert out.returncode == 0 and "NodeResourcesFit: Insufficient cpu" in out.stdout, out.stderr

    # Without the role: the scheduler refuses, and the message says what grants it.
    out = explain("late", *to, kubeconfig=reader)
    assert out.returncode == 1 and out.stdout == ""
    assert ('forbidden: the scheduler at ' + sched.url + ' refused user "system:serviceaccount:default:reader" '
            'get on the non-resource URL /debug/explain') in out.stderr
    assert "ClusterRole pysched:explainer" in out.stderr
    assert "--clusterrole=pysched:explainer --serviceaccount=default:reader" in out.stderr
    out = explain("late", *to, kubeconfig=stranger)
    assert out.returncode == 1 and 'refused get pods in namespace "default"' in out.stderr, out.stderr
    out = explain("nope", *to, kubeconfig=dev)
    assert out.returncode == 1 and 'pod "nope" not found in namespace "default"' in out.stderr

    # A pod that did not ask: how to get a trace; then --annotate asks and waits (needs patch pods).
    out = explain("quiet", *to, kubeconfig=dev)
    assert out.returncode == explain_cmd.EXIT_NO_TRACE, out.stderr
    assert "kubectl annotate pod quiet -n default pysched.io/explain=true" in out.stdout
    out = explain("quiet", "--annotate", *to, kubeconfig=cp.kubeconfig)
    assert out.returncode == 0, out.stderr
    assert "annotated pysched.io/explain=true" in out.stderr and "Explain default/quiet: Unschedulable" in out.stdout
    # A pod held by its scheduling gate: being re-evaluated, a distinct exit status.
    out = explain("gated", *to, kubeconfig=dev)
    assert out.returncode == explain_cmd.EXIT_REEVALUATING, out.stderr
    assert out.stdout.startswith("pod default/gated: the pod is held by PreEnqueue plugin SchedulingGates")
    # Another scheduler's pod.
    out = explain("foreign", *to, kubeconfig=dev)
    assert out.returncode == 1
    assert "not scheduled by pysched: its spec.schedulerName is 'default-scheduler'" in out.stderr

    # TLS: a certificate it cannot verify stops it before any credential is sent.
    out = explain("late", "--scheduler", sched.url, "--certificate-authority", str(cp.ca_file), kubeconfig=dev)
    assert out.returncode == 1 and "cannot verify the scheduler's serving certificate" in out.stderr
    assert "--insecure-skip-tls-verify" in out.stderr
    out = explain("late", "--scheduler", sched.url, "--insecure-skip-tls-verify", kubeconfig=dev)
    assert out.returncode == 0, out.stderr
    # A scheduler on this host is verified with the certificate it wrote to its cert dir, with no
    # flag (here the test scheduler's --cert-dir stands for the default one); the URL from the env.
    monkeypatch.setattr(explain_cmd, "DEFAULT_CERT_DIR", str(sched.cert_dir))
    monkeypatch.setenv(explain_cmd.SCHEDULER_URL_ENV, sched.url)
    capsys.readouterr()
    code = await asyncio.to_thread(cli.main, ["explain", "late", "--kubeconfig", str(dev)])
    got = capsys.readouterr()
    assert code == 0 and "Explain default/late: Unschedulable" in got.out, got.err


async def test_a_replica_that_does_not_lead_names_the_leader(control_plane, admin, scheduler_factory):
    """Only the leader schedules: a replica waiting for the Lease has no trace and says who leads."""
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "pysched", "namespace": "default"},
             "spec": {"holderIdentity": "pysched-7f9c-abcde_0a1b", "leaseDurationSeconds": 3600}}
    await admin.request("POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", body=lease)
    cfg = scheduler_config(leaderElection={"leaderElect": True, "leaseDuration": "15s", "renewDeadline": "10s",
                                           "retryPeriod": "2s", "resourceName": "pysched",
                                           "resourceNamespace": "default"})
    sched = scheduler_factory(cfg).start()
    await wait_ready(sched.url, sched.proc, sched.log)
    await admin.request("POST", PODS, body=make_pod("waiting", annotations=ASK))

    async def follower():
        _, text = await sched.get("/metrics")
        return 'leader_election_master_status{name="pysched"} 0.0' in text and "pysched-7f9c" in sched.log()
    await wait_for(follower, 60, what="the replica seeing the other leader")
    out = explain("waiting", "--scheduler", sched.url, "--certificate-authority", str(sched.cert_dir / "pysched.crt"),
                  kubeconfig=control_plane.kubeconfig)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "which does not lead: only the leader schedules and keeps traces" in out.stderr
    assert ("the leader is pysched-7f9c-abcde_0a1b (Lease default/pysched): kubectl port-forward -n default "
            "pod/pysched-7f9c-abcde 10259") in out.stderr
