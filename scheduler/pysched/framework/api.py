"""The Kubernetes object model as plugins see it: re-exported from ``pysched.apis.core`` so that a
plugin imports only ``pysched.framework`` (and in-tree plugins ``pysched.plugins.helper``).

Selectors and requirements (``LabelSelector``, ``NodeSelector``, ``Requirement``...), taints and
tolerations, resource names and quantities, object name rules, and the API's error type.
"""

from pysched.apis.config.types import ConfigError
from pysched.apis.core.errors import ApiError
from pysched.apis.core.model import (
                                     NO_EXECUTE,
                                     NO_SCHEDULE,
                                     PREFER_NO_SCHEDULE,
                                     FieldRequirement,
                                     LabelSelector,
                                     NodeSelector,
                                     NodeSelectorTerm,
                                     ObjectError,
                                     Requirement,
                                     Taint,
                                     Toleration,
                                     find_untolerated_taint,
                                     parse_label_selector,
                                     parse_node_selector,
                                     parse_preferred_terms,
                                     tolerates_taint,
)
from pysched.apis.core.names import qualified_name_problem
from pysched.apis.core.quantity import value as quantity_value
from pysched.apis.core.resources import CPU, MEMORY, is_extended_resource, is_scalar

__all__ = [
    "ApiError", "CPU", "ConfigError", "FieldRequirement", "LabelSelector", "MEMORY", "NO_EXECUTE", "NO_SCHEDULE",
    "NodeSelector", "NodeSelectorTerm", "ObjectError", "PREFER_NO_SCHEDULE", "Requirement", "Taint", "Toleration",
    "find_untolerated_taint", "is_extended_resource", "is_scalar", "parse_label_selector", "parse_node_selector",
    "parse_preferred_terms", "qualified_name_problem", "quantity_value", "tolerates_taint",
]

# Appended (issue 15, NodeAffinity's typed args): a weighted preferred node-selector term.
from pysched.apis.core.model import PreferredTerm  # noqa: E402

__all__ += ["PreferredTerm"]

# Appended (issue 16, DynamicResourcesArgs): metav1.Duration fields in plugin args.
from pysched.apis.config.fields import parse_duration  # noqa: E402

__all__ += ["parse_duration"]

# Appended (issue 16, NodeAffinity's preferred-term errors): upstream's error aggregation.
from pysched.apis.core.model import aggregate_errors  # noqa: E402

__all__ += ["aggregate_errors"]

# Appended (issue 17, Coscheduling's minResources): a resource quantity in the scheduler's units.
from pysched.apis.core.quantity import format_resource, resource_value  # noqa: E402

__all__ += ["format_resource", "resource_value"]

# Appended (issue 20, DRA device capacity in CEL): a quantity's exact value.
from pysched.apis.core.quantity import QuantityError, parse_quantity  # noqa: E402

__all__ += ["QuantityError", "parse_quantity"]
