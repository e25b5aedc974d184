#!/usr/bin/env bash
# The system tools `make test` uses for real, besides Python: promtool and prometheus (Debian's
# `prometheus` package: rule checks, rule unit tests, a real Prometheus scraping the daemon),
# systemd-analyze (`systemd`: unit verification), Java 17 (`openjdk-17-jre-headless`: Spark),
# Chromium and its WebDriver (`chromium`, `chromium-driver`: the status page in a real headless
# browser, tests/test_page.py), Python's venv module (`python3-venv`, for the project's .venv), and
# helm (not in Debian: built from the Go module proxy into ~/.cache/freshet/helm once, by
# scripts/fetch_helm.sh).
#
# Missing ones are installed with apt-get when this can (root, or sudo without a password);
# otherwise it stops at once with one line naming the exact command to run. `--no-helm`: the
# packages only (the Makefile builds helm as a target of its own, beside the venv in `make test`).
# It changes nothing when everything is there.
set -euo pipefail

PY="${PY:-python3}"
case "${1:-}" in
  "") helm=yes ;;
  --no-helm) helm=no ;;
  *) echo "usage: scripts/system_deps.sh [--no-helm]" >&2; exit 2 ;;
esac
need=()
have() { command -v "$1" >/dev/null 2>&1; }

have promtool && have prometheus || need+=(prometheus)
have systemd-analyze || need+=(systemd)
have chromium || need+=(chromium)
have chromedriver || need+=(chromium-driver)

java_major() {  # 17 for `openjdk version "17.0.15"`, 8 for `"1.8.0_292"`; empty if no java
  have java || return 0
  local line re='version "([0-9]+)(\.([0-9]+))?'
  line="$(java -version 2>&1 || true)"
  if [[ $line =~ $re ]]; then
    if [[ ${BASH_REMATCH[1]} == 1 ]]; then echo "${BASH_REMATCH[3]}"; else echo "${BASH_REMATCH[1]}"; fi
  fi
}
major="$(java_major)"
if [[ -z $major || $major -lt 17 ]]; then need+=(openjdk-17-jre-headless); fi

if have "$PY" && ! "$PY" -c 'import ensurepip, venv' >/dev/null 2>&1; then need+=(python3-venv); fi

here="${BASH_SOURCE[0]%/*}"  # not dirname: in the tests PATH holds nothing but stubs
[[ $here == "${BASH_SOURCE[0]}" ]] && here=.
fetch_helm() { [[ $helm == no ]] || "$BASH" "$here/fetch_helm.sh"; }
[[ ${#need[@]} -eq 0 ]] && { fetch_helm; exit; }

install="apt-get install -y --no-install-recommends ${need[*]}"
if ! have apt-get; then
  echo "make test needs ${need[*]} (Debian package names; no apt-get here): install them, then rerun" >&2
  exit 1
fi
if [[ "$(id -u)" == 0 ]]; then
  sudo=()
elif have sudo && sudo -n true >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "make test needs system packages; run: sudo apt-get update && sudo $install" >&2
  exit 1
fi
echo "installing system packages for the tests: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
# shellcheck disable=SC2086
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}"
fetch_helm
