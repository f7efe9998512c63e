#!/usr/bin/env bash
# Image build step shared by the Slurm images: fixed uids, then the distribution's Slurm packages.
#   install-slurm.sh PACKAGE...
# Build arguments (as environment): SLURM_VERSION (the series the image must carry, e.g. 24.11)
# and SLURM_SUITE (optional: install the Slurm packages from another suite of the same archive,
# e.g. sid, to switch versions; the archive URI is read from the image's own apt sources).
set -euo pipefail
SLURM_VERSION=${SLURM_VERSION:?}
SLURM_SUITE=${SLURM_SUITE:-}
export DEBIAN_FRONTEND=noninteractive

# Fixed ids, as SUNK: slurm 401 (pods use fsGroup 401), munge 402, slurmrestd 403.
add_user() {
  getent group "$1" >/dev/null || groupadd --system --gid "$2" "$1"
  getent passwd "$1" >/dev/null ||
    useradd --system --uid "$2" --gid "$2" --home-dir "$3" --no-create-home \
      --shell /usr/sbin/nologin "$1"
}
add_user slurm 401 /var/lib/slurm
add_user munge 402 /nonexistent
add_user slurmrestd 403 /nonexistent

apt_opts=(-y -q --no-install-recommends)
if [ -n "$SLURM_SUITE" ]; then
  uri=$(sed -n 's/^deb \([^ ]*\) .*/\1/p' /etc/apt/sources.list 2>/dev/null | head -n1)
  [ -n "$uri" ] || uri=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources | head -n1)
  [ -n "$uri" ] || { echo "no apt source to derive the $SLURM_SUITE suite from" >&2; exit 1; }
  # check-valid-until=no: testing suites' Release files expire within days, and a mirror
  # snapshot of one (as pinned build machines use) is refused once it has; the signature is
  # still checked.
  echo "deb [check-valid-until=no] $uri $SLURM_SUITE main" \
    >/etc/apt/sources.list.d/slurm-suite.list
  # Only Slurm and the libraries its release needs newer (PMIx, hwloc and hwloc's oneAPI Level
  # Zero loader) come from that suite; everything else stays the base's (at equal priority apt
  # takes the newest version of every package, and a newer python3 breaks the base's sssd).
  cat >/etc/apt/preferences.d/slurm-suite <<EOF
Package: *
Pin: release n=$SLURM_SUITE
Pin-Priority: 100

Package: slurm* sackd libslurm* libpmi* libpmix* libhwloc* libze1
Pin: release n=$SLURM_SUITE
Pin-Priority: 990
EOF
fi
apt-get update -q
apt-get install "${apt_opts[@]}" "$@"

version=$(dpkg-query -W -f '${Version}' slurm-client 2>/dev/null || true)
[ -n "$version" ] || version=$(dpkg-query -W -f '${Version}' slurmd 2>/dev/null || true)
[ -n "$version" ] || version=$(dpkg-query -W -f '${Version}' libslurm-dev 2>/dev/null || true)
upstream=${version#*:}
case "$upstream" in
  "$SLURM_VERSION".*) echo "Slurm $upstream" ;;
  *)
    echo "this base carries Slurm '$version', not $SLURM_VERSION.x: every image of a cluster" \
      "must run one Slurm version (pick another BASE_IMAGE, SLURM_SUITE or SLURM_VERSION)" >&2
    exit 1
    ;;
esac
rm -f /etc/munge/munge.key
apt-get clean
rm -rf /var/lib/apt/lists/*
install -d /etc/slurm /etc/slurm/prolog.d /etc/slurm/epilog.d /var/spool/slurmd
install -d -o slurm -g slurm /run/slurm /var/log/slurm /var/spool/slurmctld /run/slurmdbd
install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
install -d -o munge -g munge -m 0755 /run/munge
install -d /etc/munge-secret
