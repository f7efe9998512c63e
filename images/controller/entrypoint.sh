#!/usr/bin/env bash
# open SUNK controller image: one image, three daemons. The first argument picks the role:
#   slurmctld | slurmdbd | slurmrestd   the daemon, in the foreground, as a non-root user
#   munged                              the munge sidecar (SUNK_MUNGED=external in the others)
# Anything else is executed as given (e.g. `scontrol ping` for a probe, `bash` for debugging).
# Environment: see images/README.md ("controller").
set -euo pipefail
SUNK_LIB=${SUNK_LIB:-/usr/local/lib/sunk/lib.sh}
# shellcheck source-path=SCRIPTDIR source=../common/sunk-lib.sh
. "$SUNK_LIB"

role=${1:-slurmctld}
[ "$#" -gt 0 ] && shift
export SUNK_COMPONENT=$role

SUNK_ETC=${SUNK_ETC:-/etc/slurm}
SUNK_SLURM_USER=${SUNK_SLURM_USER:-slurm}
SUNK_STATE_DIR=${SUNK_STATE_DIR:-/var/spool/slurmctld}
SUNK_RUN_DIR=${SUNK_RUN_DIR:-/run/slurm}
SUNK_SLURMDBD_RUN_DIR=${SUNK_SLURMDBD_RUN_DIR:-/run/slurmdbd}
SUNK_SLURMDBD_CONF=${SUNK_SLURMDBD_CONF:-$SUNK_ETC/slurmdbd.conf}
SUNK_RESTD_USER=${SUNK_RESTD_USER:-slurmrestd}
SUNK_RESTD_LISTEN=${SUNK_RESTD_LISTEN:-0.0.0.0:6820}
SUNK_RESTD_AUTH=${SUNK_RESTD_AUTH:-rest_auth/jwt}
# slurmrestd unshares its file and System V namespaces, which an unprivileged pod may not do.
SUNK_RESTD_SECURITY=${SUNK_RESTD_SECURITY-disable_unshare_files,disable_unshare_sysv}
SUNK_DB_WAIT=${SUNK_DB_WAIT:-}
# The MariaDB client library slurmdbd loads (see mariadb-compat.sh); empty: the system one.
SUNK_MARIADB_COMPAT_DIR=${SUNK_MARIADB_COMPAT_DIR-/opt/sunk/mariadb-compat/lib}
SUNK_DB_TIMEOUT=${SUNK_DB_TIMEOUT:-300}
# Extra daemon flags, split on spaces (e.g. "-vvv").
read -r -a extra <<<"${SUNK_EXTRA_ARGS:-}"

root=0
[ "$(id -u)" = 0 ] && root=1

require_conf() {
  [ -f "$SUNK_ETC/slurm.conf" ] || sunk_die "$SUNK_ETC/slurm.conf missing: mount the config"
}

# auth/jwt needs its key file; say which Secret is missing instead of letting the daemon die.
require_jwt_key() {
  local conf=$1 key
  key=$(sed -n 's/^AuthAltParameters=.*jwt_key=\([^,[:space:]]*\).*/\1/p' "$conf" | head -n1)
  [ -z "$key" ] || [ -f "$key" ] || sunk_die "JWT key $key missing: mount the JWT Secret there"
}

case "$role" in
  slurmctld)
    require_conf
    require_jwt_key "$SUNK_ETC/slurm.conf"
    sunk_munge
    if [ "$root" = 1 ] || [ "$SUNK_DRY_RUN" = 1 ]; then
      sunk_own_dirs "$SUNK_SLURM_USER" "$SUNK_STATE_DIR" "$SUNK_RUN_DIR"
    fi
    [ "$root" = 1 ] || [ -w "$SUNK_STATE_DIR" ] || sunk_die "$SUNK_STATE_DIR is not writable"
    sunk_as_user "$SUNK_SLURM_USER" slurmctld -D -f "$SUNK_ETC/slurm.conf" "${extra[@]}" "$@"
    ;;
  slurmdbd)
    [ -f "$SUNK_SLURMDBD_CONF" ] || sunk_die "$SUNK_SLURMDBD_CONF missing: mount the Secret"
    require_jwt_key "$SUNK_SLURMDBD_CONF"
    sunk_munge
    # slurmdbd refuses a slurmdbd.conf not owned by SlurmUser with mode 0600, which a mounted
    # Secret cannot guarantee: copy it (and slurm.conf, if any) into a private directory.
    conf_dir=$SUNK_SLURMDBD_RUN_DIR/etc
    if [ "$root" = 1 ] || [ "$SUNK_DRY_RUN" = 1 ]; then
      sunk_own_dirs "$SUNK_SLURM_USER" "$SUNK_SLURMDBD_RUN_DIR"
      sunk_do install -d -m 0700 -o "$SUNK_SLURM_USER" -g "$SUNK_SLURM_USER" "$conf_dir"
      sunk_do install -m 0600 -o "$SUNK_SLURM_USER" -g "$SUNK_SLURM_USER" \
        "$SUNK_SLURMDBD_CONF" "$conf_dir/slurmdbd.conf"
    else
      mkdir -p "$conf_dir"
      install -m 0600 "$SUNK_SLURMDBD_CONF" "$conf_dir/slurmdbd.conf"
    fi
    if [ -n "$SUNK_DB_WAIT" ]; then
      sunk_split_hostport "$SUNK_DB_WAIT" 3306
      sunk_log "waiting for the database at $SUNK_HOST:$SUNK_PORT"
      sunk_wait_tcp "$SUNK_HOST" "$SUNK_PORT" "$SUNK_DB_TIMEOUT"
    fi
    # slurmdbd reads slurmdbd.conf from the directory of $SLURM_CONF.
    dbd_env=(SLURM_CONF="$conf_dir/slurm.conf")
    if [ -n "$SUNK_MARIADB_COMPAT_DIR" ] && [ -e "$SUNK_MARIADB_COMPAT_DIR/libmariadb.so.3" ]; then
      dbd_env+=(LD_LIBRARY_PATH="$SUNK_MARIADB_COMPAT_DIR")
    fi
    sunk_as_user "$SUNK_SLURM_USER" env "${dbd_env[@]}" slurmdbd -D "${extra[@]}" "$@"
    ;;
  slurmrestd)
    require_conf
    sunk_munge
    # slurmrestd refuses to run as root or as SlurmUser: it has a user of its own.
    restd_env=(SLURM_CONF="$SUNK_ETC/slurm.conf" SLURMRESTD_SECURITY="$SUNK_RESTD_SECURITY")
    # With rest_auth/jwt it passes the client's token on: it must speak auth/jwt itself.
    case "$SUNK_RESTD_AUTH" in
      *rest_auth/jwt*) restd_env+=(SLURM_JWT=daemon) ;;
    esac
    sunk_as_user "$SUNK_RESTD_USER" env "${restd_env[@]}" slurmrestd -a "$SUNK_RESTD_AUTH" "${extra[@]}" "$@" "$SUNK_RESTD_LISTEN"
    ;;
  munged)
    sunk_munged_foreground
    ;;
  *)
    sunk_exec "$role" "$@"
    ;;
esac
