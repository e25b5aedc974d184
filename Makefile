# Two commands for a fresh machine: `make run` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CONFIG ?= examples/netmon.yaml

.PHONY: setup system-deps run test lint bench clean connect-server

$(BIN)/freshet: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	@touch $@

setup: $(BIN)/freshet

run: setup
	$(BIN)/freshet run --config $(CONFIG) --demo

# promtool/prometheus, systemd-analyze, Java 17: installed when missing and possible, else one line
# naming the apt-get command (scripts/system_deps.sh)
system-deps:
	@PY=$(PY) bash scripts/system_deps.sh

test: system-deps setup
	$(BIN)/ruff check .
	$(BIN)/python scripts/fetch_jars.py
	$(BIN)/python scripts/fetch_jars.py --s3a
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup --durations=25

# A Spark Connect server with Delta on this machine, for `spark: {remote: "sc://127.0.0.1:15002"}`
# (ops/README.md). Foreground; Ctrl-C stops it. CONNECT_ARGS="--port 15003 --master local[2]" etc.
connect-server: setup
	$(BIN)/python scripts/fetch_jars.py
	$(BIN)/python scripts/connect_server.py $(CONNECT_ARGS)

bench: setup
	$(BIN)/python scripts/bench_scheduler.py
	$(BIN)/python scripts/bench_sim.py
	$(BIN)/python scripts/bench_intake.py
	$(BIN)/python scripts/bench_delta.py

clean:
	rm -rf $(VENV) data landing out
