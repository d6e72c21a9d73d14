"""The Kubernetes object model as plugins see it: re-exported from ``pysched.apis`` so that a plugin
imports only ``pysched.framework`` and ``pysched.framework.api``.

- selectors and requirements: ``LabelSelector``, ``NodeSelector``, ``NodeSelectorTerm``,
  ``PreferredTerm``, ``Requirement``, ``FieldRequirement`` and their parsers;
- taints and tolerations: ``Taint``, ``Toleration``, the effects, ``tolerates_taint``,
  ``find_untolerated_taint``;
- resources and quantities: ``CPU``, ``MEMORY``, ``is_extended_resource``, ``is_scalar``,
  ``parse_quantity``, ``quantity_value``, ``resource_value``, ``format_resource``;
- names and durations: ``qualified_name_problem``, ``parse_duration`` (``metav1.Duration`` in args);
- errors: ``ConfigError`` (a plugin's ``Args.validate`` raises it), ``ObjectError`` and
  ``aggregate_errors`` (an invalid object), ``go_quote`` (Go's ``%q``), ``QuantityError``,
  ``ApiError`` (an API call failed).
"""

from pysched.apis.config.fields import parse_duration
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
                                     PreferredTerm,
                                     Requirement,
                                     Taint,
                                     Toleration,
                                     aggregate_errors,
                                     find_untolerated_taint,
                                     go_quote,
                                     parse_label_selector,
                                     parse_node_selector,
                                     parse_preferred_terms,
                                     tolerates_taint,
)
from pysched.apis.core.names import qualified_name_problem
from pysched.apis.core.quantity import QuantityError, format_resource, parse_quantity, resource_value
from pysched.apis.core.quantity import value as quantity_value
from pysched.apis.core.resources import CPU, MEMORY, is_extended_resource, is_scalar

__all__ = [
    "ApiError", "CPU", "ConfigError", "FieldRequirement", "LabelSelector", "MEMORY", "NO_EXECUTE", "NO_SCHEDULE",
    "NodeSelector", "NodeSelectorTerm", "ObjectError", "PREFER_NO_SCHEDULE", "PreferredTerm", "QuantityError",
    "Requirement", "Taint", "Toleration", "aggregate_errors", "find_untolerated_taint", "format_resource",
    "go_quote", "is_extended_resource", "is_scalar", "parse_duration", "parse_label_selector", "parse_node_selector",
    "parse_preferred_terms", "parse_quantity", "qualified_name_problem", "quantity_value", "resource_value",
    "tolerates_taint",
]
