"""Progress of long work (sim.progress): a bar with an ETA on a terminal — a real
pseudo-terminal for `freshet sim experiment` — and plain lines, no bar, when stderr is a pipe."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

from sim.progress import ProgressReporter, track

ROOT = Path(__file__).resolve().parents[1]
BAR = "━"  # rich's bar glyph
EXPERIMENT = [sys.executable, "-m", "ops.cli", "sim", "experiment", "fig5-basic", "--events", "300",
              "--seeds", "1", "--workers", "1"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE",
                                                              "NO_COLOR", "TERM", "COLUMNS")}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def test_a_terminal_gets_a_bar_with_an_eta():
    out = io.StringIO()
    with ProgressReporter("exp", file=out, force_terminal=True) as p:
        p.begin(4)
        for i in range(1, 5):
            p(f"[{i}/4] step {i} [policy]")  # brackets are text, not rich markup
        p("a plain line")
    text = out.getvalue()
    assert BAR in text and "ETA" in text and "4/4" in text and "step 4 [policy]" in text
    assert "a plain line" in text


def test_not_a_terminal_gets_the_lines_and_no_bar():
    out = io.StringIO()
    with ProgressReporter("exp", file=out) as p:
        p.begin(2)
        p("[1/2] one")
        p("[2/2] two")
    assert out.getvalue() == "[1/2] one\n[2/2] two\n"
    out = io.StringIO()
    assert list(track(range(3), "t", what="item {item}", file=out)) == [0, 1, 2]
    assert out.getvalue() == "[1/3] item 0\n[2/3] item 1\n[3/3] item 2\n"


def test_sim_experiment_piped_has_no_bar(tmp_path):
    r = subprocess.run([*EXPERIMENT, "--out", str(tmp_path)], cwd=ROOT, env=_env(TERM="xterm-256color"),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "[40/40] fig5-basic" in r.stderr  # 32 runs, then the lower bound (sim.bound) at each of the 8 U
    assert BAR not in r.stderr and "\x1b" not in r.stderr and "\r" not in r.stderr
    assert "claim" in r.stdout


def test_sim_experiment_on_a_terminal_draws_a_bar_with_an_eta(tmp_path):
    """stderr is a real pseudo-terminal: rich draws and redraws the bar in place."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([*EXPERIMENT, "--out", str(tmp_path)], cwd=ROOT,
                            env=_env(TERM="xterm-256color", COLUMNS="160"),
                            stdout=subprocess.PIPE, stderr=slave, text=True)
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            proc.kill()
            raise AssertionError("no output from the experiment for 120 s")
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    screen = b"".join(chunks).decode(errors="replace")
    assert BAR in screen and "ETA" in screen and "40/40" in screen  # 32 runs and 8 lower bounds
    assert "[1/40]" not in screen  # the bar, not the plain lines
    assert "claim" in out


# ------------------------------------------------------------------------------ freshet status --watch
class _Tables:
    """A loopback HTTP server answering /v1/tables with real `table_view` rows; each answer is
    one second staler than the one before, so every view differs."""

    def __init__(self) -> None:
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from ops.api import table_view
        from tests.helpers_ops import make_table

        self.asked = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                outer.asked += 1
                t0 = 1_700_000_000.0
                rows = [table_view(make_table("cpu_raw", freshness=t0 - 60 - outer.asked, target_staleness=600.0),
                                   t0, t0)]
                data = json.dumps({"tables": rows}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _watch(url: str) -> list[str]:
    return [sys.executable, "-m", "ops.cli", "status", "--url", url, "--watch", "0.2", "--count", "3"]


def test_status_watch_piped_writes_one_view_after_the_other():
    srv = _Tables()
    try:
        r = subprocess.run(_watch(srv.url), cwd=ROOT, env=_env(TERM="xterm-256color"), capture_output=True,
                           text=True, timeout=60)
    finally:
        srv.close()
    assert r.returncode == 0, r.stderr
    assert srv.asked == 3 and r.stdout.count("TABLE ") == 3
    assert "1m01s" in r.stdout and "1m03s" in r.stdout  # the staleness of the first and the third answer
    assert "\x1b" not in r.stdout and "\r" not in r.stdout


def test_status_watch_on_a_terminal_redraws_in_place():
    srv = _Tables()
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(_watch(srv.url), cwd=ROOT, env=_env(TERM="xterm-256color", COLUMNS="160"),
                                stdout=slave, stderr=subprocess.PIPE, text=True)
        os.close(slave)
        chunks: list[bytes] = []
        while True:
            ready, _, _ = select.select([master], [], [], 60)
            if not ready:
                proc.kill()
                raise AssertionError("no output from status --watch for 60 s")
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=30)
    finally:
        os.close(master)
        srv.close()
    screen = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0
    assert srv.asked == 3 and screen.count("TABLE ") >= 3 and "1m03s" in screen  # Live draws the last once more
    assert "\x1b[2K" in screen and "\x1b[1A" in screen  # lines erased and the cursor moved up: in place
