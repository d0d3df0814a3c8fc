#!/usr/bin/env bash
# Runs the commands a docs page shows: every ```sh block that follows a line `<!-- run -->`,
# from the repository root, with the paths under build/ pointed at BUILD_DIR; fails on the first
# command that fails, printing the block. The tests labelled `docs` run it over docs/tour/.
# Usage: scripts/doc-commands.sh PAGE.md BUILD_DIR       (--list: print the blocks, run nothing)
set -euo pipefail

if [[ $# -lt 2 || $1 == -h || $1 == --help ]]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
  [[ $# -ge 1 && ($1 == -h || $1 == --help) ]] && exit 0
  exit 2
fi
page=$1
build=$(cd "$2" && pwd)
list=${3:-}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ -f $page ]] || { echo "doc-commands: no page '$page'" >&2; exit 2; }

# Blocks separated by NUL: the lines of each ```sh block right after <!-- run -->.
blocks=$(awk '
  /^<!-- run -->$/ { armed = 1; next }
  armed && /^```sh$/ { inside = 1; armed = 0; next }
  inside && /^```$/ { inside = 0; printf "%c", 0; next }
  inside { print; next }
  { if ($0 != "") armed = 0 }
' "$page" | tr '\0' '\036')

# The files a page names in its **Files** paragraphs must exist (paths with a slash in backticks).
missing=0
while read -r path; do
  [[ -e $root/$path ]] || { echo "doc-commands: $page names $path, which does not exist" >&2; missing=1; }
done < <(awk '/^\*\*Files\*\*/ { on = 1 } on && /^$/ { on = 0 } on' "$page" | grep -oE '`[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+`' | tr -d '`' | sed 's#/$##')
((missing == 0)) || exit 1

n=0
IFS=$'\036' read -r -d '' -a parts <<< "$blocks" || true
for block in "${parts[@]}"; do
  [[ -z ${block//[$'\n' ]/} ]] && continue
  n=$((n + 1))
  # build/... at the start of a word is the README's build folder.
  script=$(printf '%s\n' "$block" | sed -E "s#(^|[[:space:]=(])build/#\\1${build}/#g")
  echo "---- $page, block $n:"
  printf '%s\n' "$script"
  [[ $list == --list ]] && continue
  echo "---- output:"
  if ! (cd "$root" && bash -euo pipefail -c "$script"); then
    echo "doc-commands: block $n of $page failed (above); fix the page or the code it shows" >&2
    exit 1
  fi
done
if ((n == 0)); then
  echo "doc-commands: $page has no block marked <!-- run -->" >&2
  exit 1
fi
echo "---- $page: $n block(s) ran"
