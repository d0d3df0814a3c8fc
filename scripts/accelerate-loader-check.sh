#!/usr/bin/env bash
# Checks that the config files `brisk config` writes load with Hugging Face Accelerate's own loader
# (accelerate.commands.config.config_args.load_config_from_file, what `accelerate launch` runs), and
# that the file Accelerate writes back (ClusterConfig.to_yaml_file) is read by `brisk launch` with the
# same settings. Needs Python with `accelerate` importable; exits 77 (skipped) without it.
# Usage: scripts/accelerate-loader-check.sh [BRISK]   BRISK: the brisk program (default build/bin/brisk)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
brisk=${1:-${BRISK_BUILD_DIR:-build}/bin/brisk}
[[ -x $brisk ]] || { echo "accelerate-loader-check: no brisk program at $brisk" >&2; exit 1; }
if ! python3 -c 'import accelerate.commands.config.config_args' 2> /dev/null; then
  echo "accelerate-loader-check: skipped: Python cannot import accelerate (pip install accelerate)"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# name | brisk config flags | what Accelerate must read back (python expressions on `c`)
cases=(
  "defaults||c.num_processes == 2 and c.distributed_type.value == 'MULTI_CPU' and c.mixed_precision == 'no'"
  "bf16x4|-n 4 --mixed-precision bf16 --use-cpu|c.num_processes == 4 and c.mixed_precision == 'bf16' and c.use_cpu"
  "zero2|-n 2 --sharding zero2|c.deepspeed_config == {'zero_stage': 2}"
  "none|--sharding none --debug|c.deepspeed_config == {'zero_stage': 0} and c.debug"
  "hosts|--num-machines 2 -n 4 --hostfile /etc/hosts --main-process-ip 10.0.0.1 --main-process-port 29500|c.num_machines == 2 and c.main_process_ip == '10.0.0.1' and c.main_process_port == 29500 and c.mpirun_config == {'mpirun_hostfile': '/etc/hosts'}"
)
failed=0
for entry in "${cases[@]}"; do
  IFS='|' read -r name flags expect <<< "$entry"
  file=$dir/$name.yaml back=$dir/$name.accelerate.yaml
  # shellcheck disable=SC2086  # the flags are words
  "$brisk" config --non-interactive --config-file "$file" $flags > /dev/null
  if ! python3 - "$file" "$back" "$expect" << 'PY'; then
import sys
from accelerate.commands.config.config_args import load_config_from_file
c = load_config_from_file(sys.argv[1])
if not eval(sys.argv[3]):
    sys.exit(f"Accelerate read {c} but expected {sys.argv[3]}")
c.to_yaml_file(sys.argv[2])
PY
    echo "FAIL   $name: Accelerate's loader refused or misread $file:" >&2
    cat "$file" >&2
    failed=1
    continue
  fi
  # brisk reads Accelerate's rewrite to the same launch as its own file.
  # (the dry run names the file it read: the one difference expected)
  mine=$("$brisk" launch --config-file "$file" --dry-run true 2>&1 | sed "s|$file|FILE|g") || true
  theirs=$("$brisk" launch --config-file "$back" --dry-run true 2>&1 | sed "s|$back|FILE|g") || true
  if [[ $mine != "$theirs" ]]; then
    echo "FAIL   $name: brisk launches differently from Accelerate's rewrite of its file:" >&2
    diff <(echo "$mine") <(echo "$theirs") >&2 || true
    failed=1
    continue
  fi
  echo "ok     $name"
done
((failed == 0)) && echo "accelerate-loader-check: Accelerate $(python3 -c 'import accelerate; print(accelerate.__version__)') loads every file brisk writes"
exit $failed
