"""SparkLink (warehouse/lake/session.py): the daemon's line to a Spark Connect server, without a
server — which errors mean "the server is gone", and how losses are counted and ended."""

from __future__ import annotations

import grpc
import pytest
from pyspark.errors.exceptions.connect import AnalysisException, SparkConnectGrpcException

import warehouse.lake.session as session_mod
from warehouse.config import SparkConfig
from warehouse.lake.session import SparkLink, connection_lost


def unavailable() -> SparkConnectGrpcException:
    return SparkConnectGrpcException(
        "<_MultiThreadedRendezvous of RPC that terminated with:\n\tstatus = StatusCode.UNAVAILABLE\n"
        '\tdetails = "failed to connect to all addresses; last error: Connection refused"\n>',
        grpc_status_code=grpc.StatusCode.UNAVAILABLE)


def test_connection_lost_tells_a_gone_server_from_a_bad_job():
    assert connection_lost(unavailable())
    assert connection_lost(SparkConnectGrpcException("[INVALID_HANDLE.SESSION_CHANGED] The existing Spark "
                                                     "server driver instance has restarted."))
    try:
        try:
            raise unavailable()
        except SparkConnectGrpcException as e:
            raise RuntimeError("while writing") from e
    except RuntimeError as wrapped:
        assert connection_lost(wrapped)  # found through the cause
    assert not connection_lost(AnalysisException("[UNRESOLVED_COLUMN] no_such_column"))
    assert not connection_lost(RuntimeError("UNAVAILABLE"))  # not from the Connect client
    assert not connection_lost(ValueError("x"))


class FakeSession:
    def __init__(self, n: int) -> None:
        self.n = n
        self.stopped = False
        self.conf = {"spark.sql.session.timeZone": "UTC"}  # check() reads one setting

    def stop(self) -> None:
        self.stopped = True


@pytest.fixture
def link(monkeypatch):
    made: list[FakeSession] = []
    up = {"ok": True}
    calls = {"n": 0}

    def connect(cfg):
        calls["n"] += 1
        if not up["ok"]:
            raise unavailable()
        made.append(FakeSession(len(made)))
        return made[-1]

    monkeypatch.setattr(session_mod, "_connect", connect)
    monkeypatch.setattr(session_mod, "_session", None)
    lk = SparkLink(SparkConfig(remote="sc://127.0.0.1:1"))
    lk.reconnect_every = 0.0
    changes: list[tuple[bool, str | None]] = []
    lk.on_change(lambda ok, err: changes.append((ok, err)))
    return lk, made, up, changes, calls


def test_while_lost_one_reconnection_attempt_at_a_time(link):
    lk, made, up, changes, calls = link
    gen = (lk.session(), lk.generation)[1]
    up["ok"] = False
    lk.lost(unavailable(), gen)
    lk.reconnect_every = 60.0
    with pytest.raises(SparkConnectGrpcException):
        lk.session()  # the first caller tries
    n = calls["n"]
    for _ in range(3):  # the next ones fail at once (a job fails, the watcher retries later)
        with pytest.raises(Exception, match="unreachable") as err:
            lk.session()
        assert lk.lost(err.value, gen)
    assert calls["n"] == n and lk.losses == 1


def test_a_lost_server_is_counted_once_and_a_new_session_ends_the_outage(link):
    lk, made, up, changes, _ = link
    first = lk.session()
    assert lk.session() is first and lk.error is None and lk.losses == 0
    gen1 = lk.generation
    # the server dies: two tracks fail on the same session; one loss, one notification
    up["ok"] = False
    assert lk.lost(unavailable(), gen1)
    assert lk.lost(unavailable(), gen1)
    assert lk.losses == 1 and "unreachable" in lk.error and changes == [(False, lk.error)]
    assert lk.current() is None
    # while it is down, reconnecting fails (the job fails and backs off) and is no new loss
    with pytest.raises(SparkConnectGrpcException):
        lk.session()
    assert not lk.check() and lk.losses == 1
    # it is back: a new session, the outage ends
    up["ok"] = True
    assert lk.check()
    second = lk.current()
    assert second is not None and second is not first and lk.error is None
    assert changes[-1] == (True, None)
    # a late failure of a job that started before the reconnection (on the old session, or
    # while there was none) neither drops the new session nor counts
    assert lk.generation == gen1 + 1
    assert lk.lost(unavailable(), gen1)
    assert lk.current() is second and lk.losses == 1 and lk.error is None
    # a bad job is not a lost server
    assert not lk.lost(AnalysisException("[UNRESOLVED_COLUMN] x"), lk.generation)
    assert lk.current() is second


def test_a_local_master_is_never_lost(monkeypatch):
    lk = SparkLink(SparkConfig(master="local[1]"))
    assert not lk.remote and lk.check()
    assert not lk.lost(unavailable())
