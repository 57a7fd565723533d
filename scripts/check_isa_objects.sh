#!/usr/bin/env bash
# Rule 1 of src/backends/cpu/README.md, checked on the built objects. The linker keeps one copy of each
# weak (inline or template) symbol; a copy compiled with a level's flags could run AVX-512 or AMX code
# on a CPU without them. So no object of a level folder (avx2/, avx512/, avx512bf16/, amx/; on ARM
# neon_bf16/, built with +bf16) may define a weak or unique symbol, and no Highway object may define one
# inside a target namespace (N_AVX2, ...).
# usage: [NM=nm] scripts/check_isa_objects.sh [BUILD_DIR=build/py]   (ARM build: NM=aarch64-linux-gnu-nm)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/py}/src/CMakeFiles/tessera.dir/backends/cpu
[ -d "$dir" ] || { echo "check_isa_objects: $dir is missing (run scripts/setup.sh first)" >&2; exit 1; }

# Defined symbols the linker may merge across objects: nm types W / V (weak) and u (unique). The
# exception-handling personality reference is data every C++ object with cleanups may carry.
shared_symbols() {
  "${NM:-nm}" -C --defined-only "$1" | awk '$2 ~ /^[WVu]$/' | grep -v ' DW\.ref\.__gxx_personality_v0$' || true
}

objects=0
bad=0
for o in "$dir"/avx2/*.o "$dir"/avx512/*.o "$dir"/avx512bf16/*.o "$dir"/amx/*.o "$dir"/neon_bf16/*.o; do
  [ -e "$o" ] || continue
  objects=$((objects + 1))
  syms=$(shared_symbols "$o")
  if [ -n "$syms" ]; then
    printf 'check_isa_objects: %s (built with its level'"'"'s flags) defines shared symbols:\n%s\n' "$o" "$syms" >&2
    bad=1
  fi
done
for o in "$dir"/hwy/*.o; do
  [ -e "$o" ] || continue
  objects=$((objects + 1))
  syms=$(shared_symbols "$o" | grep -E '::N_(AVX2|AVX3[A-Z0-9_]*|NEON[A-Z0-9_]*|SVE[A-Z0-9_]*)::' || true)
  if [ -n "$syms" ]; then
    printf 'check_isa_objects: %s defines shared symbols in a Highway target namespace:\n%s\n' "$o" "$syms" >&2
    bad=1
  fi
done
if [ "$objects" = 0 ]; then
  echo "check_isa_objects: no level objects under $dir (not a build with level folders?)"
  exit 0
fi
[ "$bad" = 0 ] || exit 1
echo "check_isa_objects: ok ($objects objects, no shared symbols built with level flags)"
