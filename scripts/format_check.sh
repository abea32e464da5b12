#!/usr/bin/env bash
# The C, C++ and CUDA lines changed against a base, checked against .clang-format (clang-format-diff:
# only changed lines, so older code is not reformatted by the way). The base: $SSMCHECK_FORMAT_BASE,
# else the merge base with origin/main (a pull request's target); uncommitted changes count.
# Exit 1 printing the reformatting it wants (apply it with: git diff -U0 BASE | clang-format-diff -p1 -i);
# skips with a message (exit 0) without clang-format or without a base. scripts/test runs it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
diff_tool=$(command -v clang-format-diff || command -v clang-format-diff-14 || true)
if ! command -v clang-format >/dev/null || [ -z "$diff_tool" ]; then
  echo "format check skipped: clang-format is not installed (Debian package clang-format; scripts/deps.sh dev)"
  exit 0
fi
base=${SSMCHECK_FORMAT_BASE:-}
if [ -z "$base" ]; then
  base=$(git merge-base HEAD origin/main 2>/dev/null || true)
  if [ -z "$base" ]; then
    echo "format check skipped: no origin/main to compare with (set SSMCHECK_FORMAT_BASE=REF)"
    exit 0
  fi
fi
files=(':(glob)**/*.c' ':(glob)**/*.h' ':(glob)**/*.cpp' ':(glob)**/*.cu' ':(glob)**/*.cuh')
changed=$(git diff --name-only "$base" -- "${files[@]}" | wc -l)
wanted=$(git diff -U0 --no-color "$base" -- "${files[@]}" | "$diff_tool" -p1 -style=file)
if [ -n "$wanted" ]; then
  printf '%s\n' "$wanted"
  echo "format check FAILED: changed lines of $changed file(s) since $base differ from .clang-format (the diff above)"
  exit 1
fi
echo "format check: the changed lines of $changed file(s) since $base follow .clang-format"
