"""client-go style token bucket: bursts up to ``burst``, then ``qps`` per second."""

from scheduler.kubeclient import TokenBucket


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_burst_then_rate():
    c = Clock()
    b = TokenBucket(qps=10, burst=5, clock=c)
    waits = [b.reserve() for _ in range(7)]
    assert waits[:5] == [0.0] * 5
    assert abs(waits[5] - 0.1) < 1e-9 and abs(waits[6] - 0.2) < 1e-9
    c.t += 1.0   # tokens refill at qps, capped at burst
    assert b.reserve() == 0.0


def test_zero_qps_means_unlimited():
    b = TokenBucket(qps=0, burst=1, clock=Clock())
    assert all(b.reserve() == 0.0 for _ in range(100))
