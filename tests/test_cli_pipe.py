"""`freshet status | head` ends quietly, not with a BrokenPipeError traceback — the
real command in a child process, against the real API server, its stdout a pipe closed early."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from test_api import T0, Server

from tests.helpers_ops import make_stats, make_table

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


def test_freshet_status_finds_the_daemon_at_the_configs_listen(tmp_path: Path, monkeypatch, capsys) -> None:
    """`freshet status --config FILE` asks the daemon where the file's `listen:` puts it (the
    wildcard 0.0.0.0 asked on loopback), not at the default 127.0.0.1:9464; `--url` still wins."""
    import yaml
    from conftest import warehouse_dict

    from ops import cli
    from ops.status import daemon_url

    srv = Server(tmp_path)
    try:
        srv.backend.holder.publish(make_stats(T0, [make_table("only_here", freshness=T0 - 5)]))
        port = srv.client.base_url.port
        path = tmp_path / "freshet.yaml"
        path.write_text(yaml.safe_dump({**warehouse_dict(tmp_path), "listen": f"0.0.0.0:{port}"}))
        monkeypatch.delenv("FRESHET_URL", raising=False)
        assert cli.main(["status", "--config", str(path)]) == 0
        out = capsys.readouterr().out
        assert out.startswith("TABLE") and "only_here" in out, out
    finally:
        srv.close()
    assert daemon_url(None, str(path)) == f"http://127.0.0.1:{port}"
    assert daemon_url("http://h:1/", str(path)) == "http://h:1"
    assert daemon_url(None, None, {"FRESHET_URL": "http://e:2"}) == "http://e:2"
    assert daemon_url(None, None, {}) == "http://127.0.0.1:9464"


def test_a_command_imports_its_own_module_alone() -> None:
    """`freshet validate` (or status, sim) imports neither the daemon's web stack nor Spark: the
    parser imports only the chosen command's module (2.2 s to 1.4 s for validate here), and the
    help still lists every command."""
    probe = ("import sys; from ops.cli import main; rc = main(['validate', '--config', 'examples/netmon.yaml']); "
             "print('RESULT', rc, sorted(m for m in ('ops.daemon', 'ops.run', 'fastapi', 'pyspark', 'sim.cli') "
             "if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", probe], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.splitlines()[-1] == "RESULT 0 []", out.stdout[-2000:] + out.stderr[-2000:]
    helped = subprocess.run([sys.executable, "-m", "ops.cli", "--help"], env=env, cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert helped.returncode == 0 and all(c in helped.stdout for c in ("validate", "run", "status", "sim", "refresh"))
