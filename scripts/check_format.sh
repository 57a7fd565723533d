#!/usr/bin/env bash
# Every tracked C/C++ file matches .clang-format (clang-format 14, pinned in requirements.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
fmt=.venv/bin/clang-format
[ -x "$fmt" ] || fmt=$(command -v clang-format || true)
[ -n "$fmt" ] || { echo "check_format: clang-format not found (scripts/setup.sh installs it into .venv)" >&2; exit 1; }
bad=()
while IFS= read -r f; do
  "$fmt" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.cc' '*.h' '*.inc' '*.cpp' '*.hpp')
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format: these files do not match .clang-format; run: $fmt -i ${bad[*]}" >&2
  exit 1
fi
echo "check_format: ok ($(git ls-files '*.cc' '*.h' '*.inc' '*.cpp' '*.hpp' | wc -l) files)"
