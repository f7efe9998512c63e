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
  local host=$1 port=$2 timeout=$3 start now
  start=$(date +%s)
  while :; do
    # shellcheck disable=SC2016 # expanded by the inner bash
    if timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$host" "$port" 2>/dev/null; then
      return 0
    fi
    now=$(date +%s)
    if [ $((now - start)) -ge "$timeout" ]; then
      sunk_die "$host:$port not reachable after ${timeout}s"
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
