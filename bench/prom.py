"""A small Prometheus text-format reader and the arithmetic the bench does on scraped metrics.

``parse`` turns exposition text into ``{(sample name, labels): value}`` with labels as a sorted
tuple of pairs; ``delta`` subtracts an earlier scrape of the same process; ``select`` and ``total``
pick samples by name and label values; ``histogram_quantile`` estimates a quantile from
cumulative ``_bucket`` counts with linear interpolation inside the bucket, as PromQL's
``histogram_quantile`` does.
"""

from __future__ import annotations

import math

Labels = tuple[tuple[str, str], ...]
Samples = dict[tuple[str, Labels], float]

_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


def _labels(text: str, line: str) -> Labels:
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " ,":
            i += 1
        if i >= n:
            break
        eq = text.index("=", i)
        key = text[i:eq].strip()
        if eq + 1 >= n or text[eq + 1] != '"':
            raise ValueError(f"bad label value in {line!r}")
        i, val = eq + 2, []
        while text[i] != '"':
            if text[i] == "\\":
                val.append(_ESCAPES.get(text[i + 1], text[i + 1]))
                i += 2
            else:
                val.append(text[i])
                i += 1
        out.append((key, "".join(val)))
        i += 1
    return tuple(sorted(out))


def parse(text: str) -> Samples:
    samples: Samples = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "{" in line:
            name, rest = line.split("{", 1)
            close = rest.rindex("}")
            labels, value_part = _labels(rest[:close], line), rest[close + 1:]
        else:
            name, _, value_part = line.partition(" ")
            labels = ()
        fields = value_part.split()
        if not fields:
            raise ValueError(f"no value in metrics line {line!r}")
        samples[(name.strip(), labels)] = float(fields[0])
    return samples


def delta(after: Samples, before: Samples) -> Samples:
    """What a process's counters and histograms gained between two scrapes."""
    return {k: v - before.get(k, 0.0) for k, v in after.items()}


def select(samples: Samples, name: str, **match: str) -> list[tuple[dict[str, str], float]]:
    """Samples called ``name`` whose labels include every ``match`` pair."""
    out = []
    for (n, labels), v in samples.items():
        if n != name:
            continue
        d = dict(labels)
        if all(d.get(k) == want for k, want in match.items()):
            out.append((d, v))
    return out


def total(samples: Samples, name: str, **match: str) -> float | None:
    """Sum of the matching samples (None when the process exports none)."""
    found = select(samples, name, **match)
    return sum(v for _, v in found) if found else None


def buckets(samples: Samples, histogram: str, **match: str) -> list[tuple[float, float]]:
    """Cumulative ``(le, count)`` of a histogram summed over the other labels, ascending by ``le``."""
    acc: dict[float, float] = {}
    for labels, v in select(samples, f"{histogram}_bucket", **match):
        le = float(labels["le"])   # "+Inf" parses as inf
        acc[le] = acc.get(le, 0.0) + v
    return sorted(acc.items())


def histogram_quantile(q: float, cumulative: list[tuple[float, float]]) -> float | None:
    """PromQL's ``histogram_quantile``: the bucket holding rank ``q * total``, linearly interpolated
    between its lower and upper bound (lower bound 0 for the first bucket, unless its upper bound is
    not positive); a rank in the +Inf bucket gives the highest finite bound. None without data."""
    if not cumulative or not math.isinf(cumulative[-1][0]):
        return None
    total_count = cumulative[-1][1]
    if total_count <= 0 or not 0 <= q <= 1:
        return None
    rank = q * total_count
    prev_le, prev_count = 0.0, 0.0
    for i, (le, count) in enumerate(cumulative):
        if count >= rank:
            if math.isinf(le):
                return cumulative[i - 1][0] if i > 0 else None
            if i == 0 and le <= 0:
                return le
            in_bucket = count - prev_count
            if in_bucket <= 0:
                return le
            return prev_le + (le - prev_le) * (rank - prev_count) / in_bucket
        prev_le, prev_count = le, count
    return None
