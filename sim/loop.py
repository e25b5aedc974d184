"""SimPy's event loop with its step inlined (§4.1: the simulator handles a million events per
paper data point). `run_until(env, stop)` is `env.run(until=stop)`, `run_to(env, at)` is
`env.run(until=at)`: the same events, processed in the same order — SimPy's queue of (time,
priority, event id, event) — each event's callbacks called as `Environment.step` calls them, and
a failed event raised as it raises it. What they save is the call of `step` per event and its
`try` around the callbacks for `StopSimulation`: the stop event is seen by its identity, not by
an exception — and left as SimPy leaves it, scheduled again before every other event.

They read SimPy 4's `Environment` internals (`_queue`, `_now`, `_eid`), pinned by
pyproject.toml's `simpy>=4.1,<5`.
"""

from __future__ import annotations

from heapq import heappop, heappush

import simpy
from simpy.events import URGENT, EventPriority

__all__ = ["run_to", "run_until"]

_STOPPED = EventPriority(-1)  # where SimPy puts the stop event again (Environment.step)


def run_until(env: simpy.Environment, stop: simpy.Event) -> None:
    """`env.run(until=stop)`: process events until `stop` has been processed. RuntimeError, as
    SimPy's, if none is left before it."""
    if stop.callbacks is None:  # processed already
        return
    queue = env._queue
    while True:
        if not queue:
            raise RuntimeError(f'No scheduled events left but "until" event was not triggered: {stop}')
        env._now, _, _, event = heappop(queue)
        callbacks, event.callbacks = event.callbacks, None
        for callback in callbacks:
            callback(event)
        if event is stop:
            # SimPy stops by an exception from the last of its callbacks, and schedules the event
            # again, before every other, with the callbacks left after it (none): so here
            stop.callbacks = []
            heappush(queue, (env._now, _STOPPED, next(env._eid), stop))
            return
        if not event._ok and not hasattr(event, "_defused"):
            exc = type(event._value)(*event._value.args)  # (as Environment.step: a copy, caused by the failure)
            exc.__cause__ = event._value
            raise exc


def run_to(env: simpy.Environment, at: float) -> None:
    """`env.run(until=at)`: an event at `at` scheduled before every regular one there (URGENT, as
    SimPy's), then `run_until` it. ValueError, as SimPy's, unless `at` is after now."""
    at = at if isinstance(at, int) else float(at)
    if at <= env.now:
        raise ValueError(f"until ({at}) must be greater than the current simulation time")
    until = simpy.Event(env)
    until._ok = True
    until._value = None
    env.schedule(until, URGENT, at - env.now)
    run_until(env, until)

