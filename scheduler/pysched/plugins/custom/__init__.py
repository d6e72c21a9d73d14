"""The brief's own plugins, not in kube-scheduler: GPU, AZSpread, CapacityType, InstanceType.
Opt-in per profile like any out-of-tree plugin would be."""
