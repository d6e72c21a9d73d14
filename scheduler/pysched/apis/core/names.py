"""Kubernetes name syntax: the label, annotation and object-name rules the apiserver enforces.

Used where pysched reads objects that never went through an apiserver (``pysched simulate``'s
snapshot and pod files), so that a file the cluster would reject is rejected here too, with the
field named, instead of being scheduled; and for plugin args that kube-scheduler checks the same
way (``topologyKey``, ignored resource names). Each check returns ``None`` when the value is
valid, or one sentence saying what is wrong with it.

The rules are those of apimachinery's ``IsQualifiedName``, ``IsValidLabelValue``,
``IsDNS1123Subdomain`` and ``IsDNS1123Label``.
"""

from __future__ import annotations

import re

NAME_MAX = 63           # a label value, the name part of a qualified name, a DNS-1123 label
SUBDOMAIN_MAX = 253     # a DNS-1123 subdomain, the prefix of a qualified name

# Matched with fullmatch: ``$`` would let a trailing newline through.
_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

_NAME_CHARS = ("must consist of alphanumeric characters, '-', '_' or '.', "
               "and must start and end with an alphanumeric character")
_SUBDOMAIN_CHARS = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                    "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com')")
_LABEL_CHARS = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                "and must start and end with an alphanumeric character (e.g. 'my-name' or '123-abc')")


def dns1123_subdomain_problem(value: str) -> str | None:
    """Object names such as a Node's or a Pod's (``example.com``, ``node-1``)."""
    if not value:
        return "must be non-empty"
    if len(value) > SUBDOMAIN_MAX:
        return f"must be no more than {SUBDOMAIN_MAX} characters"
    if not _SUBDOMAIN_RE.fullmatch(value):
        return _SUBDOMAIN_CHARS
    return None


def dns1123_label_problem(value: str) -> str | None:
    """Namespace names (``kube-system``)."""
    if not value:
        return "must be non-empty"
    if len(value) > NAME_MAX:
        return f"must be no more than {NAME_MAX} characters"
    if not _LABEL_RE.fullmatch(value):
        return "must not contain dots" if _SUBDOMAIN_RE.fullmatch(value) else _LABEL_CHARS
    return None


def qualified_name_problem(value: str) -> str | None:
    """Label and annotation keys, taint and toleration keys: ``[prefix/]name``."""
    prefix, slash, name = value.rpartition("/")
    if slash and "/" in prefix:
        return ("a valid label key is a name with an optional DNS subdomain prefix and one '/' "
                "(e.g. 'example.com/MyName')")
    if slash:
        if not prefix:
            return "prefix part must be non-empty"
        problem = dns1123_subdomain_problem(prefix)
        if problem:
            return f"prefix part {problem}"
    if not name:
        return "name part must be non-empty"
    if len(name) > NAME_MAX:
        return f"name part must be no more than {NAME_MAX} characters"
    if not _NAME_RE.fullmatch(name):
        return f"name part {_NAME_CHARS} (e.g. 'MyName', 'my.name' or '123-abc')"
    return None


def label_value_problem(value: str) -> str | None:
    """Label values and taint values: empty, or a name of at most 63 characters."""
    if not value:
        return None
    if len(value) > NAME_MAX:
        return f"must be no more than {NAME_MAX} characters"
    if not _NAME_RE.fullmatch(value):
        return ("a label value must be empty or consist of alphanumeric characters, '-', '_' or '.', and must "
                "start and end with an alphanumeric character (e.g. 'MyValue', 'my_value' or '12345')")
    return None
