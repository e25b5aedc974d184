"""The hot events keep every dataclass contract with their faster `__init__` (warehouse.events._quick_init):
keyword-only fields and defaults as declared, validation in `__post_init__`, immutability, equality,
hashing, `replace` and pickling — compared with what `dataclass` itself generates for the same fields."""

from __future__ import annotations

import dataclasses
import inspect
import math
import pickle

import pytest

from warehouse.errors import SchedulerMisuse
from warehouse.events import JobFinished, PartitionArrived, StartJob

HOT = (PartitionArrived, JobFinished, StartJob)
SAMPLE = {
    PartitionArrived: {"stream": "s", "partition_id": "s-1", "start": 1.0, "end": 2.0},
    JobFinished: {"job_id": 3, "duration": 1.5},
    StartJob: {"job_id": 3, "table": "t", "track": 0, "kind": "base", "start": 1.0, "end": 2.0,
               "new_freshness": 2.0, "new_safe_freshness": 2.0},
}


def _plain(cls: type) -> type:
    """The same fields in a dataclass with the generated `__init__` (the reference)."""
    fields = [(f.name, f.type, dataclasses.field(default=f.default, kw_only=True)) if f.default is not dataclasses.MISSING
              else (f.name, f.type, dataclasses.field(kw_only=True)) for f in dataclasses.fields(cls)]
    return dataclasses.make_dataclass(f"Plain{cls.__name__}", fields, frozen=True, slots=True)


@pytest.mark.parametrize("cls", HOT)
def test_signature_defaults_and_values_as_the_generated_init(cls: type) -> None:
    ref = _plain(cls)
    assert [(p.name, p.kind, p.default) for p in inspect.signature(cls).parameters.values()] == \
        [(p.name, p.kind, p.default) for p in inspect.signature(ref).parameters.values()]
    ev, want = cls(**SAMPLE[cls]), ref(**SAMPLE[cls])
    assert dataclasses.astuple(ev) == dataclasses.astuple(want)
    with pytest.raises(TypeError):
        cls(*SAMPLE[cls].values())  # keyword-only
    with pytest.raises(TypeError):
        cls(**{k: v for k, v in SAMPLE[cls].items() if k != "job_id" and k != "stream"})  # a required field missing


@pytest.mark.parametrize("cls", HOT)
def test_frozen_equal_hashable_replaceable_picklable(cls: type) -> None:
    ev = cls(**SAMPLE[cls])
    name = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(ev, name, getattr(ev, name))
    twin = cls(**SAMPLE[cls])
    assert ev == twin and hash(ev) == hash(twin)
    assert pickle.loads(pickle.dumps(ev)) == ev
    other = dataclasses.replace(ev, **{name: "x" if isinstance(getattr(ev, name), str) else 99})
    assert other != ev and getattr(other, name) in ("x", 99)


def test_validation_still_runs() -> None:
    with pytest.raises(SchedulerMisuse, match="end <= start"):
        PartitionArrived(stream="s", partition_id="p", start=2.0, end=1.0)
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(SchedulerMisuse, match="finite"):
            PartitionArrived(stream="s", partition_id="p", start=bad, end=5.0)
        with pytest.raises(SchedulerMisuse, match="finite"):
            JobFinished(job_id=1, duration=bad)
    assert type(PartitionArrived(stream="s", partition_id="p", start=1, end=2).start) is float  # ints made floats
    with pytest.raises(SchedulerMisuse, match="negative duration"):
        JobFinished(job_id=1, duration=-1.0)


@pytest.mark.parametrize("cls", HOT)
def test_build_is_the_class_called_with_keywords(cls: type) -> None:
    """`cls.build(**fields)` (a plain function call, the job path's) makes the same object, defaults,
    validation and all; keywords only, as the class."""
    ev = cls.build(**SAMPLE[cls])
    assert type(ev) is cls and ev == cls(**SAMPLE[cls]) and dataclasses.astuple(ev) == dataclasses.astuple(cls(**SAMPLE[cls]))
    with pytest.raises(TypeError):
        cls.build(*SAMPLE[cls].values())
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(ev, dataclasses.fields(cls)[0].name, None)


def test_build_validates_as_the_class() -> None:
    with pytest.raises(SchedulerMisuse, match="negative duration"):
        JobFinished.build(job_id=1, duration=-1.0)
    with pytest.raises(SchedulerMisuse, match="finite"):
        JobFinished.build(job_id=1, duration=math.inf)
    with pytest.raises(SchedulerMisuse, match="end <= start"):
        PartitionArrived.build(stream="s", partition_id="p", start=2.0, end=1.0)
    assert type(PartitionArrived.build(stream="s", partition_id="p", start=1, end=2).start) is float
