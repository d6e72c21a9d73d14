"""What a pod asks of GPUs (``GPUAsk``), read from its annotations or whole-GPU requests, with a
clear error naming the field when the ask cannot be read."""

from __future__ import annotations

from dataclasses import dataclass

from pysched.framework import PodInfo

FULL = 1000   # one whole GPU, in thousandths


class AskError(ValueError):
    """A pod's GPU ask that cannot be read; the message names the annotation or resource."""


@dataclass(frozen=True)
class GPUAsk:
    """``milli`` thousandths of each of ``count`` GPUs (``milli`` 1000 for whole GPUs; 0 and 0: no
    GPU), on a node whose model is one of ``models`` (empty: any)."""
    milli: int = 0
    count: int = 0
    models: tuple[str, ...] = ()

    @property
    def wants_gpu(self) -> bool:
        return self.count > 0

    @property
    def sharing(self) -> bool:
        """Part of one GPU (the GPU it gets is shared with other pods)."""
        return 0 < self.milli < FULL

    @property
    def total(self) -> int:
        return self.milli * self.count

    @property
    def tag(self) -> str:
        """GpuClustering's kind of GPU pod: ``share`` or ``<k>-gpu``."""
        return "share" if self.sharing else f"{self.count}-gpu"


NO_GPU = GPUAsk()


def _int(value: str, field: str) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise AskError(f"annotation {field}: {value!r} is not an integer") from None


def parse_ask(pod: PodInfo, milli_key: str, count_key: str, model_key: str,
              whole_resources: tuple[str, ...]) -> GPUAsk:
    """The pod's ask: the ``milli_key`` annotation (1..1000 per GPU) with ``count_key`` (default 1)
    and ``model_key`` ("A|B"); or else whole GPUs requested as one of ``whole_resources``."""
    ann = pod.annotations
    models = tuple(m for m in (ann.get(model_key) or "").split("|") if m)
    whole = sum(pod.requests.get(r, 0) for r in whole_resources)
    if milli_key in ann:
        milli = _int(ann[milli_key], milli_key)
        count = _int(ann[count_key], count_key) if count_key in ann else 1
        if not 0 <= milli <= FULL:
            raise AskError(f"annotation {milli_key}: {milli} is not between 0 and {FULL}")
        if count < 0:
            raise AskError(f"annotation {count_key}: {count} is negative")
        if milli == 0 or count == 0:
            if whole:
                return GPUAsk(FULL, whole, models)
            return NO_GPU
        if count > 1 and milli != FULL:
            raise AskError(f"annotation {milli_key}: {milli} with {count_key} {count}: a pod shares at most one "
                           f"GPU (several GPUs are whole: {milli_key} {FULL})")
        if whole and whole != count:
            raise AskError(f"annotation {count_key} ({count}) and the pod's whole-GPU request ({whole}) disagree")
        return GPUAsk(milli, count, models)
    if whole:
        return GPUAsk(FULL, whole, models)
    return NO_GPU


def format_indices(devices: tuple[int, ...]) -> str:
    """GPU indices as the index annotation carries them: ``"0"``, ``"2,3"``."""
    return ",".join(str(d) for d in devices)


def parse_indices(text: str | None) -> tuple[int, ...] | None:
    """``"0"`` or ``"2,3"`` (the index annotation; ``"2-3"``, the FGD simulator's form, too) as
    indices; None when absent or unreadable."""
    if not text:
        return None
    parts = [p for p in text.split(",") if p.strip()] if "," in text else text.split("-")
    if not parts or not all(p.strip().isdigit() for p in parts):
        return None
    return tuple(int(p) for p in parts)
