"""Slim value types for the parts of Pods and Nodes the scheduler reasons about.

Taints, tolerations, node selectors and label selectors are parsed once per watch event into
tuples and frozen sets, so the scheduling cycle never walks raw API dictionaries. Each type
knows how to match a single node (labels + name); the vectorised forms over all nodes live in
``nodetable``.

Matching follows the API packages: an empty or unknown toleration operator never tolerates; node
selector terms are ORed and their requirements ANDed; a term with no requirements matches
nothing; ``NotIn`` and ``DoesNotExist`` match nodes that lack the label; ``Gt``/``Lt`` need one
integer value and a node label that parses as an integer (``strconv.ParseInt(v, 10, 64)``: an
optional sign and ASCII digits, nothing else); a requirement that cannot be parsed makes its term
match nothing (``LazyErrorNodeSelector``). A preferred term that cannot be parsed also keeps
upstream's error message (``PreferredTerm.errors``, as ``NewPreferredSchedulingTerms`` words it),
which NodeAffinity's PreScore turns into a failed cycle.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import NamedTuple

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
# strconv.ParseInt(s, 10, 64): a sign, then ASCII digits only - no "_" (base 0 only), no spaces,
# no trailing newline (hence fullmatch).
_INT_RE = re.compile(r"[+-]?[0-9]+")


class ObjectError(ValueError):
    """An API object (or a part of it) is malformed; the message names the field."""


def parse_int(text: str) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``, or None where Go returns an error."""
    if isinstance(text, str) and _INT_RE.fullmatch(text):
        v = int(text)
        if -(2**63) <= v < 2**63:
            return v
    return None


class Taint(NamedTuple):
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{{{self.key}: {self.value}}}"


class Toleration(NamedTuple):
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint, comparison_operators: bool = False) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        op = self.operator
        if op in ("", "Equal"):
            return self.value == taint.value
        if op == "Exists":
            return True
        if op in ("Lt", "Gt") and comparison_operators:
            tv, nv = parse_int(self.value), parse_int(taint.value)
            if tv is None or nv is None:
                return False
            return nv < tv if op == "Lt" else nv > tv
        return False


def parse_taints(raw: list | None) -> tuple[Taint, ...]:
    if not raw:
        return ()
    return tuple(Taint(t.get("key", ""), t.get("value", "") or "", t.get("effect", "")) for t in raw)


def parse_tolerations(raw: list | None) -> tuple[Toleration, ...]:
    if not raw:
        return ()
    return tuple(Toleration(t.get("key", "") or "", t.get("operator", "") or "",
                            t.get("value", "") or "", t.get("effect", "") or "") for t in raw)


def tolerates_taint(tolerations: Iterable[Toleration], taint: Taint, comparison_operators=False) -> bool:
    for t in tolerations:
        if t.tolerates(taint, comparison_operators):
            return True
    return False


def find_untolerated_taint(taints: Iterable[Taint], tolerations: tuple[Toleration, ...],
                           effects: tuple[str, ...], comparison_operators=False) -> Taint | None:
    """First taint with one of ``effects`` that no toleration tolerates (``FindMatchingUntoleratedTaint``)."""
    for taint in taints:
        if taint.effect in effects and not tolerates_taint(tolerations, taint, comparison_operators):
            return taint
    return None


# -- node selectors ---------------------------------------------------------------------------

class Requirement(NamedTuple):
    """A label requirement. ``values`` is a frozenset; ``number`` is set for Gt/Lt."""
    key: str
    operator: str
    values: frozenset
    number: int | None = None

    def matches(self, labels: dict) -> bool:
        op = self.operator
        if op == "In":
            v = labels.get(self.key)
            return v is not None and v in self.values
        if op == "NotIn":
            v = labels.get(self.key)
            return v is None or v not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        if op in ("Gt", "Lt"):
            v = labels.get(self.key)
            n = parse_int(v) if v is not None else None
            if n is None or self.number is None:
                return False
            return n > self.number if op == "Gt" else n < self.number
        return False


_NODE_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_LABEL_OPS = ("In", "NotIn", "Exists", "DoesNotExist")


def _parse_requirement(raw: dict, where: str, ops: tuple[str, ...]) -> Requirement:
    if not isinstance(raw, dict):
        raise ObjectError(f"{where}: expected an object")
    key = raw.get("key")
    op = raw.get("operator")
    values = raw.get("values") or []
    if not key or not isinstance(key, str):
        raise ObjectError(f"{where}.key: required")
    if op not in ops:
        raise ObjectError(f"{where}.operator: {op!r} is not one of {', '.join(ops)}")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ObjectError(f"{where}.values: expected a list of strings")
    if op in ("In", "NotIn") and not values:
        raise ObjectError(f"{where}.values: must be non-empty for {op}")
    if op in ("Exists", "DoesNotExist") and values:
        raise ObjectError(f"{where}.values: must be empty for {op}")
    number = None
    if op in ("Gt", "Lt"):
        if len(values) != 1 or parse_int(values[0]) is None:
            raise ObjectError(f"{where}.values: {op} needs exactly one integer value")
        number = parse_int(values[0])
    return Requirement(key, op, frozenset(values), number)


class FieldRequirement(NamedTuple):
    """``matchFields`` requirement; only ``metadata.name`` with In/NotIn and one value exists."""
    operator: str
    value: str

    def matches(self, node_name: str) -> bool:
        return (node_name == self.value) if self.operator == "In" else (node_name != self.value)


class NodeSelectorTerm(NamedTuple):
    expressions: tuple[Requirement, ...]
    fields: tuple[FieldRequirement, ...]
    valid: bool = True
    error: str = ""

    def matches(self, labels: dict, node_name: str) -> bool:
        if not self.valid or (not self.expressions and not self.fields):
            return False
        for r in self.expressions:
            if not r.matches(labels):
                return False
        for f in self.fields:
            if not f.matches(node_name):
                return False
        return True


def _parse_term(raw: dict, where: str) -> NodeSelectorTerm:
    if not isinstance(raw, dict):
        raise ObjectError(f"{where}: expected an object")
    exprs = []
    fields = []
    errors = []
    for i, r in enumerate(raw.get("matchExpressions") or ()):
        try:
            exprs.append(_parse_requirement(r, f"{where}.matchExpressions[{i}]", _NODE_OPS))
        except ObjectError as exc:
            errors.append(str(exc))
    for i, r in enumerate(raw.get("matchFields") or ()):
        if (not isinstance(r, dict) or r.get("key") != "metadata.name"
                or r.get("operator") not in ("In", "NotIn") or len(r.get("values") or ()) != 1):
            errors.append(f"{where}.matchFields[{i}]: only metadata.name with In/NotIn and one value is supported")
            continue
        fields.append(FieldRequirement(r["operator"], r["values"][0]))
    return NodeSelectorTerm(tuple(exprs), tuple(fields), not errors, "; ".join(errors))


class NodeSelector(NamedTuple):
    """Required node affinity: terms ORed."""
    terms: tuple[NodeSelectorTerm, ...]

    def matches(self, labels: dict, node_name: str) -> bool:
        for t in self.terms:
            if t.matches(labels, node_name):
                return True
        return False


def parse_node_selector(raw: dict | None, where: str) -> NodeSelector | None:
    if raw is None:
        return None
    terms = raw.get("nodeSelectorTerms") or []
    return NodeSelector(tuple(_parse_term(t, f"{where}.nodeSelectorTerms[{i}]") for i, t in enumerate(terms)))


class PreferredTerm(NamedTuple):
    weight: int
    term: NodeSelectorTerm
    # Upstream's parse errors for this term, worded and located as ``NewPreferredSchedulingTerms``
    # reports them ("[1].matchExpressions[0].values[0]: Invalid value: ..."); empty when it parses.
    errors: tuple[str, ...] = ()


def parse_preferred_terms(raw: list | None, where: str) -> tuple[PreferredTerm, ...]:
    out = []
    for i, p in enumerate(raw or ()):
        w = p.get("weight", 0) if isinstance(p, dict) else 0
        if not w:
            continue
        pref = p.get("preference") or {}
        term = _parse_term(pref, f"{where}[{i}].preference")
        errors = () if term.valid else tuple(_upstream_term_errors(pref, f"[{i}]"))
        out.append(PreferredTerm(int(w), term, errors))
    return tuple(out)


def aggregate_errors(errors: Iterable[str]) -> str:
    """``utilerrors.NewAggregate(errs).Error()``: one message as is, several (duplicates dropped)
    as ``[a, b]``."""
    seen = list(dict.fromkeys(errors))
    return seen[0] if len(seen) == 1 else "[" + ", ".join(seen) + "]"


def go_quote(text: str) -> str:
    """``strconv.Quote``: what ``%q`` prints for a string."""
    out = ['"']
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
               "\v": "\\v"}


def _upstream_term_errors(raw: dict, path: str) -> list[str]:
    """The Gt/Lt value errors ``labels.NewRequirement`` gives for a term's ``matchExpressions``: the
    API server checks keys, operators, value counts and label values of preferred terms, but not
    that a Gt/Lt value is an integer. Paths are relative to the preferred-terms list, as upstream
    prints them."""
    errors: list[str] = []
    for j, r in enumerate(raw.get("matchExpressions") or ()):
        if not isinstance(r, dict):
            continue
        vp = f"{path}.matchExpressions[{j}].values"
        values = r.get("values") or []
        if not isinstance(values, list):
            continue
        op = r.get("operator")
        if op in ("Gt", "Lt"):
            if len(values) != 1:
                shown = json.dumps(values, separators=(",", ":"), ensure_ascii=False)
                errors.append(f"{vp}: Invalid value: {shown}: for 'Gt', 'Lt' operators, exactly one value is required")
            for k, v in enumerate(values):
                if parse_int(v) is None:
                    errors.append(f"{vp}[{k}]: Invalid value: {go_quote(str(v))}: "
                                  "for 'Gt', 'Lt' operators, the value must be an integer")
    return errors


# -- label selectors --------------------------------------------------------------------------

class LabelSelector(NamedTuple):
    """``metav1.LabelSelector``: matchLabels and matchExpressions ANDed; empty matches all."""
    requirements: tuple[Requirement, ...]

    def matches(self, labels: dict) -> bool:
        for r in self.requirements:
            if not r.matches(labels):
                return False
        return True

    @property
    def empty(self) -> bool:
        return not self.requirements


EVERYTHING = LabelSelector(())


def parse_label_selector(raw: dict | None, where: str) -> LabelSelector | None:
    """``None`` for a nil selector (matches nothing where that matters), else a selector."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ObjectError(f"{where}: expected an object")
    reqs = []
    for k, v in sorted((raw.get("matchLabels") or {}).items()):
        if not isinstance(v, str):
            raise ObjectError(f"{where}.matchLabels[{k}]: expected a string")
        reqs.append(Requirement(k, "In", frozenset((v,))))
    for i, r in enumerate(raw.get("matchExpressions") or ()):
        reqs.append(_parse_requirement(r, f"{where}.matchExpressions[{i}]", _LABEL_OPS))
    return LabelSelector(tuple(reqs))


def selector_from_labels(labels: dict) -> LabelSelector:
    return LabelSelector(tuple(Requirement(k, "In", frozenset((v,))) for k, v in sorted(labels.items())))
