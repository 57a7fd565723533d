#!/usr/bin/env bash
# Tree hygiene that review would otherwise have to catch by eye (run by scripts/test.sh):
#  - no tracked file over 1 MiB (build outputs, wheels and data sets stay out of git);
#  - the repository stands alone: no path or section number of documents outside it.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
limit=$((1024 * 1024))
while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue
  size=$(stat -c %s "$f")
  if [ "$size" -gt "$limit" ]; then
    echo "check_tree: $f is $((size / 1024)) KiB (tracked files must stay under 1 MiB)" >&2
    fail=1
  fi
done < <(git ls-files -z)
# Outside documents: a shared folder beside the checkout, or its specs/*.md cited by name or section.
pattern='(\.\./shared|/work/shared|specs/[a-z_]+\.md|[Ss]pec sections? [0-9])'
if hits=$(git ls-files -z | grep -zv '^scripts/check_tree\.sh$' | xargs -0 grep -IEn "$pattern" 2>/dev/null); then
  echo "check_tree: cite DeepSeek's public docs or our own docs, not documents outside the repository:" >&2
  echo "$hits" | head -20 >&2
  fail=1
fi
[ "$fail" = 0 ] && echo "check_tree: ok ($(git ls-files | wc -l) tracked files)"
exit "$fail"
