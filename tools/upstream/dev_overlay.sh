#!/usr/bin/env bash
# Mirrors python/tessera into an overlay directory next to the installed native module, so edits to
# the Python layer can be tried without reinstalling: PYTHONPATH=$OVERLAY .venv/bin/python ...
# usage: tools/upstream/dev_overlay.sh [OVERLAY=/tmp/tessera-dev]  (pass a built _C via TESSERA_C_SO)
set -euo pipefail
cd "$(dirname "$0")/../.."
overlay=${1:-/tmp/tessera-dev}
so=${TESSERA_C_SO:-$(ls .venv/lib/python3*/site-packages/tessera/_C*.so)}
mkdir -p "$overlay"
rm -rf "$overlay/tessera" && cp -r python/tessera "$overlay/tessera"
ln -sf "$(realpath "$so")" "$overlay/tessera/$(basename "$so")"
echo "$overlay"
