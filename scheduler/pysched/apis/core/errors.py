"""API errors: what a failed request to the Kubernetes API means (apimachinery's ``api/errors``)."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An API request failed: ``status`` is the HTTP status (0: no answer from a server), ``reason``
    and ``message`` the API's ``Status``. ``local`` marks a request this process refused to send
    (the write fence): nothing reached the API server."""

    local = False

    def __init__(self, status: int, reason: str = "", message: str = "", body: Any = None):
        self.status = status
        self.reason = reason
        self.message = message or reason or f"HTTP {status}"
        self.body = body
        super().__init__(f"{status} {reason}: {self.message}")

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def not_found(self) -> bool:
        return self.status == 404
