# shellcheck shell=bash
# Shared helpers of the open SUNK entrypoints (installed as /usr/local/lib/sunk/lib.sh).
#
# Everything a test needs to run an entrypoint without a container is an environment variable:
#   SUNK_DRY_RUN=1   privileged steps (chown, dropping privileges, starting munged) and the final
#                    exec are printed ("+ ..." and "exec: ...") instead of run; waits still wait.
#   SUNK_MUNGE_*     paths of the munge key, its mounted source and the socket (below).

SUNK_DRY_RUN=${SUNK_DRY_RUN:-0}
SUNK_MUNGE_KEY_SOURCE=${SUNK_MUNGE_KEY_SOURCE:-/etc/munge-secret/munge.key}
SUNK_MUNGE_KEY=${SUNK_MUNGE_KEY:-/etc/munge/munge.key}
SUNK_MUNGE_SOCKET=${SUNK_MUNGE_SOCKET:-/run/munge/munge.socket.2}
SUNK_MUNGE_TIMEOUT=${SUNK_MUNGE_TIMEOUT:-30}
# start: the entrypoint starts munged; external: a sidecar (same image, argument `munged`) does.
SUNK_MUNGED=${SUNK_MUNGED:-start}

sunk_log() {
  printf '%s [%s] %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${SUNK_COMPONENT:-sunk}" "$*" >&2
}

sunk_die() {
  sunk_log "error: $*"
  exit 1
}

# Run a privileged or side-effecting command, or print it in dry-run mode.
sunk_do() {
  if [ "$SUNK_DRY_RUN" = 1 ]; then
    printf '+ %s\n' "$*"
    return 0
  fi
  "$@"
}

# Replace the shell with the daemon, or print the command line (one argument a line after the
# first, so tests can read arguments that contain spaces).
sunk_exec() {
  if [ "$SUNK_DRY_RUN" = 1 ]; then
    printf 'exec:'
    printf ' %q' "$@"
    printf '\n'
    exit 0
  fi
  exec "$@"
}

# As root, run "$@" as user $1 (kept root in dry-run output for clarity).
sunk_as_user() {
  local user=$1
  shift
  if [ "$(id -u)" = 0 ] || [ "$SUNK_DRY_RUN" = 1 ]; then
    set -- setpriv "--reuid=$user" "--regid=$user" --init-groups -- "$@"
  fi
  sunk_exec "$@"
}

sunk_wait_socket() {
  local path=$1 timeout=$2 waited=0
  until [ -S "$path" ]; do
    if [ "$waited" -ge "$timeout" ]; then
      sunk_die "no socket at $path after ${timeout}s"
    fi
    sleep 1
    waited=$((waited + 1))
  done
}

# Wait until HOST:PORT accepts a TCP connection (bash /dev/tcp, 2 s per attempt).
sunk_wait_tcp() {
  sunk_wait_tcp_any "$3" "$1:$2"
}

# Wait until one of several endpoints accepts a TCP connection: sunk_wait_tcp_any TIMEOUT
# HOST:PORT... (the port after the last colon; several: slurmctld's standbys with HA).
sunk_wait_tcp_any() {
  local timeout=$1 start now endpoint
  shift
  start=$(date +%s)
  while :; do
    for endpoint in "$@"; do
      # shellcheck disable=SC2016 # expanded by the inner bash
      if timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "${endpoint%:*}" "${endpoint##*:}" 2>/dev/null; then
        return 0
      fi
    done
    now=$(date +%s)
    if [ $((now - start)) -ge "$timeout" ]; then
      sunk_die "$(IFS=,; echo "$*") not reachable after ${timeout}s"
    fi
    sleep 1
  done
}

# Split HOST[:PORT] into SUNK_HOST / SUNK_PORT (default port $2).
sunk_split_hostport() {
  local value=$1 default_port=$2
  case "$value" in
    \[*\]:*) SUNK_HOST=${value%]:*}; SUNK_HOST=${SUNK_HOST#[}; SUNK_PORT=${value##*]:} ;;
    *:*:*) SUNK_HOST=$value; SUNK_PORT=$default_port ;; # bare IPv6 address
    *:*) SUNK_HOST=${value%:*}; SUNK_PORT=${value##*:} ;;
    *) SUNK_HOST=$value; SUNK_PORT=$default_port ;;
  esac
  case "$SUNK_PORT" in
    '' | *[!0-9]*) sunk_die "bad port in '$value'" ;;
  esac
}

# Install the munge key from the mounted Secret: owner munge, mode 0400.
sunk_munge_key() {
  if [ -f "$SUNK_MUNGE_KEY_SOURCE" ]; then
    if [ ! -r "$SUNK_MUNGE_KEY_SOURCE" ] && [ "$SUNK_DRY_RUN" != 1 ]; then
      sunk_die "cannot read the munge key $SUNK_MUNGE_KEY_SOURCE as uid $(id -u): give the Pod" \
        "an fsGroup (a Secret volume's files are then readable to that group) or start this" \
        "container as root"
    fi
    sunk_do mkdir -p "$(dirname "$SUNK_MUNGE_KEY")"
    sunk_do cp "$SUNK_MUNGE_KEY_SOURCE" "$SUNK_MUNGE_KEY"
    # Not root (a munge sidecar run as uid munge): the copy is already owned by munged's user.
    if [ "$(id -u)" = 0 ] || [ "$SUNK_DRY_RUN" = 1 ]; then
      sunk_do chown munge:munge "$SUNK_MUNGE_KEY"
    fi
    sunk_do chmod 0400 "$SUNK_MUNGE_KEY"
  elif [ ! -f "$SUNK_MUNGE_KEY" ]; then
    sunk_die "no munge key: mount the Secret at $SUNK_MUNGE_KEY_SOURCE"
  fi
}

# Start munged (it daemonizes) unless a sidecar runs it; then wait for its socket.
sunk_munge() {
  case "$SUNK_MUNGED" in
    start)
      sunk_munge_key
      sunk_do mkdir -p "$(dirname "$SUNK_MUNGE_SOCKET")"
      sunk_do chown munge:munge "$(dirname "$SUNK_MUNGE_SOCKET")"
      sunk_do setpriv --reuid=munge --regid=munge --init-groups -- \
        munged --force --key-file="$SUNK_MUNGE_KEY" --socket="$SUNK_MUNGE_SOCKET"
      ;;
    external) ;;
    *) sunk_die "SUNK_MUNGED must be start or external, not '$SUNK_MUNGED'" ;;
  esac
  sunk_wait_socket "$SUNK_MUNGE_SOCKET" "$SUNK_MUNGE_TIMEOUT"
}

# The munge sidecar: the same image run with the argument `munged`.
sunk_munged_foreground() {
  sunk_munge_key
  sunk_do mkdir -p "$(dirname "$SUNK_MUNGE_SOCKET")"
  if [ "$(id -u)" = 0 ] || [ "$SUNK_DRY_RUN" = 1 ]; then
    sunk_do chown munge:munge "$(dirname "$SUNK_MUNGE_SOCKET")"
  fi
  sunk_as_user munge munged --foreground --force --key-file="$SUNK_MUNGE_KEY" \
    --socket="$SUNK_MUNGE_SOCKET"
}

# mkdir -p each directory and give it to user $1 (mode 0755).
sunk_own_dirs() {
  local user=$1 dir
  shift
  for dir in "$@"; do
    sunk_do mkdir -p "$dir"
    sunk_do chown "$user:$user" "$dir"
  done
}

# ---- s6 services: `compute.s6`, `compute.nodes.<name>.s6`, `login.s6` ----------------------
# The operator's ConfigMap is mounted at SUNK_S6_DIR. Its `services` file lists one service a
# line, "NAME TYPE TIMEOUT_UP_MS TIMEOUT_DOWN_MS", in name order, and NAME.script holds each
# script. The oneshots run first, one after another, before the daemon starts; the longruns
# then run under s6-svscan, which restarts one that exits. (Debian has s6 but not s6-rc; SUNK's
# keys declare no dependencies, so this order is all s6-rc would add.)
SUNK_S6_DIR=${SUNK_S6_DIR:-/etc/sunk/s6}
SUNK_S6_RUN=${SUNK_S6_RUN:-/run/sunk/s6}
# sunk-ready (the readiness probe of a Pod with services) reads these two.
SUNK_STARTED=${SUNK_STARTED:-/run/sunk/started}
SUNK_STARTUP_FAILED=${SUNK_STARTUP_FAILED:-/run/sunk/startup-failed}
# Kubernetes shows this file's text in the container's status when the container ends.
SUNK_TERMINATION_LOG=${SUNK_TERMINATION_LOG:-/dev/termination-log}
SUNK_S6_FAILURE="" # why a oneshot failed (set by sunk_s6_start)
SUNK_S6_SCAN=""    # the scan directory, once longruns run

# Milliseconds as seconds for timeout(1): 1500 -> 1.500.
_sunk_s6_seconds() {
  printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000))
}

# Copy a service's script where it can run (a ConfigMap file is read-only and its mode is the
# volume's) and print how to run it: itself with a `#!` line, else through sh.
_sunk_s6_command() {
  local name=$1 dest="$SUNK_S6_RUN/scripts/$1"
  cp "$SUNK_S6_DIR/$name.script" "$dest"
  chmod 0755 "$dest"
  if [ "$(head -c 2 "$dest")" = '#!' ]; then
    printf '%s\n' "$dest"
  else
    printf '/bin/sh %s\n' "$dest"
  fi
}

_sunk_s6_oneshot() {
  local name=$1 up=$2 status=0 cmd
  cmd=$(_sunk_s6_command "$name")
  sunk_log "s6: oneshot $name starting"
  if [ "$up" -gt 0 ]; then
    # shellcheck disable=SC2086 # cmd is "script" or "/bin/sh script"
    timeout --kill-after=5 "$(_sunk_s6_seconds "$up")" $cmd </dev/null || status=$?
  else
    # shellcheck disable=SC2086
    $cmd </dev/null || status=$?
  fi
  if [ "$status" = 0 ]; then
    sunk_log "s6: oneshot $name done"
    return 0
  fi
  if [ "$up" -gt 0 ] && { [ "$status" = 124 ] || [ "$status" = 137 ]; }; then
    SUNK_S6_FAILURE="s6 oneshot $name timed out after ${up}ms"
  else
    SUNK_S6_FAILURE="s6 oneshot $name failed (exit $status)"
  fi
  return 1
}

_sunk_s6_longrun() {
  local name=$1 down=$2 dir="$SUNK_S6_RUN/service/$1" cmd
  cmd=$(_sunk_s6_command "$name")
  mkdir -p "$dir"
  printf '#!/bin/sh\nexec %s </dev/null\n' "$cmd" >"$dir/run"
  chmod 0755 "$dir/run"
  # s6-supervise: milliseconds from SIGTERM to SIGKILL when the service is brought down.
  if [ "$down" -gt 0 ]; then printf '%s\n' "$down" >"$dir/timeout-kill"; fi
}

# Run the oneshots, then start the longruns. When a oneshot fails or times out, nothing more
# starts: the reason is logged, kept in SUNK_S6_FAILURE and SUNK_STARTUP_FAILED (the
# readiness probe reports it) and in the termination log, and the function returns 1.
sunk_s6_start() {
  local line name type up down longruns=0
  local -a lines=()
  [ -r "$SUNK_S6_DIR/services" ] || return 0
  mapfile -t lines <"$SUNK_S6_DIR/services"
  rm -f "$SUNK_STARTED" "$SUNK_STARTUP_FAILED"
  mkdir -p "$(dirname "$SUNK_STARTED")" "$(dirname "$SUNK_STARTUP_FAILED")"
  rm -rf "$SUNK_S6_RUN"
  mkdir -p "$SUNK_S6_RUN/scripts" "$SUNK_S6_RUN/service"
  for line in "${lines[@]}"; do
    read -r name type up down <<<"$line"
    [ -n "$name" ] || continue
    [ -r "$SUNK_S6_DIR/$name.script" ] || sunk_die "s6: $SUNK_S6_DIR/$name.script is missing"
    case "$type" in
      oneshot)
        if ! _sunk_s6_oneshot "$name" "${up:-0}"; then
          sunk_log "error: $SUNK_S6_FAILURE"
          printf '%s\n' "$SUNK_S6_FAILURE" >"$SUNK_STARTUP_FAILED"
          if [ -e "$SUNK_TERMINATION_LOG" ]; then
            printf '%s\n' "$SUNK_S6_FAILURE" >"$SUNK_TERMINATION_LOG" || true
          fi
          return 1
        fi
        ;;
      longrun)
        _sunk_s6_longrun "$name" "${down:-0}"
        longruns=1
        ;;
      *) sunk_die "s6: service $name has the unknown type '$type'" ;;
    esac
  done
  if [ "$longruns" = 1 ]; then
    SUNK_S6_SCAN="$SUNK_S6_RUN/service"
    sunk_log "s6: longruns supervised by s6-svscan in $SUNK_S6_SCAN"
    if [ "$SUNK_DRY_RUN" = 1 ]; then
      printf '+ s6-svscan %s\n' "$SUNK_S6_SCAN"
    else
      s6-svscan "$SUNK_S6_SCAN" </dev/null &
    fi
  fi
  : >"$SUNK_STARTED"
}

# exec the daemon; with longruns, run it as a child instead, so that stopping the container
# (SIGTERM) stops the daemon and then the longruns, each within its timeoutDown.
sunk_exec_with_services() {
  if [ -z "$SUNK_S6_SCAN" ] || [ "$SUNK_DRY_RUN" = 1 ]; then
    sunk_exec "$@"
  fi
  local pid status=0
  "$@" &
  pid=$!
  trap 'kill -TERM "$pid" 2>/dev/null' TERM INT
  # `wait` returns early when a trapped signal arrives: wait until the daemon is gone.
  while kill -0 "$pid" 2>/dev/null; do
    wait "$pid" || status=$?
  done
  sunk_log "$1 exited ($status): stopping the s6 longruns"
  s6-svscanctl -t "$SUNK_S6_SCAN" 2>/dev/null || true
  wait
  exit "$status"
}
