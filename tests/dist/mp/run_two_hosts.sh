#!/usr/bin/env bash
# Two "hosts" on one machine: two network namespaces joined by a veth pair, each with its
# own address (10.231.0.1 and .2) and, through unshare -u, its own host name. mpirun runs in
# the first and starts its daemon in the second through a tiny remote agent that wraps
# `ip netns exec` (in place of ssh), with a --hostfile naming both addresses: OpenMPI's
# ordinary multi-host launch, over TCP on the veth pair only. Exits 77 (skipped) where
# namespaces cannot be made (not root, no ip(8), no CAP_NET_ADMIN).
#   run_two_hosts.sh WORKER...   (a command prefix: e.g. brisk_test_job --rank -- dist_worker)
# With --restart, `brisk launch --hostfile` runs a training job on the two hosts instead, straight
# and with rank 1 (on the second host) SIGKILLed at its step 7 on the first attempt and
# --max-restarts 2, and both must end with the same files (tests/accelerate/same_bits.sh):
#   run_two_hosts.sh --restart CLI WORK_DIR PROGRAM [ARGS...]   (PROGRAM takes --out DIR)
set -u
restart=0
if [[ ${1:-} == --restart ]]; then
  restart=1 cli=$2 work=$3
  shift 3
fi
worker=("$@")
skip() { echo "SKIPPED: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "making network namespaces needs root"
command -v ip >/dev/null || skip "ip(8) not found (install iproute2)"
command -v unshare >/dev/null || skip "unshare(1) not found (install util-linux)"
mpirun=${MPIEXEC:-mpirun}
id=$$
ns_a=brisk_a_$id ns_b=brisk_b_$id
tmp=$(mktemp -d)
cleanup() {
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
ip netns add "$ns_a" 2>/dev/null || skip "cannot create network namespaces here (ip netns add failed)"
ip netns add "$ns_b" || skip "cannot create a second network namespace"
ip link add "bva$id" type veth peer name "bvb$id" || skip "cannot create a veth pair"
ip link set "bva$id" netns "$ns_a"
ip link set "bvb$id" netns "$ns_b"
ip -n "$ns_a" addr add 10.231.0.1/24 dev "bva$id"
ip -n "$ns_b" addr add 10.231.0.2/24 dev "bvb$id"
for ns in "$ns_a" "$ns_b"; do
  ip -n "$ns" link set lo up
done
ip -n "$ns_a" link set "bva$id" up
ip -n "$ns_b" link set "bvb$id" up

# The remote agent: called as `agent [options] HOST COMMAND...` like ssh.
cat >"$tmp/agent" <<AGENT
#!/usr/bin/env bash
while [[ \$1 == -* ]]; do shift; done
host=\$1; shift
case \$host in
  10.231.0.1) ns=$ns_a name=brisk-host-a ;;
  10.231.0.2) ns=$ns_b name=brisk-host-b ;;
  *) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec \$ns unshare -u bash -c "hostname \$name; \$*"
AGENT
chmod +x "$tmp/agent"
printf '10.231.0.1 slots=1\n10.231.0.2 slots=1\n' >"$tmp/hosts"

opts=(--hostfile "$tmp/hosts" -n 2 --allow-run-as-root --mca plm_rsh_agent "$tmp/agent"
      --mca btl tcp,self --mca btl_tcp_if_include 10.231.0.0/24 --mca oob_tcp_if_include 10.231.0.0/24
      -x OMP_NUM_THREADS=1)
[[ -n ${BRISK_TEST_JOB_DIR:-} ]] && opts+=(-x BRISK_TEST_JOB_DIR)
[[ -n ${LD_LIBRARY_PATH:-} ]] && opts+=(-x LD_LIBRARY_PATH)
# --restart: the same command straight and with a rank killed on host b, restarted by the launcher.
if ((restart)); then
  # shellcheck source=tests/accelerate/same_bits.sh
  source "$(dirname "$0")/../../accelerate/same_bits.sh"
  rm -rf "$work"; mkdir -p "$work"
  mpirun_args="--mca plm_rsh_agent $tmp/agent --mca btl tcp,self --mca btl_tcp_if_include 10.231.0.0/24"
  mpirun_args+=" --mca oob_tcp_if_include 10.231.0.0/24"
  launch() {  # launch LOG OUT [LAUNCH FLAGS]: brisk launch over the hostfile, in host a's namespace
    local log=$1 dir=$2
    shift 2
    OMP_NUM_THREADS=1 timeout -k 5 120 ip netns exec "$ns_a" unshare -u bash -c 'hostname brisk-host-a; exec "$@"' _ \
      "$cli" launch -n 2 --num_machines 2 --hostfile "$tmp/hosts" --mpirun_args "$mpirun_args" "$@" \
      "${worker[0]}" --out "$dir" "${worker[@]:1}" >"$log" 2>&1
  }
  launch "$work/straight.log" "$work/straight" || { cat "$work/straight.log"; echo "FAIL: the straight run"; exit 1; }
  BRISK_FAULT_KILL_AT_STEP=7:1 launch "$work/restarted.log" "$work/restarted" --max-restarts 2 ||
    { cat "$work/restarted.log"; echo "FAIL: the restarted run"; exit 1; }
  grep -E "BRISK_FAULT|brisk launch: attempt|continues from" "$work/restarted.log"
  grep -qE "brisk launch: attempt 1 of 3 failed after [0-9.]+ s: rank 1 was killed by SIGKILL" "$work/restarted.log" ||
    { echo "FAIL: no restart line naming rank 1"; exit 1; }
  grep -q "restart 1 (BRISK_RESTART_COUNT) continues from" "$work/restarted.log" ||
    { echo "FAIL: the restarted job did not continue from a checkpoint"; exit 1; }
  same_bits "$work/straight" "$work/restarted" || exit 1
  echo "TWO-HOSTS-RESTART-OK"
  exit 0
fi

start=$(date +%s%N)
out=$(OMP_NUM_THREADS=1 timeout -k 5 90 ip netns exec "$ns_a" unshare -u bash -c \
  'hostname brisk-host-a; exec "$@"' _ "$mpirun" "${opts[@]}" "${worker[@]}" facts 2>&1)
rc=$?
echo "$out"
echo "---- two hosts: exit status $rc after $(( ($(date +%s%N) - start) / 1000000 )) ms"
fail=0
[[ $rc -eq 0 ]] || { echo "FAIL: the two-host job failed"; fail=1; }
echo "$out" | grep -q "host brisk-host-a" || { echo "FAIL: no rank ran on host a"; fail=1; }
echo "$out" | grep -q "host brisk-host-b" || { echo "FAIL: no rank ran on host b"; fail=1; }
[[ $fail -eq 0 ]] && echo PASS
exit $fail
