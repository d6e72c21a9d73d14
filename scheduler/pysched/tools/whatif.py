"""``pysched simulate --add-nodes TEMPLATE:N``: nodes that do not exist yet, for what-if runs.

TEMPLATE is the name of a node in the snapshot or the path of a YAML file holding one Node. Each
added node copies the template's labels, annotations, taints and capacity/allocatable and is
named ``<template>-sim-<i>`` (``i`` counting on across repeated flags for the same template);
``kubernetes.io/hostname`` becomes the new name (each node is its own hostname domain, as on a
real node), the zone and every other label are kept. Not copied: ``spec.unschedulable`` (a new
node is not cordoned), ``spec.providerID``/``podCIDR``, the image list (nothing is pulled yet)
and the conditions.
"""

from __future__ import annotations

import copy
from pathlib import Path

from pysched.tools.snapshot import SnapshotError, read_objects, validate_node

HOSTNAME = "kubernetes.io/hostname"
MAX_ADDED = 10000


def parse_spec(text: str) -> tuple[str, int]:
    """``TEMPLATE:N`` -> (template, N); raises ValueError with the problem."""
    template, sep, count = text.rpartition(":")
    if not sep or not template:
        raise ValueError(f"--add-nodes {text!r}: expected TEMPLATE:N (a node name or Node YAML file, and a count)")
    try:
        n = int(count)
    except ValueError:
        raise ValueError(f"--add-nodes {text!r}: N: {count!r} is not an integer") from None
    if not 0 < n <= MAX_ADDED:
        raise ValueError(f"--add-nodes {text!r}: N: must be between 1 and {MAX_ADDED}")
    return template, n


def _template_node(template: str, nodes: dict[str, dict]) -> dict:
    if template in nodes:
        return nodes[template]
    path = Path(template)
    if not path.exists():
        raise SnapshotError(f"--add-nodes {template}: no node of that name in the snapshot, and no such file")
    found = read_objects(path)
    kinds = [str(o.get("kind")) for o, _ in found]
    if kinds != ["Node"]:
        raise SnapshotError(f"{path}: --add-nodes expects exactly one Node, found {', '.join(kinds) or 'none'}")
    node, where = found[0]
    validate_node(node, path, where)
    return node


def build_nodes(specs: list[str], snapshot_nodes: list[dict]) -> tuple[list[dict], dict[str, str]]:
    """The added Node objects and, for each, the template it was copied from."""
    existing = {n["metadata"]["name"]: n for n in snapshot_nodes}
    added: list[dict] = []
    template_of: dict[str, str] = {}
    next_index: dict[str, int] = {}
    for text in specs:
        try:
            template, count = parse_spec(text)
        except ValueError as exc:
            raise SnapshotError(str(exc)) from None
        src = _template_node(template, existing)
        base = src["metadata"]["name"]
        for _ in range(count):
            i = next_index.get(base, 0)
            next_index[base] = i + 1
            name = f"{base}-sim-{i}"
            if name in existing or name in template_of:
                raise SnapshotError(f"--add-nodes {text}: node {name} already exists in the snapshot")
            added.append(_copy(src, name))
            template_of[name] = template
    return added, template_of


def _copy(src: dict, name: str) -> dict:
    meta = src.get("metadata") or {}
    labels = dict(meta.get("labels") or {})
    labels[HOSTNAME] = name
    spec = {k: copy.deepcopy(v) for k, v in (src.get("spec") or {}).items() if k == "taints"}
    status = {k: copy.deepcopy(v) for k, v in (src.get("status") or {}).items()
              if k in ("capacity", "allocatable", "nodeInfo")}
    out: dict = {"apiVersion": "v1", "kind": "Node",
                 "metadata": {"name": name, "labels": labels, "uid": f"simulated-node-{name}"},
                 "spec": spec, "status": status}
    if meta.get("annotations"):
        out["metadata"]["annotations"] = dict(meta["annotations"])
    return out
