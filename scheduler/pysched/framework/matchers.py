"""Pod matchers: "pods matching these selectors in these namespaces", the key plugins use to ask
the snapshot for per-node pod counts (``Handle.pod_counts``). Hashable, so the cache can keep one
incrementally updated count array per distinct matcher."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from pysched.apis.core.model import LabelSelector

if TYPE_CHECKING:
    from pysched.framework.podinfo import PodInfo


class MatcherTerm(NamedTuple):
    namespaces: frozenset[str] | None   # None: every namespace
    selector: LabelSelector


class PodMatcher(NamedTuple):
    """Pods matching every term (ANDed); ``skip_deleting`` ignores terminating pods;
    ``owner_uid`` restricts to pods of one controller."""
    terms: tuple[MatcherTerm, ...]
    skip_deleting: bool = False
    owner_uid: str = ""

    def matches(self, pod: PodInfo) -> bool:
        if self.skip_deleting and pod.deleting:
            return False
        if self.owner_uid and pod.owner_uid != self.owner_uid:
            return False
        for t in self.terms:
            if t.namespaces is not None and pod.namespace not in t.namespaces:
                return False
            if not t.selector.matches(pod.labels):
                return False
        return True
