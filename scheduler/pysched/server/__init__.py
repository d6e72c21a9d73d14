"""Serving: the secure port (health, metrics, configz, debug/explain) and its delegated
authentication and authorization (TokenReview, client certificates, SubjectAccessReview)."""
