#!/usr/bin/env bash
# The style gate: every tracked C++/CUDA file must be formatted by clang-format with the
# repository's .clang-format (clang-format --dry-run -Werror). Takes seconds.
# Usage: scripts/check-format.sh [--fix]   (--fix: rewrite the files in place instead)
# Env: CLANG_FORMAT (default: clang-format, else clang-format-14).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cf=${CLANG_FORMAT:-}
if [[ -z $cf ]]; then
  for c in clang-format clang-format-14; do
    if command -v "$c" > /dev/null; then
      cf=$c
      break
    fi
  done
fi
if [[ -z $cf ]] || ! command -v "$cf" > /dev/null; then
  echo "check-format: clang-format not found (Debian/Ubuntu: apt-get install clang-format)" >&2
  exit 1
fi
# Generated files (data/src/*.inc tables) are not C++ source to format.
mapfile -t files < <(git ls-files -- '*.cpp' '*.cc' '*.h' '*.hpp' '*.cu' '*.cuh')
if ((${#files[@]} == 0)); then
  echo "check-format: no tracked C++ files (not a git checkout?)" >&2
  exit 1
fi
if [[ ${1:-} == --fix ]]; then
  printf '%s\0' "${files[@]}" | xargs -0 -n 50 "$cf" -i
  exit $?
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
printf '%s\0' "${files[@]}" | xargs -0 -n 50 -P 2 "$cf" --dry-run -Werror > "$log" 2>&1
status=$?
bad=$(sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' "$log" | sort -u)
if [[ -n $bad ]]; then
  echo "check-format: $(wc -l <<< "$bad") file(s) are not clang-formatted ($("$cf" --version | head -1)):" >&2
  sed 's/^/  /' <<< "$bad" >&2
  echo "check-format: run clang-format -i on them (or scripts/check-format.sh --fix), then commit" >&2
  exit 1
fi
if ((status != 0)); then
  cat "$log" >&2
  echo "check-format: $cf failed (exit $status)" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted as .clang-format says"
