"""The Kubernetes object model as the scheduler needs it: selectors and requirements, taints and
tolerations (``model``), quantities (``quantity``), effective pod requests (``resources``),
API name rules (``names``), API-server defaulting for files (``defaults``), field-type checks of
untrusted objects (``objectshape``) and API errors (``errors``)."""
