"""client-go style token bucket: bursts up to ``burst``, then ``qps`` per second."""

from pysched.client.rest import TokenBucket


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


async def test_a_wait_beyond_the_request_deadline_fails_at_once_and_gives_the_token_back():
    import asyncio

    import pytest

    c = Clock()
    b = TokenBucket(qps=10, burst=1, clock=c)
    await b.acquire(max_wait=0.0)          # the burst token
    with pytest.raises(asyncio.TimeoutError, match="rate limiter"):
        await b.acquire(max_wait=0.05)     # the next token is 0.1s away
    c.t += 0.1
    assert b.reserve() == 0.0              # the refused request did not spend it
