#!/usr/bin/env bash
# A one-node Slurm on this host for the `slurm` tests (tests/slurm) and the docs' recipes:
#   scripts/slurm-local.sh start   write DIR/slurm.conf, start munged, slurmctld and slurmd
#                                  (loopback ports of its choosing), wait until the node is idle
#   scripts/slurm-local.sh stop    stop the daemons it started, by their pid files in DIR
#   scripts/slurm-local.sh env     print `export SLURM_CONF=...` (eval it to use srun/sbatch)
# DIR is $NCCLX_SLURM_DIR, else /tmp/ncclx-slurm-<uid>-<checkout> (state, spool, logs, pids).
# Needs Debian's slurm-wlm and munge (scripts/bootstrap.sh installs them as root) and root:
# slurmd starts the job steps as the submitting user. `start` is idempotent: daemons already
# running from DIR are kept. Every wait is bounded (NCCLX_SLURM_WAIT_S, default 30 s).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dir=${NCCLX_SLURM_DIR:-${TMPDIR:-/tmp}/ncclx-slurm-$(id -u)-$(printf %s "$root" | cksum | cut -d' ' -f1)}
wait_s=${NCCLX_SLURM_WAIT_S:-30}
node=$(hostname -s)
daemons=(munged slurmctld slurmd)

die() { echo "slurm-local.sh: $*" >&2; exit 1; }

alive() {  # alive NAME: its pid file names a running process
  local pid
  [ -f "$dir/$1.pid" ] && pid=$(cat "$dir/$1.pid" 2>/dev/null) && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

free_port() {  # a TCP port the kernel hands out on 127.0.0.1 now
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

write_conf() {
  local ctld_port slurmd_port cpus
  ctld_port=$(free_port); slurmd_port=$(free_port)
  while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port=$(free_port); done
  # More CPUs than this machine has (config_overrides): the tests run 3-4 one-CPU tasks.
  cpus=${NCCLX_SLURM_CPUS:-16}
  mkdir -p "$dir/state" "$dir/spool" "$dir/log"
  cat >"$dir/slurm.conf" <<EOF
# Written by scripts/slurm-local.sh for one node ($node) on loopback.
ClusterName=ncclx-local
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
InactiveLimit=0
MinJobAge=30
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
}

node_state() { SLURM_CONF=$dir/slurm.conf sinfo -h -N -n "$node" -o %T 2>/dev/null | head -1; }

start() {
  [ "$(id -u)" = 0 ] || die "needs root (slurmd runs job steps as their user); run as root"
  local d
  for d in munged slurmctld slurmd sinfo srun sbatch; do
    command -v "$d" >/dev/null 2>&1 || die "$d is missing: apt-get install slurm-wlm munge (or scripts/bootstrap.sh as root)"
  done
  if alive munged && alive slurmctld && alive slurmd; then
    [ "$(node_state)" = idle ] && { echo "slurm-local.sh: already running from $dir" >&2; return 0; }
  else
    stop quiet
    write_conf
    # munged: its own socket, key and pid here; --force since it runs as root.
    munged --force --socket="$dir/munge.socket" --pid-file="$dir/munged.pid" \
      --log-file="$dir/log/munged.log" --seed-file="$dir/munge.seed" \
      --key-file="${NCCLX_MUNGE_KEY:-/etc/munge/munge.key}" \
      || die "munged did not start (see $dir/log/munged.log)"
    slurmctld -f "$dir/slurm.conf" -i || die "slurmctld did not start (see $dir/log/slurmctld.log)"
    slurmd -f "$dir/slurm.conf" -N "$node" || die "slurmd did not start (see $dir/log/slurmd.log)"
  fi
  local t=0 state=
  while [ "$t" -lt $((wait_s * 5)) ]; do
    state=$(node_state)
    [ "$state" = idle ] && { echo "slurm-local.sh: node $node idle; export SLURM_CONF=$dir/slurm.conf" >&2; return 0; }
    for d in "${daemons[@]}"; do
      [ "$t" -lt 10 ] || alive "$d" || die "$d exited (see $dir/log/$d.log)"
    done
    sleep 0.2; t=$((t + 1))
  done
  die "node $node is not idle after ${wait_s}s (state: ${state:-none}; logs in $dir/log)"
}

stop() {  # stop [quiet]: SIGTERM each daemon named by a pid file here, SIGKILL after the wait
  local d pid t
  for d in slurmd slurmctld munged; do
    alive "$d" || { rm -f "$dir/$d.pid"; continue; }
    pid=$(cat "$dir/$d.pid")
    kill "$pid" 2>/dev/null || true
    t=0
    while kill -0 "$pid" 2>/dev/null && [ "$t" -lt $((wait_s * 5)) ]; do sleep 0.2; t=$((t + 1)); done
    if kill -0 "$pid" 2>/dev/null; then
      echo "slurm-local.sh: $d ($pid) ignored SIGTERM for ${wait_s}s: SIGKILL" >&2
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/$d.pid"
  done
  [ "${1:-}" = quiet ] || echo "slurm-local.sh: stopped the daemons of $dir" >&2
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  env) echo "export SLURM_CONF=$dir/slurm.conf" ;;
  *) die "usage: scripts/slurm-local.sh start|stop|env" ;;
esac
