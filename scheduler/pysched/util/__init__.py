"""Small process-wide utilities with no scheduling knowledge: structured logs, safe YAML file
reading, the event loop (uvloop when available)."""
