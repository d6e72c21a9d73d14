"""The scheduling queue: activeQ, backoffQ, the unschedulable pool and gated pods."""
