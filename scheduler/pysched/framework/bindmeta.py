"""What the Bind writes on the pod besides its node: annotations a plugin chose in the scheduling
cycle (GPUShare's GPU indices) travel in the Binding itself - the API server copies a Binding's
``metadata.annotations`` onto the pod as it sets ``spec.nodeName`` - instead of a patch of their
own before it, so the pod gets its node and its annotations in one write.

A plugin adds them with ``add_bind_annotations(state, {...})`` (Reserve, once the node is chosen);
DefaultBinder sends ``bind_annotations(state)``. A binder that does not read them (an extender's,
a plugin's own) leaves them unwritten: a plugin that must have them on the pod whoever binds it
writes them in PreBind instead.
"""

from __future__ import annotations

from collections.abc import Mapping

from pysched.framework.cycle_state import CycleState

BIND_ANNOTATIONS_KEY = "pysched/bind-annotations"


def add_bind_annotations(state: CycleState, annotations: Mapping[str, str]) -> None:
    current = dict(state.get(BIND_ANNOTATIONS_KEY) or {})
    current.update(annotations)
    state.write(BIND_ANNOTATIONS_KEY, current)


def remove_bind_annotations(state: CycleState, keys: list[str]) -> None:
    current = dict(state.get(BIND_ANNOTATIONS_KEY) or {})
    for k in keys:
        current.pop(k, None)
    state.write(BIND_ANNOTATIONS_KEY, current)


def bind_annotations(state: CycleState) -> dict[str, str]:
    return dict(state.get(BIND_ANNOTATIONS_KEY) or {})
