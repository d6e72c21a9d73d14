"""Serving: the secure port (health, metrics, configz, debug/explain) and its delegated
authentication and authorization (TokenReview, client certificates, SubjectAccessReview)."""

# Where the secure port's self-signed serving certificate is written without --cert-dir
# (``secure.self_signed``); ``pysched explain`` trusts it by default for a scheduler on this host.
DEFAULT_CERT_DIR = "/tmp/pysched-certs"
SELF_SIGNED_NAME = "pysched"   # <name>.crt and <name>.key
