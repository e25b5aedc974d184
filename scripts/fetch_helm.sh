#!/usr/bin/env bash
# Build helm (for `helm lint` / `helm template` of ops/helm/freshet in tests/test_helm.py) from the
# Go module proxy into Freshet's cache, once — the way scripts/fetch_jars.py caches the Delta jars.
# Debian ships no helm; Go is on the machine (helm v3.22 needs Go >= 1.26). About 2 minutes and
# 0.5 GB of module cache the first time; afterwards this returns at once.
#
#   bash scripts/fetch_helm.sh            # build if missing (`make test`, scripts/system_deps.sh)
#   bash scripts/fetch_helm.sh --path     # print where the binary is (or will be), build nothing
#
# $FRESHET_HELM_DIR (default ~/.cache/freshet/helm) holds one directory per version.
set -euo pipefail

HELM_VERSION=v3.22.0
home=~  # $HOME, or the account's home directory when HOME is not set
dir="${FRESHET_HELM_DIR:-${XDG_CACHE_HOME:-$home/.cache}/freshet/helm}/$HELM_VERSION"
bin="$dir/helm"

if [[ ${1:-} == --path ]]; then
  echo "$bin"
  exit 0
fi
[[ -x $bin ]] && exit 0

if ! command -v go >/dev/null 2>&1; then
  echo "make test needs helm $HELM_VERSION, built from the Go module proxy with Go >= 1.26: install Go (go.dev/dl), then rerun" >&2
  exit 1
fi
echo "building helm $HELM_VERSION from the Go module proxy into $dir (once)" >&2
mkdir -p "$dir"
tmp="$(mktemp -d "$dir/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# the ldflags of helm's own release build (its Makefile): the version, and the Kubernetes version
# `helm template` and `helm lint` assume by default (1.37 for v3.22.0, built on k8s.io/client-go v0.37)
v=helm.sh/helm/v3
ldflags="-s -w -X $v/internal/version.version=$HELM_VERSION"
ldflags+=" -X $v/pkg/chartutil.k8sVersionMajor=1 -X $v/pkg/chartutil.k8sVersionMinor=37"
ldflags+=" -X $v/pkg/lint/rules.k8sVersionMajor=1 -X $v/pkg/lint/rules.k8sVersionMinor=37"
GOFLAGS=-mod=mod GOBIN="$tmp" go install -ldflags "$ldflags" "$v/cmd/helm@$HELM_VERSION"
mv "$tmp/helm" "$bin"   # whole or not at all: an interrupted build leaves no binary behind
"$bin" version --short >&2
