"""The recovery gate: a worker judges others by heartbeats only after its own went through
for a whole timeout, with no database failure and no late heartbeat in between."""

from django_watchdog.engine.gate import RecoveryGate


class Clock:
    def __init__(self):
        self.mono = 100.0

    def monotonic(self):
        return self.mono

    def now(self):  # pragma: no cover - the gate reads monotonic time only
        raise AssertionError


def beating(gate, clock, seconds, every=0.5):
    """Heartbeats every ``every`` seconds for ``seconds``."""
    for _ in range(round(seconds / every)):
        clock.mono += every
        gate.beat()


def make(**extra):
    clock = Clock()
    return RecoveryGate(clock, timeout=2.0, stall=1.0, **extra), clock


def test_closed_until_own_heartbeats_went_through_for_a_whole_timeout():
    gate, clock = make()
    assert gate.open_since() is None
    gate.beat()
    beating(gate, clock, 1.5)
    assert gate.open_since() is None
    beating(gate, clock, 0.5)
    assert gate.open_since() == 100.0


def test_a_database_failure_closes_it_for_another_whole_timeout():
    gate, clock = make()
    gate.beat()
    beating(gate, clock, 2.0)
    assert gate.open_since() is not None
    gate.failed()
    assert gate.open_since() is None
    beating(gate, clock, 1.5)  # the first beat after the failure, at 102.5, starts a run
    assert gate.open_since() is None, "back for less than the timeout"
    beating(gate, clock, 0.5)
    assert gate.open_since() is None
    beating(gate, clock, 0.5)
    assert gate.open_since() == 102.5


def test_a_late_heartbeat_closes_it_even_without_a_failure():
    """A write held back (an SQLite lock, a stalled process) shows as a late heartbeat."""
    gate, clock = make()
    gate.beat()
    beating(gate, clock, 2.0)
    clock.mono += 1.01  # the next beat is late: no beat for longer than ``stall``
    assert gate.open_since() is None, "closed while our own heartbeat is overdue"
    gate.beat()
    assert gate.open_since() is None, "the late beat starts a new run"
    beating(gate, clock, 2.0)
    assert gate.open_since() == 103.01


def test_still_open_fails_when_the_run_was_broken_in_between():
    gate, clock = make()
    gate.beat()
    beating(gate, clock, 2.0)
    since = gate.open_since()
    assert since is not None and gate.still_open(since)
    gate.failed()
    beating(gate, clock, 3.0)
    assert gate.open_since() is not None
    assert not gate.still_open(since), "a new run, after a failure, is not the same run"


def test_a_success_after_a_failure_asks_for_a_heartbeat_at_once():
    asked = []
    gate, clock = make(on_reconnect=lambda: asked.append(clock.mono))
    gate.beat()
    gate.succeeded()
    assert asked == []
    gate.failed()
    clock.mono += 1
    gate.succeeded()
    gate.succeeded()
    assert asked == [101.0, 101.0]
    gate.beat()
    gate.succeeded()
    assert asked == [101.0, 101.0], "the heartbeat went out: no more asking"
