#!/usr/bin/env bash
# open SUNK login image: sshd in the foreground with the Slurm client commands.
# Host keys come from a mounted Secret directory when present (stable across pod restarts),
# else they are generated; the message of the day names the cluster (SUNK_CLUSTER_NAME).
# Argument `munged` runs the munge sidecar, `sssd` the directory sidecar (SSSD in the
# foreground, its sockets shared with the other containers); any other argument is executed
# as given.
# Environment: see images/README.md ("login").
set -euo pipefail
SUNK_LIB=${SUNK_LIB:-/usr/local/lib/sunk/lib.sh}
# shellcheck source-path=SCRIPTDIR source=../common/sunk-lib.sh
. "$SUNK_LIB"
export SUNK_COMPONENT=login

SUNK_CLUSTER_NAME=${SUNK_CLUSTER_NAME:-slurm}
SUNK_SSH_DIR=${SUNK_SSH_DIR:-/etc/ssh}
SUNK_SSH_HOST_KEYS_SOURCE=${SUNK_SSH_HOST_KEYS_SOURCE:-/etc/ssh/host-keys-secret}
SUNK_SSHD_PORT=${SUNK_SSHD_PORT:-22}
SUNK_MOTD=${SUNK_MOTD:-/etc/motd}
SUNK_MOTD_EXTRA=${SUNK_MOTD_EXTRA:-}
# The nsscache config is the cluster's (mounted), not the package's LDAP example.
SUNK_NSSCACHE_CONF=${SUNK_NSSCACHE_CONF:-/etc/sunk/nsscache.conf}
SUNK_RUN_SSHD_DIR=${SUNK_RUN_SSHD_DIR:-/run/sshd}
SUNK_NSSWITCH=${SUNK_NSSWITCH:-/etc/nsswitch.conf}
SUNK_ETC=${SUNK_ETC:-/etc/slurm}
SUNK_CONTROLLER=${SUNK_CONTROLLER:-}
# directoryService: `sssd` makes sshd take users' keys from SSSD (the sidecar).
SUNK_DIRECTORY=${SUNK_DIRECTORY:-}
SUNK_SSSD_CONF_SOURCE=${SUNK_SSSD_CONF_SOURCE:-/etc/sunk/sssd/sssd.conf}
SUNK_SSSD_BIND_PASSWORD=${SUNK_SSSD_BIND_PASSWORD:-/etc/sunk/sssd-bind/password}
SUNK_SSSD_CONF=${SUNK_SSSD_CONF:-/etc/sssd/sssd.conf}
# Shared with the other containers through emptyDirs, which start empty.
SUNK_SSSD_PIPES=${SUNK_SSSD_PIPES:-/var/lib/sss/pipes}
SUNK_SSSD_MC=${SUNK_SSSD_MC:-/var/lib/sss/mc}
read -r -a extra <<<"${SUNK_EXTRA_ARGS:-}"

# The sidecar: sssd.conf from the operator's ConfigMap, plus the bind password from its Secret
# (one line; anything else could add keys to the domain section, which the file ends with).
sssd_foreground() {
  [ -f "$SUNK_SSSD_CONF_SOURCE" ] || sunk_die "no sssd.conf at $SUNK_SSSD_CONF_SOURCE"
  local conf
  conf=$(cat "$SUNK_SSSD_CONF_SOURCE")
  if [ -f "$SUNK_SSSD_BIND_PASSWORD" ]; then
    local password
    password=$(cat "$SUNK_SSSD_BIND_PASSWORD")  # $(...) drops the trailing line feeds
    case "$password" in
      '') sunk_die "the bind password in $SUNK_SSSD_BIND_PASSWORD is empty" ;;
      *[[:cntrl:]]*) sunk_die "the bind password in $SUNK_SSSD_BIND_PASSWORD holds a line feed or another control character" ;;
    esac
    conf=$(printf '%s\nldap_default_authtok_type = password\nldap_default_authtok = %s' "$conf" "$password")
  fi
  # A Pod's fsGroup makes the emptyDirs setgid: SSSD's sockets would take that group, and
  # SSSD refuses sockets not owned by root:root. Root owns the directories, so no capability
  # is needed to clear the bit.
  sunk_do install -d -m 0755 "$SUNK_SSSD_PIPES" "$SUNK_SSSD_MC"
  sunk_do chmod g-s "$SUNK_SSSD_PIPES" "$SUNK_SSSD_MC"
  # A restarted sidecar finds its previous sockets and caches in the emptyDirs: start clean.
  sunk_do find "$SUNK_SSSD_PIPES" "$SUNK_SSSD_MC" -mindepth 1 -delete
  sunk_do install -d -m 0700 "$SUNK_SSSD_PIPES/private"
  umask 077
  mkdir -p "$(dirname "$SUNK_SSSD_CONF")"
  printf '%s\n' "$conf" >"$SUNK_SSSD_CONF"
  sunk_log "sssd: directory from $SUNK_SSSD_CONF_SOURCE"
  sunk_exec sssd -i --logger=stderr -c "$SUNK_SSSD_CONF"
}

case "${1:-sshd}" in
  sshd) [ "$#" -gt 0 ] && shift ;;
  munged) sunk_munged_foreground ;;
  sssd) sssd_foreground ;;
  *) sunk_exec "$@" ;;
esac

host_keys() {
  local key found=0
  if [ -d "$SUNK_SSH_HOST_KEYS_SOURCE" ]; then
    for key in "$SUNK_SSH_HOST_KEYS_SOURCE"/ssh_host_*_key; do
      [ -f "$key" ] || continue
      found=1
      install -m 0600 "$key" "$SUNK_SSH_DIR/$(basename "$key")"
      if [ -f "$key.pub" ]; then
        install -m 0644 "$key.pub" "$SUNK_SSH_DIR/$(basename "$key").pub"
      fi
    done
  fi
  if [ "$found" = 1 ]; then
    sunk_log "host keys from $SUNK_SSH_HOST_KEYS_SOURCE"
  else
    sunk_log "no host keys mounted at $SUNK_SSH_HOST_KEYS_SOURCE: generating"
    for key in rsa ecdsa ed25519; do
      [ -f "$SUNK_SSH_DIR/ssh_host_${key}_key" ] ||
        ssh-keygen -q -t "$key" -N '' -C "$SUNK_CLUSTER_NAME-login" \
          -f "$SUNK_SSH_DIR/ssh_host_${key}_key"
    done
  fi
}

motd() {
  {
    printf 'Welcome to the %s Slurm cluster (open SUNK).\n' "$SUNK_CLUSTER_NAME"
    printf '  sinfo: nodes and partitions    squeue: the queue    sbatch/srun: submit\n'
    [ -z "$SUNK_MOTD_EXTRA" ] || printf '%s\n' "$SUNK_MOTD_EXTRA"
  } >"$SUNK_MOTD"
}

# Optional user directory: nsscache fills the `cache` NSS source from a mounted config.
nsscache_update() {
  [ -f "$SUNK_NSSCACHE_CONF" ] || return 0
  if ! command -v nsscache >/dev/null; then
    sunk_log "warning: $SUNK_NSSCACHE_CONF mounted but nsscache is not installed"
    return 0
  fi
  sunk_do nsscache -c "$SUNK_NSSCACHE_CONF" update --full ||
    sunk_log "warning: nsscache update failed; users come from /etc/passwd only"
  # Look users and groups up in the cache after the local files.
  local db
  for db in passwd group shadow; do
    if ! grep -Eq "^$db:.*[[:space:]]cache([[:space:]]|\$)" "$SUNK_NSSWITCH"; then
      sed -i -E "s/^($db:.*)\$/\1 cache/" "$SUNK_NSSWITCH"
    fi
  done
}

# directoryService: sshd asks the sssd sidecar for a user's keys (the directory's
# sshPublicKey), as an unprivileged user; a missing home is created at the first login (PAM).
directory_keys() {
  case "$SUNK_DIRECTORY" in
    '') return 0 ;;
    sssd) ;;
    *) sunk_die "SUNK_DIRECTORY must be sssd or empty, not '$SUNK_DIRECTORY'" ;;
  esac
  mkdir -p "$SUNK_SSH_DIR/sshd_config.d"
  printf '%s\n' 'AuthorizedKeysCommand /usr/bin/sss_ssh_authorizedkeys %u' \
    'AuthorizedKeysCommandUser nobody' >"$SUNK_SSH_DIR/sshd_config.d/20-sunk-directory.conf"
  sunk_log "sshd: user keys from the directory (sss_ssh_authorizedkeys)"
}

# Client configuration: a mounted /etc/slurm/slurm.conf, else configless through sackd, which
# caches the controller's files in /run/slurm/conf where the client commands look for them.
slurm_config() {
  if [ -f "$SUNK_ETC/slurm.conf" ]; then
    return 0
  fi
  [ -n "$SUNK_CONTROLLER" ] ||
    sunk_die "neither $SUNK_ETC/slurm.conf nor SUNK_CONTROLLER (for configless sackd) is set"
  sunk_split_hostport "$SUNK_CONTROLLER" 6817
  sunk_do mkdir -p /run/slurm
  sunk_do sackd --conf-server "$SUNK_HOST:$SUNK_PORT"
}

host_keys
motd
directory_keys
nsscache_update
sunk_munge
slurm_config
sunk_do mkdir -p "$SUNK_RUN_SSHD_DIR"
# s6 services: oneshots before sshd. A failed one ends the container, its reason in the
# termination message: the Pod restarts it (and the oneshots) with back-off, out of the Service.
sunk_s6_start || sunk_die "$SUNK_S6_FAILURE: sshd not started"
sunk_exec_with_services /usr/sbin/sshd -D -e -p "$SUNK_SSHD_PORT" "${extra[@]}" "$@"
