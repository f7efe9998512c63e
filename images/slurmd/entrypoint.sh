#!/usr/bin/env bash
# open SUNK slurmd image: a dynamic, configless slurmd (`slurmd -Z --conf-server`).
# The registration (`--conf`) is SUNK_SLURMD_CONF (rendered by the operator) plus
# SUNK_NODE_FEATURES; without SUNK_SLURMD_CONF it is derived from the container's cgroup limits.
# Argument `munged` runs the munge sidecar; any other argument is executed as given.
# Environment: see images/README.md ("slurmd").
set -euo pipefail
SUNK_LIB=${SUNK_LIB:-/usr/local/lib/sunk/lib.sh}
# shellcheck source-path=SCRIPTDIR source=../common/sunk-lib.sh
. "$SUNK_LIB"
export SUNK_COMPONENT=slurmd

SUNK_SLURMD_CONF=${SUNK_SLURMD_CONF:-}
SUNK_NODE_FEATURES=${SUNK_NODE_FEATURES:-}
SUNK_NODE_NAME=${SUNK_NODE_NAME:-}
SUNK_RESERVED_MEMORY_MIB=${SUNK_RESERVED_MEMORY_MIB:-0}
SUNK_CGROUP_DIR=${SUNK_CGROUP_DIR:-/sys/fs/cgroup}
SUNK_MEMINFO=${SUNK_MEMINFO:-/proc/meminfo}
SUNK_MOUNTS=${SUNK_MOUNTS:-/proc/mounts}
SUNK_CONTROLLER=${SUNK_CONTROLLER:-}
SUNK_CONTROLLER_TIMEOUT=${SUNK_CONTROLLER_TIMEOUT:-300}
SUNK_RUN_DIR=${SUNK_RUN_DIR:-/run/slurm}
SUNK_SPOOL_DIR=${SUNK_SPOOL_DIR:-/var/spool/slurmd}
read -r -a extra <<<"${SUNK_EXTRA_ARGS:-}"

# Memory limit of the container in MiB: cgroup v2 memory.max, else v1 memory.limit_in_bytes,
# else (no limit) the machine's MemTotal.
memory_limit_mib() {
  local raw=""
  if [ -r "$SUNK_CGROUP_DIR/memory.max" ]; then
    raw=$(cat "$SUNK_CGROUP_DIR/memory.max")
  elif [ -r "$SUNK_CGROUP_DIR/memory/memory.limit_in_bytes" ]; then
    raw=$(cat "$SUNK_CGROUP_DIR/memory/memory.limit_in_bytes")
  fi
  # cgroup v1 writes "no limit" as a huge number (PAGE_COUNTER_MAX pages).
  if [ -n "$raw" ] && [ "$raw" != max ] && [ "${#raw}" -lt 19 ]; then
    echo $((raw / 1048576))
    return
  fi
  awk '/^MemTotal:/ { print int($2 / 1024) }' "$SUNK_MEMINFO"
}

# CPUs of the container: the CFS quota rounded up (cgroup v2 cpu.max "QUOTA PERIOD", v1
# cpu.cfs_quota_us / cpu.cfs_period_us), else every online CPU.
cpu_count() {
  local quota="" period=""
  if [ -r "$SUNK_CGROUP_DIR/cpu.max" ]; then
    read -r quota period <"$SUNK_CGROUP_DIR/cpu.max"
  elif [ -r "$SUNK_CGROUP_DIR/cpu/cpu.cfs_quota_us" ]; then
    quota=$(cat "$SUNK_CGROUP_DIR/cpu/cpu.cfs_quota_us")
    period=$(cat "$SUNK_CGROUP_DIR/cpu/cpu.cfs_period_us")
  fi
  if [ -n "$quota" ] && [ "$quota" != max ] && [ "$quota" -gt 0 ] && [ "${period:-0}" -gt 0 ]; then
    echo $(((quota + period - 1) / period))
    return
  fi
  getconf _NPROCESSORS_ONLN
}

derived_conf() {
  local memory cpus
  memory=$(memory_limit_mib)
  memory=$((memory - SUNK_RESERVED_MEMORY_MIB))
  [ "$memory" -gt 0 ] || sunk_die "memory limit minus SUNK_RESERVED_MEMORY_MIB leaves no memory"
  cpus=$(cpu_count)
  echo "CPUs=$cpus RealMemory=$memory"
}

# Append comma-separated features to the registration's Features= (adding it if absent),
# keeping the order and dropping duplicates.
with_features() {
  local conf=$1 more=$2 word out="" current="" f
  local -a words features=()
  [ -n "$more" ] || { echo "$conf"; return; }
  read -r -a words <<<"$conf"
  for word in "${words[@]}"; do
    case "$word" in
      Features=* | Feature=*) current=${word#*=} ;;
      *) out="$out $word" ;;
    esac
  done
  local all="$current,$more" IFS=,
  for f in $all; do
    [ -n "$f" ] || continue
    case ",${features[*]-}," in
      *",$f,"*) ;;
      *) features+=("$f") ;;
    esac
  done
  echo "Features=${features[*]}$out"
}

# slurmd's cgroup plugins create the jobs' cgroups under the container's own: an unprivileged
# container gets its cgroup mounts read-only, so make them writable. Only this mount's flag
# changes (a bind remount; the cgroup filesystem itself cannot be remounted), which takes
# CAP_SYS_ADMIN: the operator's default for slurmd. Without it slurmd says which plugin failed.
cgroups_writable() {
  local mount type options
  while read -r _ mount type options _; do
    case "$type" in cgroup | cgroup2) ;; *) continue ;; esac
    case "$mount" in "$SUNK_CGROUP_DIR" | "$SUNK_CGROUP_DIR"/*) ;; *) continue ;; esac
    case ",$options," in *,ro,*) ;; *) continue ;; esac
    sunk_do mount -o remount,bind,rw "$mount" ||
      sunk_log "warning: $mount stays read-only (no CAP_SYS_ADMIN?): cgroup plugins will fail"
  done <"$SUNK_MOUNTS"
}

case "${1:-slurmd}" in
  slurmd) [ "$#" -gt 0 ] && shift ;;
  munged) sunk_munged_foreground ;;
  *) sunk_exec "$@" ;;
esac

[ -n "$SUNK_CONTROLLER" ] ||
  sunk_die "SUNK_CONTROLLER (host[:port] of slurmctld, comma-separated with standbys) is not set"
# every slurmctld, the primary first: slurmd asks each in turn for the configuration
controllers=()
IFS=, read -r -a listed <<<"$SUNK_CONTROLLER"
for controller in "${listed[@]}"; do
  sunk_split_hostport "$controller" 6817
  controllers+=("$SUNK_HOST:$SUNK_PORT")
done
conf_servers=$(IFS=,; echo "${controllers[*]}")

conf=$SUNK_SLURMD_CONF
if [ -z "$conf" ]; then
  conf=$(derived_conf)
  sunk_log "no SUNK_SLURMD_CONF: derived '$conf' from the cgroup limits"
fi
conf=$(with_features "$conf" "$SUNK_NODE_FEATURES")

sunk_munge
cgroups_writable
# pmix: mpi.conf's PMIxCliTmpDirBase (Slurm's PMIx plugin fails every step when it is missing);
# the container plugin binds the spool into containers, so ranks there reach PMIx's files.
sunk_do mkdir -p "$SUNK_RUN_DIR" "$SUNK_SPOOL_DIR" "$SUNK_SPOOL_DIR/pmix"
sunk_log "waiting for slurmctld at $conf_servers"
sunk_wait_tcp_any "$SUNK_CONTROLLER_TIMEOUT" "${controllers[@]}"

# s6 services: oneshots before slurmd. After a failed one the node still registers, drained
# with the reason, so `sinfo -R` says why it takes no jobs; the Pod stays not ready (sunk-ready)
# and the Syncer keeps that drain, whose reason extends its own "Pod ... not ready".
if ! sunk_s6_start; then
  conf="$conf State=DRAIN Reason=\"k8s: Pod ${SUNK_NODE_NAME:-$(hostname)} not ready: $SUNK_S6_FAILURE\""
fi

args=(slurmd -D -Z --conf-server "$conf_servers" --conf "$conf")
[ -z "$SUNK_NODE_NAME" ] || args+=(-N "$SUNK_NODE_NAME")
sunk_log "registering with --conf '$conf'"
sunk_exec_with_services "${args[@]}" "${extra[@]}" "$@"
