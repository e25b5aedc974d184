"""The simulator's event loop (sim.loop: SimPy's step inlined) processes the events SimPy's own
`env.run` does, in the same order, and leaves the environment as it leaves it. Real SimPy."""

from __future__ import annotations

import pytest
import simpy

from sim.loop import run_to, run_until


def _world(env: simpy.Environment, log: list) -> simpy.Event:
    """Timeouts at equal times (ties by event id), a process that yields and fails nothing, an
    event succeeded from a callback at the same time, and a stop event succeeded at t = 5."""
    stop = env.event()

    def note(name):
        return lambda ev: log.append((env.now, name))

    for i, dt in enumerate((3.0, 1.0, 3.0, 2.0, 1.0)):
        env.timeout(dt).callbacks.append(note(f"timeout{i}"))

    def proc():
        yield env.timeout(1.0)
        log.append((env.now, "proc"))
        env.event().succeed().callbacks.append(note("chained"))
        yield env.timeout(4.0)
        log.append((env.now, "proc done"))
        stop.succeed()
        env.timeout(0.0).callbacks.append(note("after stop, same time"))

    env.process(proc())
    env.timeout(7.0).callbacks.append(note("late"))
    return stop


@pytest.mark.parametrize("until", ["event", 2.0, 3.0, 6.5])
def test_the_inlined_loop_processes_what_simpy_does_in_its_order(until):
    runs = []
    for inlined in (False, True):
        env, log = simpy.Environment(), []
        stop = _world(env, log)
        target = stop if until == "event" else until
        if inlined:
            run_until(env, target) if until == "event" else run_to(env, target)
        else:
            env.run(until=target)
        runs.append((log, env.now, len(env._queue)))
    assert runs[0] == runs[1]
    assert runs[0][0]  # (something happened)


def test_the_inlined_loop_raises_as_simpy_does():
    for inlined in (False, True):
        env = simpy.Environment()
        stop = env.event()
        env.timeout(1.0)
        with pytest.raises(RuntimeError, match="No scheduled events left"):
            run_until(env, stop) if inlined else env.run(until=stop)
        with pytest.raises(ValueError, match="must be greater"):
            run_to(env, env.now) if inlined else env.run(until=env.now)

        def failing(env=env):
            yield env.timeout(1.0)
            raise KeyError("boom")

        env.process(failing())
        with pytest.raises(KeyError, match="boom"):
            run_to(env, 10.0) if inlined else env.run(until=10.0)
