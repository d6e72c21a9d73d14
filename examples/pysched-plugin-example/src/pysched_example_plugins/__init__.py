"""Example out-of-tree plugins for pysched.

Installed, the package registers its plugins through the ``pysched.plugins`` entry-point group
(see ``pyproject.toml``), so ``pysched`` finds them with no flag. Without installing it, the
same plugins load with ``pysched --plugin-module pysched_example_plugins``, which imports this
module and registers the classes in ``PLUGINS``.
"""

from pysched_example_plugins.team_nodes import TeamNodes, TeamNodesArgs

PLUGINS = [TeamNodes]

__all__ = ["PLUGINS", "TeamNodes", "TeamNodesArgs"]
