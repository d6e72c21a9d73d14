"""GPUShare (pysched's own, opt-in): GPUs shared device by device, and where a GPU pod goes.

A node's GPUs are tracked one by one (how much of each is free, in thousandths of a GPU, and the
node's GPU model); a pod asks for ``gpu-milli`` of ``gpu-count`` GPUs, optionally of given models
(Alibaba's GPU-share annotations, the protocol of the openb trace), or for whole GPUs
(``nvidia.com/gpu``). The plugin filters nodes by model and by k GPUs each with enough free share,
scores them with the configured policy (FGD, the fragmentation-gradient-descent score of
"Beware of Fragmentation", USENIX ATC '23, and its published baselines), chooses the GPU(s) on the
chosen node in Reserve and writes their indices to the pod before it is bound. GPUs published as
DRA devices with consumable capacity (``draDrivers``) are placed by the same policies: the pod asks
through a ResourceClaim, DynamicResources allocates, and GPUShare's ``DevicePreference`` has it
take the GPU the policy chose.

Modules: ``args`` (the arguments), ``ask`` (what a pod asks, what a node has), ``devices`` (the
per-node, per-GPU free-share table and who holds what), ``workload`` (the target workload FGD
measures fragmentation against, learned from the pods seen), ``policies`` (the scores and the
choice of GPU inside a node, NumPy over the candidate nodes), ``dra`` (DRA GPUs: the slices' devices,
a claim's ask, an allocation's shares), ``plugin`` (the extension points).
"""

from pysched.plugins.gpushare.plugin import GPUShare

__all__ = ["GPUShare"]
