"""The server-wide training line (core.pool.slots): capacity, first come first served, one slot per
session, nothing that expires, and ATTENTION_LAB_MAX_TRAININGS."""
import threading
import time

import pytest

from core.pool.slots import DEFAULT_CAPACITY, ENV_VAR, TrainingSlots, capacity_from_env


def own(holder):
    """Each holder is its own session."""
    return [holder]


def test_capacity_is_enforced_and_the_line_keeps_its_order():
    slots = TrainingSlots(2)
    for holder in "abcd":
        slots.join(holder)
    assert slots.admit(own) == ["a", "b"]
    assert slots.running() == 2 and slots.waiting() == 2
    assert (slots.position("a"), slots.position("c"), slots.position("d")) == (0, 1, 2)
    assert slots.admit(own) == []
    slots.release("b")
    assert slots.admit(own) == ["c"] and slots.position("d") == 1
    slots.join("c")  # joining again changes nothing
    assert slots.holds("c") and slots.waiting() == 1


def test_a_session_holds_one_slot_and_its_second_holder_keeps_its_place():
    sessions = {"a1": ["alice"], "a2": ["alice"], "b": ["bob"]}
    slots = TrainingSlots(2)
    for holder in ("a1", "a2", "b"):
        slots.join(holder)
    assert slots.admit(sessions.get) == ["a1", "b"]
    slots.release("b")
    assert slots.admit(sessions.get) == [] and slots.blocked("a2", sessions.get)
    assert slots.position("a2") == 1
    slots.release("a1")
    assert not slots.blocked("a2", sessions.get) and slots.admit(sessions.get) == ["a2"]


def test_a_shared_holder_takes_the_slot_of_a_session_that_has_none():
    sessions = {"a1": ["alice"], "shared": ["alice", "bob"]}
    slots = TrainingSlots(2)
    slots.join("a1")
    slots.join("shared")
    assert slots.admit(sessions.get) == ["a1", "shared"]
    assert slots.session_of("shared") == "bob"
    slots.hand_over("shared", "carol")
    assert slots.session_of("shared") == "carol"


def test_nothing_expires():
    slots = TrainingSlots(1)
    slots.join("a")
    slots.join("b")
    slots.admit(own)
    for _ in range(3):  # no renewal is needed: a slot is held until it is released
        assert slots.admit(own) == [] and slots.holds("a") and slots.position("b") == 1


def test_release_of_unknown_holder_is_harmless_and_capacity_zero_never_grants():
    slots = TrainingSlots(0)
    slots.release("nobody")
    slots.join("a")
    assert slots.admit(own) == [] and slots.position("a") == 1 and not slots.blocked("a", own)


def test_bad_arguments_raise():
    with pytest.raises(ValueError):
        TrainingSlots(-1)


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


def test_many_threads_never_exceed_capacity_and_every_holder_gets_in():
    """12 threads join, wait to be admitted, hold and release, 20 times each, calling the slots under one
    lock as RunPool does (the class takes none)."""
    slots = TrainingSlots(3)
    inside, peak, lock, guard = [0], [0], threading.Lock(), threading.Lock()
    barrier = threading.Barrier(12)

    def holder_thread(i):
        barrier.wait()
        for n in range(20):
            name = f"s{i}-{n}"
            with guard:
                slots.join(name)
            deadline = time.monotonic() + 30
            while True:
                with guard:
                    slots.admit(own)
                    if slots.holds(name):
                        break
                assert time.monotonic() < deadline, f"{name} was never admitted"
                time.sleep(0.0005)
            with lock:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            time.sleep(0.0002)  # hold the slot briefly so holders overlap
            with lock:
                inside[0] -= 1
            with guard:
                slots.release(name)

    threads = [threading.Thread(target=holder_thread, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert 1 <= peak[0] <= 3
    assert slots.running() == 0 and slots.waiting() == 0
