"""DynamicResources (Dynamic Resource Allocation) and what only it uses: the plugin
(``dynamic_resources``), the structured allocator (``allocator``), the devices already allocated
(``allocated``), device binding conditions (``binding``) and the device-selector CEL environment
(``cel``) with its two engines - ``cel_go`` runs kube-scheduler's own CEL code in ``pysched-cel``,
``cel_builtin`` the built-in subset - and the error both raise (``celerrors``)."""

from pysched.plugins.dynamic_resources.dynamic_resources import DynamicResources, DynamicResourcesArgs

__all__ = ["DynamicResources", "DynamicResourcesArgs"]
