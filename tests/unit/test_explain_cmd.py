"""``pysched explain``'s arguments and defaults, and the one-line summary's bound for kubectl describe."""

from __future__ import annotations

import json

import pytest

from pysched import cli
from pysched import explanation as explain
from pysched.tools import explain_cmd
from pysched.tools.explain_cmd import EXIT_BAD_INPUT, ExplainError, PodRef, parse_pod_ref


@pytest.mark.parametrize("ref, namespace, want", [
    ("web-0", None, PodRef("team", "web-0")),                 # the context's namespace
    ("web-0", "shop", PodRef("shop", "web-0")),               # -n
    ("shop/web-0", None, PodRef("shop", "web-0")),            # NS/NAME
    ("shop/web-0", "shop", PodRef("shop", "web-0")),          # both, agreeing
    ("pod/web-0", None, PodRef("team", "web-0")),             # kubectl's TYPE/NAME
    ("pods/web-0", "shop", PodRef("shop", "web-0")),
    ("po/web-0", None, PodRef("team", "web-0")),
    ("pod/shop/web-0", None, PodRef("shop", "web-0")),
])
def test_pod_forms(ref, namespace, want):
    assert parse_pod_ref(ref, namespace, "team") == want


@pytest.mark.parametrize("ref, namespace, words", [
    ("shop/web-0", "other", ["'shop'", "-n/--namespace", "'other'"]),
    ("a/b/c", None, ["expected NAME, NAMESPACE/NAME or pod/NAME"]),
    ("Web_0", None, ["name 'Web_0'"]),
    ("Shop/web-0", None, ["namespace 'Shop'"]),
    ("shop/", None, ["name ''", "must be non-empty"]),
])
def test_bad_pod_forms_name_the_problem(ref, namespace, words):
    with pytest.raises(ExplainError) as err:
        parse_pod_ref(ref, namespace, "default")
    assert err.value.code == EXIT_BAD_INPUT
    assert all(w in str(err.value) for w in words), str(err.value)


def test_the_subcommand_parses_kubectl_style_flags():
    args = cli.parse_args(["explain", "shop/web-0", "-o", "json", "--context", "dev", "--nodes", "all",
                           "--scheduler", "https://10.0.0.1:10259", "--insecure-skip-tls-verify"])
    assert (args.command, args.pod, args.output, args.context, args.nodes, args.scheduler,
            args.insecure_skip_tls_verify) == ("explain", "shop/web-0", "json", "dev", "all",
                                                "https://10.0.0.1:10259", True)
    args = cli.parse_args(["explain", "-n", "shop", "web-0"])
    assert (args.namespace, args.output, args.nodes, args.certificate_authority) == ("shop", "text", "summary", None)


KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- {name: c, cluster: {server: "https://127.0.0.1:6443"}}
users:
- {name: u, user: {token: t}}
contexts:
- {name: plain, context: {cluster: c, user: u}}
- {name: team, context: {cluster: c, user: u, namespace: team-a}}
current-context: team
"""


def test_namespace_defaults_to_the_contexts(tmp_path):
    path = tmp_path / "config"
    path.write_text(KUBECONFIG)
    assert explain_cmd.context_namespace(path, None) == "team-a"          # current-context
    assert explain_cmd.context_namespace(path, "plain") is None            # then "default"
    assert explain_cmd.context_namespace(path, "team") == "team-a"


def test_kubeconfig_order_is_kubectls(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'a'}:{tmp_path / 'b'}")
    assert explain_cmd.kubeconfig_path(None) == tmp_path / "a"
    assert explain_cmd.kubeconfig_path(str(tmp_path / "flag")) == tmp_path / "flag"
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert explain_cmd.kubeconfig_path(None) is None                      # no ~/.kube/config: in-cluster
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text(KUBECONFIG)
    assert explain_cmd.kubeconfig_path(None) == tmp_path / ".kube" / "config"


def test_a_scheduler_on_this_host_is_verified_with_its_self_signed_certificate(tmp_path, monkeypatch):
    monkeypatch.setattr(explain_cmd, "DEFAULT_CERT_DIR", str(tmp_path))
    local = "https://127.0.0.1:10259"
    assert explain_cmd.scheduler_ca(local, None, False) is None            # no certificate written there
    (tmp_path / "pysched.crt").write_text("x")
    mine = str(tmp_path / "pysched.crt")
    for url in (local, "https://localhost:10259", "https://[::1]:10259"):
        assert explain_cmd.scheduler_ca(url, None, False) == mine
    assert explain_cmd.scheduler_ca("https://10.1.2.3:10259", None, False) is None    # another host: system CAs
    assert explain_cmd.scheduler_ca(local, "/etc/ca.pem", False) == "/etc/ca.pem"     # the flag wins
    assert explain_cmd.scheduler_ca(local, None, True) is None                        # not verified at all


def test_the_forbidden_message_names_the_role_and_the_binding():
    sa = explain_cmd._grant_hint("system:serviceaccount:dev:ci")
    assert sa == ("kubectl create clusterrolebinding pysched-explainer-system-serviceaccount-dev-ci "
                  "--clusterrole=pysched:explainer --serviceaccount=dev:ci")
    user = explain_cmd._grant_hint("alice@example.com")
    assert user.endswith("--clusterrole=pysched:explainer --user=alice@example.com")
    answer = explain_cmd.Answer(403, {}, '{"kind":"Status","message":"forbidden: User \\"alice\\" cannot get path '
                                         '\\"/debug/explain\\"","code":403}')
    text = str(explain_cmd._scheduler_failure(answer, "https://127.0.0.1:10259"))
    assert 'user "alice"' in text and "get on the non-resource URL /debug/explain" in text
    assert "ClusterRole pysched:explainer" in text and "--user=alice" in text


def summary_of(error: str = "", rejections: dict | None = None, feasible: int = 0, evaluated: int = 3) -> dict:
    s = {"selectedNode": None if error else "node-1", "feasibleNodes": feasible, "evaluatedNodes": evaluated,
         "filterRejections": rejections or {}, "topNodes": [] if error else [
             {"node": "node-1", "total": 300, "plugins": {}}, {"node": "node-2", "total": 200, "plugins": {}}]}
    if error:
        s["error"] = error
    return s


@pytest.mark.parametrize("s", [
    summary_of("0/3 nodes are available: 3 Insufficient cpu.", {"NodeResourcesFit": {"Insufficient cpu": 3}}),
    summary_of("0/900 nodes are available: " + "x" * 2000, {f"Plugin{i}": {"reason " * 40: 100} for i in range(9)},
               evaluated=900),
    summary_of("binding rejected: " + "é" * 400, {"TaintToleration": {"ü" * 300: 1}}, feasible=2),  # multi-byte
    summary_of(rejections={f"Plugin{i}": {"why": i + 1} for i in range(20)}, feasible=1, evaluated=300),
    {"selectedNode": "node-1", "permit": {"status": "Wait", "message": "waiting " * 100}},
])
def test_the_summary_line_fits_kubectl_describe_and_points_to_the_command(s):
    for key in ("default/late", "a-rather-long-namespace-name/web-7d9f8c6b5-x2x9z"):
        line = explain.human_line(s, key)
        assert len(line.encode()) <= explain.DESCRIBE_LIMIT, (len(line.encode()), line)
        assert line.endswith(f"; details: pysched explain {key}"), line
        assert "\n" not in line


def test_a_cut_summary_says_so_and_a_short_one_is_whole():
    cut = explain.human_line(summary_of("0/900 nodes are available", {"NodeResourcesFit": {"Insufficient cpu " * 20:
                                                                                          900}}, evaluated=900), "d/p")
    assert "...; details: pysched explain d/p" in cut
    whole = explain.human_line(summary_of("x", {"NodeResourcesFit": {"Insufficient cpu": 3}}), "d/p")
    assert whole == "not scheduled: 0/3 nodes fit; filtered out: 3 by NodeResourcesFit (Insufficient cpu); " \
                    "details: pysched explain d/p"


def test_the_limit_is_kubectl_describes():
    """kubectl describe (k8s.io/kubectl pkg/describe, ``maxAnnotationLen``) prints a value longer
    than maxAnnotationLen - len(key) - 2 on its own line, cut at maxAnnotationLen - 2 bytes: the
    summary must fit on that line. Read from kubectl's source when the Go module cache has it."""
    import os
    import re
    from pathlib import Path
    cache = Path(os.environ.get("GOMODCACHE") or Path.home() / "go" / "pkg" / "mod")
    sources = sorted(cache.glob("k8s.io/kubectl@v0.3*/pkg/describe/describe.go"))
    if not sources:
        pytest.skip("no k8s.io/kubectl in the Go module cache")
    for src in sources:
        text = src.read_text()
        got = re.search(r"var maxAnnotationLen = (\d+)", text)
        assert got and "shorten(s, maxAnnotationLen-2)" in text, src
        assert explain.DESCRIBE_LIMIT == int(got.group(1)) - 2, src


def test_a_name_longer_than_the_limit_keeps_the_whole_command():
    key = "ns/" + "p" * 200
    assert explain.human_line(summary_of("x"), key) == f"details: pysched explain {key}"


POD = {"metadata": {"name": "web", "namespace": "shop", "annotations": {}},
       "spec": {"schedulerName": "pysched"}, "status": {"phase": "Pending", "conditions": [
           {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}


def test_a_failed_cycle_reads_as_a_failure_with_permit_and_preemption():
    trace = {"preFilter": [{"plugin": "NodeResourcesFit", "status": "passed"}],
             "filter": [{"plugin": "TaintToleration",
                         "nodes": {"n1": "passed", "n2": "node(s) had untolerated taint(s)"}}],
             "score": {}, "totalScores": {}, "extenders": [], "feasibleNodes": ["n1"], "selectedNode": "n1",
             "error": "rejected by Coscheduling at Permit",
             "permit": {"status": "Unschedulable", "plugins": ["Coscheduling"], "message": "gang timed out"},
             "preemption": {"node": "n1", "victims": ["shop/low"]}}
    answer = explain_cmd.Answer(200, {"pysched-identity": "r1"}, "")
    text = explain_cmd.format_trace(PodRef("shop", "web"), POD, trace, answer, "https://127.0.0.1:10259", "summary")
    lines = text.splitlines()
    assert lines[0] == ("Pod shop/web: Pending, not on a node (schedulerName pysched; trace from "
                        "https://127.0.0.1:10259, replica r1)")
    assert lines[1] == "Explain shop/web: Unschedulable: rejected by Coscheduling at Permit"
    assert "  Permit (Coscheduling): Unschedulable: gang timed out" in lines
    assert "  Preemption: nominated node n1 (victims: shop/low)" in lines


def test_no_trace_prints_the_summary_the_pod_carries():
    summary = {"selectedNode": "n1", "feasibleNodes": 2, "evaluatedNodes": 3, "filterRejections": {},
               "topNodes": [{"node": "n1", "total": 300, "plugins": {"NodeResourcesFit": 90, "TaintToleration": 210}}]}
    pod = {**POD, "metadata": {**POD["metadata"], "annotations": {
        "pysched.io/explain": "true", "pysched.io/explanation": json.dumps(summary)}},
        "spec": {**POD["spec"], "nodeName": "n1"}}
    text = explain_cmd.no_trace_text(PodRef("shop", "web"), pod, explain_cmd.Answer(404, {}, ""))
    assert text.startswith("no trace of pod shop/web: it is bound to n1")
    assert "  bound to n1: best of 2 feasible of 3 evaluated nodes (total 300)" in text
    assert "  n1: total 300 (NodeResourcesFit 90, TaintToleration 210)" in text
