"""API types: the KubeSchedulerConfiguration (``config``) and the Kubernetes object model the
scheduler reads (``core``: selectors, taints, quantities, resources, name rules, defaulting).
No I/O and no scheduling logic here."""
