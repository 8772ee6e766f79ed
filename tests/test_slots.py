"""The server-wide training limiter (core/slots.py): capacity, leases, expiry, order, threads."""
import threading
import time

import pytest

from core.pool.slots import DEFAULT_CAPACITY, ENV_VAR, TrainingSlots, capacity_from_env


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_capacity_is_enforced_and_waiters_see_the_running_count():
    pool = TrainingSlots(2, clock=FakeClock())
    assert pool.request("a").granted and pool.request("b").granted
    status = pool.request("c")
    assert not status.granted
    assert status.running == 2 and status.position == 1
    assert "waiting for a free training slot: 2 running" in status.message()
    assert pool.running() == 2 and pool.waiting() == 1


def test_release_frees_the_slot_for_the_first_in_line():
    pool = TrainingSlots(1, clock=FakeClock())
    assert pool.request("a").granted
    assert pool.request("b").position == 1
    assert pool.request("c").position == 2
    pool.release("a")
    # c asks first but b joined earlier: b keeps its turn
    assert not pool.request("c").granted
    assert pool.request("b").granted
    assert not pool.request("c").granted
    pool.release("b")
    assert pool.request("c").granted


def test_unrenewed_lease_expires_and_renewed_lease_does_not():
    clock = FakeClock()
    pool = TrainingSlots(1, lease_seconds=15, clock=clock)
    assert pool.request("a").granted
    for _ in range(5):  # renewing every 10 s keeps the slot for 50 s
        clock.now += 10
        assert pool.request("a").granted
        assert not pool.request("b").granted
    clock.now += 16  # a closed its tab: no renewal for 16 s
    assert pool.request("b").granted
    assert not pool.holds("a")
    assert not pool.request("a").granted  # a must now wait behind b


def test_a_waiter_that_stops_asking_loses_its_place():
    clock = FakeClock()
    pool = TrainingSlots(1, lease_seconds=15, clock=clock)
    pool.request("a")
    assert pool.request("b").position == 1
    clock.now += 10
    pool.request("a")
    assert pool.request("c").position == 2
    clock.now += 10  # b last asked 20 s ago; c 10 s ago
    pool.request("a")
    assert pool.request("c").position == 1


def test_release_of_unknown_holder_is_harmless_and_capacity_zero_never_grants():
    pool = TrainingSlots(0, clock=FakeClock())
    pool.release("nobody")
    status = pool.request("a")
    assert not status.granted and "switched off" in status.message()


def test_bad_arguments_raise():
    with pytest.raises(ValueError):
        TrainingSlots(-1)
    with pytest.raises(ValueError):
        TrainingSlots(1, lease_seconds=0)


@pytest.mark.parametrize("raw, expected, problem", [
    (None, DEFAULT_CAPACITY, False), ("", DEFAULT_CAPACITY, False), ("3", 3, False), (" 0 ", 0, False),
    ("two", DEFAULT_CAPACITY, True), ("-1", DEFAULT_CAPACITY, True), ("1.5", DEFAULT_CAPACITY, True),
])
def test_capacity_from_env(raw, expected, problem):
    env = {} if raw is None else {ENV_VAR: raw}
    capacity, why = capacity_from_env(env)
    assert capacity == expected
    assert (why is not None) == problem
    if problem:
        assert ENV_VAR in why


def test_many_threads_never_exceed_capacity():
    pool = TrainingSlots(3)
    inside, peak, lock = [0], [0], threading.Lock()
    barrier = threading.Barrier(12)

    def worker(i):
        barrier.wait()
        for _ in range(50):
            if pool.request(f"s{i}").granted:
                with lock:
                    inside[0] += 1
                    peak[0] = max(peak[0], inside[0])
                time.sleep(0.0002)  # hold the slot briefly so holders overlap
                with lock:
                    inside[0] -= 1
                pool.release(f"s{i}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 1 <= peak[0] <= 3
    assert pool.running() == 0
