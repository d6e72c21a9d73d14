"""``pysched explain POD``: the live scheduler's latest verdict for a pod, per plugin and per node.

A kubectl-style command. It reads the pod through the API server with the user's kubeconfig
(``--kubeconfig``, ``$KUBECONFIG``, ``~/.kube/config``, else the in-cluster ServiceAccount, as
kubectl; ``--context``; the namespace from ``-n``, ``ns/name``, else the context's, else
``default``), then asks the scheduler's secure port for ``/debug/explain?pod=NS/NAME`` with the
*same* credentials (the bearer token or the client certificate), so the scheduler's delegated
authorization decides with the user's own RBAC: ``get`` on the non-resource URL
``/debug/explain`` (ClusterRole ``pysched:explainer``). Nothing is sent over a TLS connection it
could not verify unless ``--insecure-skip-tls-verify`` says so; for a scheduler on this host
(``127.0.0.1``, ``localhost``, ``::1``) without ``--certificate-authority``, the self-signed
certificate a scheduler writes to its default ``--cert-dir`` is trusted when it exists.

The scheduler's ``/debug/explain`` answers name the replica (``server.secure``: its profiles,
identity and the Lease's holder), so a replica that does not lead, or a pod another scheduler
owns, is told apart from a pod with no trace. The text reuses ``simulate --explain``'s formatter
(``simulate.format_explain``); ``-o json`` prints the trace as served.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import ssl
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit

from pysched import explanation, server
from pysched.apis.core.errors import ApiError
from pysched.apis.core.names import dns1123_label_problem, dns1123_subdomain_problem
from pysched.client.auth import Credentials, CredentialsError, in_cluster_available, load_in_cluster, load_kubeconfig
from pysched.util.netaddr import is_loopback_host

EXIT_OK = 0             # the trace was printed
EXIT_FAILED = 1         # the pod or the scheduler could not be read (not found, forbidden, unreachable...)
EXIT_BAD_INPUT = 2      # bad flags or kubeconfig
EXIT_REEVALUATING = 3   # the pod asked for an explanation and its cycle has not ended yet (or is gated)
EXIT_NO_TRACE = 4       # the scheduler keeps no trace of the pod (it did not ask): the output says how

EXIT_HELP = """exit status:
  0  the trace was printed
  1  the pod or the scheduler could not be read: not found, forbidden (the message names the
     permission), unreachable, an unverified certificate, a replica that does not lead, a pod
     another scheduler owns
  2  bad flags or kubeconfig
  3  the pod asked for a trace and its cycle has not ended yet (being re-evaluated, or held by a
     PreEnqueue plugin such as SchedulingGates): the output says which; ask again
  4  the scheduler has no trace of the pod: the output says how to get one (and prints the
     summary annotation the pod carries, if any)"""

DEFAULT_SCHEDULER_URL = "https://127.0.0.1:10259"
SCHEDULER_URL_ENV = "PYSCHED_SCHEDULER_URL"
EXPLAINER_ROLE = "pysched:explainer"
EXPLAIN_PATH = "/debug/explain"
SA_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
POD_TYPES = ("pod", "pods", "po")
# Where a scheduler on this host writes its self-signed certificate without --cert-dir
# (``server.secure``); a module attribute so a test can point it at its scheduler's.
DEFAULT_CERT_DIR = server.DEFAULT_CERT_DIR
SELF_SIGNED_CERT = f"{server.SELF_SIGNED_NAME}.crt"
PORT_FORWARD_HINT = "kubectl port-forward -n pysched-system deploy/pysched 10259"


class ExplainError(Exception):
    """What the user is told, on stderr, with the exit status ``code``."""

    def __init__(self, message: str, code: int = EXIT_FAILED):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def parse_pod_ref(ref: str, namespace: str | None, default_namespace: str) -> PodRef:
    """``name``, ``NS/name``, ``pod/name`` (also ``pods/``, ``po/``, as kubectl's TYPE/NAME) or
    ``pod/NS/name``. ``namespace``: ``-n``; a namespace in ``ref`` must agree with it."""
    parts = ref.split("/")
    if len(parts) > 1 and parts[0].lower() in POD_TYPES and (len(parts) == 2 or len(parts) == 3):
        parts = parts[1:]
    if len(parts) == 1:
        ns, name = namespace or default_namespace, parts[0]
    elif len(parts) == 2:
        ns, name = parts
        if namespace and namespace != ns:
            raise ExplainError(f"POD {ref!r} names namespace {ns!r} but -n/--namespace says {namespace!r}",
                               EXIT_BAD_INPUT)
    else:
        raise ExplainError(f"POD {ref!r}: expected NAME, NAMESPACE/NAME or pod/NAME", EXIT_BAD_INPUT)
    problem = dns1123_label_problem(ns)
    if problem:
        raise ExplainError(f"POD {ref!r}: namespace {ns!r} {problem}", EXIT_BAD_INPUT)
    problem = dns1123_subdomain_problem(name)
    if problem:
        raise ExplainError(f"POD {ref!r}: name {name!r} {problem}", EXIT_BAD_INPUT)
    return PodRef(ns, name)


# -- the user's credentials -------------------------------------------------------------------

def kubeconfig_path(flag: str | None) -> Path | None:
    """kubectl's order: ``--kubeconfig``, ``$KUBECONFIG`` (its first file), ``~/.kube/config``;
    None: the in-cluster ServiceAccount (or nothing at all)."""
    if flag:
        return Path(flag).expanduser()
    env = os.environ.get("KUBECONFIG")
    if env:
        return Path(env.split(os.pathsep)[0]).expanduser()
    home = Path.home() / ".kube" / "config"
    return home if home.exists() else None


def context_namespace(path: Path | None, context: str | None) -> str | None:
    """The namespace of the kubeconfig's context (``--context`` or current-context); in a pod
    without a kubeconfig, the ServiceAccount's."""
    if path is None:
        try:
            return SA_NAMESPACE_FILE.read_text().strip() or None
        except OSError:
            return None
    from pysched.util.yamlfile import read_yaml
    try:
        doc = read_yaml(path)
    except Exception:  # noqa: BLE001 - load_credentials reports what is wrong with the file
        return None
    if not isinstance(doc, dict):
        return None
    name = context or doc.get("current-context")
    for entry in doc.get("contexts") or ():
        if isinstance(entry, dict) and entry.get("name") == name:
            ns = (entry.get("context") or {}).get("namespace")
            return str(ns) if ns else None
    return None


def load_credentials(path: Path | None, context: str | None) -> Credentials:
    try:
        if path is not None:
            return load_kubeconfig(path, context)
        if in_cluster_available():
            return load_in_cluster()
    except CredentialsError as exc:
        raise ExplainError(str(exc), EXIT_BAD_INPUT) from None
    raise ExplainError("no kubeconfig: pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config", EXIT_BAD_INPUT)


# -- the scheduler's TLS ----------------------------------------------------------------------

def is_loopback(url: str) -> bool:
    return is_loopback_host(urlsplit(url).hostname or "")


def scheduler_ca(url: str, ca_flag: str | None, insecure: bool) -> str | None:
    """The CA bundle the scheduler's certificate is verified with: ``--certificate-authority``;
    for a scheduler on this host, the self-signed certificate in the default cert dir when it
    exists; else None (the system's trust store)."""
    if ca_flag or insecure:
        return ca_flag
    default = Path(DEFAULT_CERT_DIR) / SELF_SIGNED_CERT
    return str(default) if is_loopback(url) and default.is_file() else None


def scheduler_ssl(url: str, ca: str | None, insecure: bool, creds: Credentials) -> ssl.SSLContext:
    """Verifies the scheduler (unless ``insecure``) and presents the kubeconfig's client certificate."""
    try:
        ctx = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
    except (OSError, ssl.SSLError) as exc:
        raise ExplainError(f"--certificate-authority {ca}: cannot load it: {exc}", EXIT_BAD_INPUT) from None
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if creds.cert_file and creds.key_file:
        ctx.load_cert_chain(creds.cert_file, creds.key_file)
    return ctx


# -- talking to the API server and the scheduler ------------------------------------------------

def _asked(pod: dict) -> bool:
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(explanation.REQUEST_ANNOTATION) == "true"


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: str

    @property
    def profiles(self) -> list[str] | None:
        got = self.headers.get("pysched-profiles")
        return [p for p in got.split(",") if p] if got is not None else None

    @property
    def leading(self) -> bool | None:
        got = self.headers.get("pysched-leading")
        return None if got is None else got == "true"


@dataclass
class Explained:
    """What ``run`` found: the pod, the scheduler's answer, and the scheduler's URL."""
    pod: dict
    answer: Answer
    url: str
    notes: list[str] = field(default_factory=list)


def _api_failure(exc: ApiError, verb: str, resource: str, ref: PodRef) -> ExplainError:
    if exc.status == 404:
        return ExplainError(f'pod "{ref.name}" not found in namespace "{ref.namespace}"')
    if exc.status == 403:
        return ExplainError(f"forbidden: the API server refused {verb} {resource} in namespace "
                            f"\"{ref.namespace}\" ({exc.message}); ClusterRole {EXPLAINER_ROLE} grants get pods")
    if exc.status == 401:
        return ExplainError(f"the API server did not accept the kubeconfig's credentials ({exc.message})")
    return ExplainError(f"{verb} {resource} {ref.key}: {exc}")


async def _read_pod(client, ref: PodRef) -> dict:
    try:
        return await client.get(f"/api/v1/namespaces/{ref.namespace}/pods/{ref.name}")
    except ApiError as exc:
        raise _api_failure(exc, "get", "pods", ref) from None
    except OSError as exc:
        raise ExplainError(f"cannot reach the API server at {client.base}: {exc}") from None


async def _annotate(client, ref: PodRef) -> None:
    try:
        await client.request("PATCH", f"/api/v1/namespaces/{ref.namespace}/pods/{ref.name}",
                             body={"metadata": {"annotations": {explanation.REQUEST_ANNOTATION: "true"}}},
                             content_type="application/merge-patch+json")
    except ApiError as exc:
        raise _api_failure(exc, "patch", "pods", ref) from None


async def _ask(pool, url: str, ref: PodRef, creds: Credentials, timeout: float) -> Answer:
    from pysched.client.httppool import HTTPError
    headers = {"Accept": "application/json"}
    token = creds.bearer()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    target = f"{EXPLAIN_PATH}?pod={quote(ref.key, safe='/')}"
    try:
        resp = await pool.request("GET", target, headers, timeout=timeout)
    except ssl.SSLCertVerificationError as exc:
        raise ExplainError(
            f"cannot verify the scheduler's serving certificate at {url}: {exc.verify_message}. Pass "
            f"--certificate-authority FILE (the scheduler's --tls-cert-file, or {SELF_SIGNED_CERT} in its "
            f"--cert-dir, {DEFAULT_CERT_DIR} by default) or, to skip verification, --insecure-skip-tls-verify"
        ) from None
    except (OSError, HTTPError, TimeoutError) as exc:
        raise ExplainError(f"cannot reach the scheduler at {url} ({exc or type(exc).__name__}): is pysched "
                           f"serving there? Pass --scheduler URL or set {SCHEDULER_URL_ENV}; for a scheduler "
                           f"in a cluster: {PORT_FORWARD_HINT}") from None
    return Answer(resp.status, resp.headers, resp.body.decode(errors="replace"))


def _user_in(message: str) -> str | None:
    got = re.search(r'User "([^"]*)"', message)
    return got.group(1) if got else None


def _grant_hint(user: str | None) -> str:
    if user and user.startswith("system:serviceaccount:"):
        ns, _, name = user[len("system:serviceaccount:"):].partition(":")
        subject = f"--serviceaccount={ns}:{name}"
    else:
        subject = f"--user={user or 'USER'}"
    binding = "pysched-explainer-" + re.sub(r"[^a-z0-9-]", "-", (user or "user").lower())
    return f"kubectl create clusterrolebinding {binding} --clusterrole={EXPLAINER_ROLE} {subject}"


def _scheduler_failure(answer: Answer, url: str) -> ExplainError:
    if answer.status == 403:
        user = _user_in(_status_message(answer.body))
        who = f'user "{user}"' if user else "you"
        return ExplainError(
            f"forbidden: the scheduler at {url} refused {who} get on the non-resource URL {EXPLAIN_PATH} "
            f"(it asks the API server: SubjectAccessReview). ClusterRole {EXPLAINER_ROLE} grants it "
            f"(kubectl apply -k manifests/ creates it); bind it: {_grant_hint(user)}")
    if answer.status == 401:
        return ExplainError(
            f"the scheduler at {url} did not authenticate the kubeconfig's credentials: it checks a bearer "
            f"token with the API server (TokenReview) and trusts client certificates of the cluster's client "
            f"CA (kube-system/extension-apiserver-authentication)")
    return ExplainError(f"the scheduler at {url} answered {answer.status}: {answer.body.strip()[:500]}")


def _status_message(body: str) -> str:
    try:
        return str(json.loads(body).get("message") or body)
    except (ValueError, AttributeError):
        return body


def _leader_note(answer: Answer, url: str) -> str:
    """Which replica answered, and who leads, when they differ."""
    h = answer.headers
    me, leader, lease = h.get("pysched-identity", "?"), h.get("pysched-leader", ""), h.get("pysched-lease", "")
    ns = lease.partition("/")[0] or "pysched-system"
    if leader:
        pod = leader.rpartition("_")[0] or leader
        where = f"the leader is {leader} (Lease {lease}): kubectl port-forward -n {ns} pod/{pod} 10259"
    else:
        where = f"no replica leads right now (Lease {lease})"
    return (f"the scheduler at {url} is replica {me}, which does not lead: only the leader schedules and "
            f"keeps traces; {where}")


async def run(ref: PodRef, creds: Credentials, url: str, ctx: ssl.SSLContext, *, annotate: bool = False,
              wait: float = 30.0, timeout: float = 10.0) -> Explained:
    """Read the pod, then the scheduler's trace of it (``annotate``: ask for one and wait up to
    ``wait`` seconds for its cycle to end). Raises ExplainError for what stops the answer."""
    from pysched.client.httppool import HTTPPool
    from pysched.client.rest import KubeClient

    client = KubeClient(creds, qps=0, burst=1, timeout=timeout, max_connections=1,
                        user_agent="pysched-explain")
    pool = HTTPPool(url, ctx, limit=1, user_agent="pysched-explain")
    try:
        pod = await _read_pod(client, ref)
        answer = await _ask(pool, url, ref, creds, timeout)
        if answer.status not in (200, 202, 404):
            raise _scheduler_failure(answer, url)
        owner = (pod.get("spec") or {}).get("schedulerName") or "default-scheduler"
        profiles = answer.profiles
        if profiles is not None and owner not in profiles:
            raise ExplainError(f"pod {ref.key} is not scheduled by pysched: its spec.schedulerName is {owner!r}, "
                               f"and the scheduler at {url} serves {', '.join(profiles) or 'no profile'}")
        if answer.status != 200 and answer.leading is False:   # it queues the pod, but never schedules it
            raise ExplainError(_leader_note(answer, url))
        out = Explained(pod, answer, url)
        if annotate and answer.status != 200 and not (pod.get("spec") or {}).get("nodeName"):
            if not _asked(pod):
                await _annotate(client, ref)
                out.notes.append(f"annotated {explanation.REQUEST_ANNOTATION}=true")
            deadline = time.monotonic() + wait
            while out.answer.status != 200 and time.monotonic() < deadline:
                await asyncio.sleep(0.5)
                out.answer = await _ask(pool, url, ref, creds, timeout)
                if out.answer.status not in (200, 202, 404):
                    raise _scheduler_failure(out.answer, url)
        return out
    finally:
        await pool.close()
        await client.close()


# -- presenting it --------------------------------------------------------------------------------

def _pod_line(ref: PodRef, pod: dict, answer: Answer, url: str) -> str:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    where = f"on {spec['nodeName']}" if spec.get("nodeName") else "not on a node"
    replica = answer.headers.get("pysched-identity")
    by = f"{url}" + (f", replica {replica}" if replica else "")
    return f"Pod {ref.key}: {status.get('phase', 'Pending')}, {where} (schedulerName {spec.get('schedulerName')}; " \
           f"trace from {by})"


def format_trace(ref: PodRef, pod: dict, trace: dict, answer: Answer, url: str, nodes: str) -> str:
    """The pod, then its last cycle as ``simulate --explain`` prints one, then what the formatter
    leaves to simulate's other tables: Permit's verdict, preemption, extenders."""
    from pysched.tools.simulate import format_explain

    view = dict(trace, pod=ref.key)
    if trace.get("error"):
        # The cycle failed (perhaps after choosing a node: Reserve, Permit, the bind): say so first.
        reason = next((c.get("reason") for c in (pod.get("status") or {}).get("conditions") or ()
                       if c.get("type") == "PodScheduled" and c.get("status") == "False"), None)
        view.update(selectedNode="", result=reason or "Unschedulable", message=trace["error"])
    out = [_pod_line(ref, pod, answer, url), format_explain(view, nodes, nodes_flag="--nodes")]
    if trace.get("permit"):
        p = trace["permit"]
        out.append(f"  Permit ({', '.join(p.get('plugins') or ())}): {p.get('status')}"
                   + (f": {p['message']}" if p.get("message") else ""))
    if trace.get("preemption"):
        p = trace["preemption"]
        victims = ", ".join(p.get("victims") or ()) or "none"
        out.append(f"  Preemption: nominated node {p.get('node') or '-'} (victims: {victims})")
    for e in trace.get("extenders") or ():
        out.append(f"  Extender {e.get('extender')} {e.get('verb')}: "
                   + json.dumps({k: v for k, v in e.items() if k not in ("extender", "verb")})[:300])
    if answer.leading is False:
        out.append(f"note: {_leader_note(answer, url)} (this trace is from when it led)")
    return "\n".join(out)


def format_summary(ref: PodRef, pod: dict) -> str | None:
    """The compact explanation the pod carries (``pysched.io/explanation``), for people."""
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(explanation.RESULT_ANNOTATION)
    try:
        s = json.loads(raw) if raw else None
    except ValueError:
        return None
    if not isinstance(s, dict):
        return None
    out = [f"The summary on the pod ({explanation.RESULT_ANNOTATION}, from its last explained cycle):",
           f"  {explanation.outcome(s)}"]
    for top in s.get("topNodes") or ():
        plugins = ", ".join(f"{p} {v}" for p, v in sorted((top.get("plugins") or {}).items()))
        out.append(f"  {top.get('node')}: total {top.get('total')} ({plugins})")
    return "\n".join(out)


def no_trace_text(ref: PodRef, pod: dict, answer: Answer) -> str:
    """What to do about a pod the scheduler keeps no trace of."""
    spec = pod.get("spec") or {}
    annotate = f"kubectl annotate pod {ref.name} -n {ref.namespace} {explanation.REQUEST_ANNOTATION}=true"
    if answer.status == 202:
        try:
            message = json.loads(answer.body).get("message", "")
        except ValueError:
            message = answer.body
        return f"pod {ref.key}: {message}"
    if spec.get("nodeName"):
        lines = [f"no trace of pod {ref.key}: it is bound to {spec['nodeName']}, and pysched keeps a trace only of "
                 f"the cycles of pods that asked first ({explanation.REQUEST_ANNOTATION}=true; or every pod, with "
                 f"pysched run --explain-all). A bound pod is not scheduled again: annotate the next one before "
                 f"it is created, or recreate this one with the annotation."]
    elif _asked(pod):
        lines = [f"no trace of pod {ref.key} on this scheduler, though it asked: the scheduler restarted since, "
                 f"or dropped the trace to make room. Its next cycle is traced again (a cluster change that "
                 f"may let it fit starts one; or remove the annotation and run: {annotate})."]
    else:
        lines = [f"no trace of pod {ref.key}: it did not ask for one. Run\n  {annotate}\nwhich re-evaluates the "
                 f"pending pod at once with the trace on, then this command again (or: pysched explain --annotate "
                 f"{ref.key})."]
    summary = format_summary(ref, pod)
    if summary:
        lines.append(summary)
    return "\n".join(lines)


# -- the command ------------------------------------------------------------------------------------

def add_parser(sub) -> None:
    p = sub.add_parser("explain", help="the live scheduler's latest verdict for a pod, per plugin and per node",
                       description="Print the live scheduler's last scheduling cycle for POD: the outcome, each "
                                   "filter plugin's verdict per node, the best nodes with every score plugin's "
                                   "weighted score. Reads the pod with your kubeconfig and asks the scheduler's "
                                   "secure port with the same credentials; needs get pods and get on the "
                                   f"non-resource URL {EXPLAIN_PATH} (ClusterRole {EXPLAINER_ROLE}).",
                       epilog=EXIT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("pod", metavar="POD", help="NAME, NAMESPACE/NAME or pod/NAME")
    p.add_argument("-n", "--namespace", help="the pod's namespace (default: the context's, else default)")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then "
                                        "in-cluster)")
    p.add_argument("--context", help="kubeconfig context (default: its current-context)")
    p.add_argument("-o", "--output", default="text", choices=("text", "json"),
                   help="text (default), or json: the trace as the scheduler serves it")
    p.add_argument("--nodes", default="summary", choices=("summary", "all"),
                   help="text: nodes grouped by verdict with the best-scored ones (summary, the default), or "
                        "every node's verdicts and scores (all)")
    p.add_argument("--scheduler", metavar="URL", default=None,
                   help=f"the scheduler's secure port (default: ${SCHEDULER_URL_ENV}, else {DEFAULT_SCHEDULER_URL}: "
                        f"one on this host, or in a cluster through `{PORT_FORWARD_HINT}`)")
    p.add_argument("--certificate-authority", metavar="FILE", default=None,
                   help="CA bundle that verifies the scheduler's serving certificate (default for a scheduler on "
                        f"this host: {DEFAULT_CERT_DIR}/{SELF_SIGNED_CERT}, the self-signed one it writes, when "
                        "present; else the system's)")
    p.add_argument("--insecure-skip-tls-verify", action="store_true",
                   help="do not verify the scheduler's certificate (your credentials are still sent)")
    p.add_argument("--annotate", action="store_true",
                   help=f"a pending pod without a trace: add {explanation.REQUEST_ANNOTATION}=true (needs patch "
                        "pods), which re-evaluates it, and wait for its trace")
    p.add_argument("--wait", type=float, default=30.0, metavar="SECONDS",
                   help="--annotate: how long to wait for the trace (default: 30)")
    p.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"),
                   help="least severe log level written (default: warning)")


def main(args: argparse.Namespace) -> int:
    try:
        return _main(args)
    except ExplainError as exc:
        print(f"pysched explain: {exc}", file=sys.stderr)
        return exc.code


def _main(args: argparse.Namespace) -> int:
    path = kubeconfig_path(args.kubeconfig)
    if path is not None and not path.exists():
        raise ExplainError(f"kubeconfig {path} does not exist", EXIT_BAD_INPUT)
    ref = parse_pod_ref(args.pod, args.namespace, context_namespace(path, args.context) or "default")
    creds = load_credentials(path, args.context)
    url = (args.scheduler or os.environ.get(SCHEDULER_URL_ENV) or DEFAULT_SCHEDULER_URL).rstrip("/")
    if urlsplit(url).scheme != "https" or not urlsplit(url).hostname:
        raise ExplainError(f"--scheduler {url!r}: expected https://HOST:PORT (the scheduler's secure port)",
                           EXIT_BAD_INPUT)
    ctx = scheduler_ssl(url, scheduler_ca(url, args.certificate_authority, args.insecure_skip_tls_verify),
                        args.insecure_skip_tls_verify, creds)
    got = asyncio.run(run(ref, creds, url, ctx, annotate=args.annotate, wait=args.wait))
    for note in got.notes:
        print(f"note: {note}", file=sys.stderr)
    answer = got.answer
    if answer.status == 200:
        print(answer.body if args.output == "json" else
              format_trace(ref, got.pod, json.loads(answer.body), answer, url, args.nodes))
        return EXIT_OK
    if answer.status == 202 and args.output == "json":
        print(answer.body)
    text = no_trace_text(ref, got.pod, answer)
    print(text, file=sys.stderr if args.output == "json" else sys.stdout)
    return EXIT_REEVALUATING if answer.status == 202 else EXIT_NO_TRACE
