"""The engine that runs a profile's plugins: the ``Framework`` (every extension point in order,
errors wrapped in kube-scheduler's words, per-cycle traces and metrics) and the plugin
``Registry`` (in-tree plugins, entry points, ``--plugin-module``).

Upstream keeps the same split: ``pkg/scheduler/framework`` is the API a plugin is written against
(``pysched.framework`` here), ``pkg/scheduler/framework/runtime`` the code that runs it.
"""
