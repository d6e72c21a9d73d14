"""DRA device selectors, kube-scheduler against pysched at the control plane's release (1.37.2; 1.35.4
in the oldest-release leg): a table of expressions, one per CEL library function and syntax form,
plus run-time and compile-time errors (1.37's run-time errors name the device: the texts follow the
release, as both schedulers do).

Each expression is a case of ``dra_kit``: its own namespace, one node whose only device carries
every kind of attribute, a claim with the expression as its request's selector, and a pod. Both
schedulers run alone on a fresh control plane, kube-scheduler first; a pod's outcome is the node it
was bound to or its PodScheduled=False reason and whole message. pysched must produce exactly
kube-scheduler's outcome for every case: the same devices, the same verdicts, the same texts.
``python -m pytest tests/e2e/test_dra_cel_differential.py -s`` prints both outcomes.
"""

from __future__ import annotations

import json

import pytest

from .dra_kit import CASE_LABEL, Case, Run, claim, dra_pod, exactly, run_cases

pytestmark = [pytest.mark.e2e, pytest.mark.oldest_release]

D = 'device.attributes["gpu.example.com"]'
C = 'device.capacity["gpu.example.com"]'
RICH = [("A100", 0, "40Gi", {"driverVersion": {"version": "1.2.3"}, "mig": {"bool": False},
                             "tags": {"string": "a,b,c"}, "numa.example.com/node": {"int": 1}})]

# (id, expression, what kube-scheduler does with it: "match", "no match" or an error text)
SELECTORS = [
    ("driver", 'device.driver == "gpu.example.com"', "match"),
    ("string-attr", f'{D}.model == "A100"', "match"),
    ("string-attr-no", f'{D}.model == "H100"', "no match"),
    ("other-domain", 'device.attributes["numa.example.com"].node == 1', "match"),
    ("bool-attr", f'!{D}.mig', "match"),
    ("has", f'has({D}.nosuch)', "no match"),
    ("in-unknown-domain", '"x" in device.attributes["other.example.com"]', "no match"),
    ("quantity", f'{C}.memory.compareTo(quantity("40960Mi")) == 0', "match"),
    ("quantity-math", f'{C}.memory.sub(quantity("8Gi")).isGreaterThan(quantity("31Gi"))', "match"),
    ("semver", f'{D}.driverVersion.isGreaterThan(semver("1.2.3-rc.1"))', "match"),
    ("semver-parts", f'{D}.driverVersion.major() == 1 && {D}.driverVersion.patch() == 3', "match"),
    ("optional-field", f'{D}.?driverVersion.hasValue()', "match"),
    ("optional-index", f'{D}[?"nosuch"].orValue("a100") == "a100"', "match"),
    ("optional-missing", f'{D}.?nosuch.orValue("x") == "x"', "match"),
    ("lower-ascii", f'{D}.model.lowerAscii() == "a100"', "match"),
    ("strings", f'{D}.tags.split(",").size() == 3 && {D}.model.indexOf("1") == 1 && '
                f'{D}.model.replace("A", "B") == "B100" && {D}.model.substring(1) == "100"', "match"),
    ("strings-more", f'" x ".trim() == "x" && {D}.model.charAt(0) == "A" && {D}.model.upperAscii() == "A100" && '
                     f'strings.quote("a") == "\\"a\\"" && {D}.model.lastIndexOf("0") == 3', "match"),
    ("lists", '[3, 1, 2].sort() == [1, 2, 3] && [1, 2, 3].isSorted() && [1, 2].sum() == 3 && '
              '[1, 5].max() == 5 && [1, 2, 2].indexOf(2) == 1', "match"),
    ("sets", 'sets.contains([1, 2, 3], [1, 3]) && sets.intersects([1], [1, 2]) && sets.equivalent([1, 2], [2, 1])',
     "match"),
    ("regex", f'{D}.model.find("[0-9]+") == "100" && {D}.model.matches("^A[0-9]+$")', "match"),
    ("comprehensions", '[1, 2, 3].exists(x, x == 2) && [1, 2, 3].all(x, x > 0) && '
                       '[1, 2, 3].filter(x, x > 1).size() == 2', "match"),
    ("bind", f'cel.bind(g, {D}, g.model == "A100" && !g.mig)', "match"),
    ("ip-cidr", 'ip("10.0.0.1").family() == 4 && cidr("10.0.0.0/8").containsIP(ip("10.0.0.1"))', "match"),
    ("url", 'url("https://example.com:8443/a").getPort() == "8443"', "match"),
    ("format", '"%s-%d".format(["a", 1]) == "a-1"', "match"),
    # run-time errors (the API server refuses to store an expression that does not compile or whose
    # estimated cost is over the limit: those are in tests/unit/test_dra_cel.py)
    ("missing-key", f'{D}.nosuch == 1', "no such key: nosuch"),
    ("missing-key-other-domain", 'device.attributes["other.example.com"].x == 1', "no such key: x"),
    ("as-integer", 'quantity("1.5").asInteger() == 1', "cannot convert value to integer"),
    ("bad-quantity", 'quantity("12 Gi") == quantity("1")', "quantities must match the regular expression"),
]


def cel_case(case_id: str, expression: str) -> Case:
    name = f"cel-{case_id}"
    return Case(name, expression, {f"{name}-n1": RICH},
                claims=[claim(f"{name}-claim", exactly("gpu", expression))],
                pods=[dra_pod(f"{name}-pod", name, claims={"gpu": f"{name}-claim"})],
                settled=lambda pods, n=f"{name}-pod": n in pods and (
                    bool(pods[n]["spec"].get("nodeName")) or any(
                        c.get("type") == "PodScheduled" and c.get("status") == "False"
                        for c in (pods[n].get("status") or {}).get("conditions") or ())))


CASES = [cel_case(i, e) for i, e, _ in SELECTORS]
_RUNS: dict[str, Run | BaseException] = {}


async def outcome_of(who: str) -> Run:
    if who not in _RUNS:
        try:
            _RUNS[who] = await run_cases(who, CASES)
        except Exception as exc:  # noqa: BLE001 - re-raised for every case
            _RUNS[who] = exc
        else:
            print(f"\n{who}:\n" + json.dumps(_RUNS[who].outcomes, indent=1, sort_keys=True))
    run = _RUNS[who]
    if isinstance(run, BaseException):
        raise AssertionError(f"the {who} run failed: {run!r}") from run
    return run


@pytest.mark.parametrize("case_id, expression, verdict", SELECTORS, ids=[s[0] for s in SELECTORS])
async def test_kube_scheduler_does_what_the_table_says(case_id, expression, verdict):
    kube = await outcome_of("kube")
    name = f"cel-{case_id}"
    assert name not in kube.unsettled, kube.explain(name)
    pod = kube.outcomes[name]["pods"][f"{name}-pod"]
    if verdict == "match":
        assert pod == f"{name}-n1", kube.explain(name)
    elif verdict == "no match":
        assert isinstance(pod, dict) and "cannot allocate all claims" in pod["pending"], kube.explain(name)
    else:
        assert isinstance(pod, dict) and verdict in kube.messages[f"dra-{name}/{name}-pod"], kube.explain(name)


@pytest.mark.parametrize("case_id, expression, verdict", SELECTORS, ids=[s[0] for s in SELECTORS])
async def test_pysched_evaluates_as_kube_scheduler(case_id, expression, verdict):
    kube = await outcome_of("kube")
    ours = await outcome_of("pysched")
    name = f"cel-{case_id}"
    assert ours.outcomes[name] == kube.outcomes[name], ours.explain(name)
    key = f"dra-{name}/{name}-pod"
    assert ours.messages.get(key) == kube.messages.get(key)


def test_every_case_selects_its_own_node():
    assert all(c.pods[0]["spec"]["nodeSelector"] == {CASE_LABEL: c.name} for c in CASES)
