"""Issue 19 (13): `freshet status | head` ends quietly, not with a BrokenPipeError traceback — the
real command in a child process, against the real API server, its stdout a pipe closed early."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from test_api import T0, Server

from ops.testing import make_stats, make_table

ROOT = Path(__file__).resolve().parents[1]


def test_freshet_status_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    srv = Server(tmp_path)
    try:
        # far more than a pipe holds (64 KiB): the command is still writing when the reader leaves
        srv.backend.holder.publish(make_stats(T0, [make_table(f"table_{i:05d}", freshness=T0 - i)
                                                   for i in range(4000)]))
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        child = subprocess.Popen([sys.executable, "-m", "ops.cli", "status", "--url", str(srv.client.base_url)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
        assert child.stdout is not None and child.stderr is not None
        first = child.stdout.readline()  # what `head -1` reads before it exits
        child.stdout.close()
        err = child.stderr.read().decode()
        code = child.wait(timeout=60)
    finally:
        srv.close()
    assert first.startswith(b"TABLE"), first
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err, err
    assert code == 141, (code, err)
