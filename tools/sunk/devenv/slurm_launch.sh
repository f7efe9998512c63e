#!/bin/sh
# usage: launch.sh ROOT HOSTNAME GPUS USERSPEC OWN_MUNGED CMD [ARG...]
set -eu
root=$1
host=$2
gpus=$3
userspec=$4
own_munged=$5
shift 5
hostname "$host"
if [ -n "${SUNK_RELEASE_ROOT:-}" ]; then
  # Another Slurm release's programs and libraries over this root's, for this process only:
  # configuration, state, users and keys stay this root's, as a new image's Pod keeps its
  # volumes (SlurmRuntime.use_release).
  mount --bind -o ro "$SUNK_RELEASE_ROOT/usr" "$root/usr"
  mount --bind -o ro "$SUNK_RELEASE_ROOT/etc/ld.so.cache" "$root/etc/ld.so.cache"
  unset SUNK_RELEASE_ROOT
fi
mount -t tmpfs -o mode=0755,size=8m,nosuid sunk-dev "$root/dev"
for dev in null zero full random urandom tty; do
  : >"$root/dev/$dev"
  mount --bind "/dev/$dev" "$root/dev/$dev"
done
mkdir -p "$root/dev/pts" "$root/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 sunk-devpts "$root/dev/pts"
ln -s pts/ptmx "$root/dev/ptmx"
mount -t tmpfs -o mode=1777,nosuid,nodev sunk-shm "$root/dev/shm"
ln -s /proc/self/fd "$root/dev/fd"
ln -s /proc/self/fd/0 "$root/dev/stdin"
ln -s /proc/self/fd/1 "$root/dev/stdout"
ln -s /proc/self/fd/2 "$root/dev/stderr"
i=0
while [ "$i" -lt "$gpus" ]; do
  mknod -m 0666 "$root/dev/nvidia$i" c 195 "$i"
  i=$((i + 1))
done
if [ "$own_munged" = 1 ]; then
  # Every slurmd needs a munged of its own: one munged shared by several slurmd rejects the
  # second decode of a job credential as a replay ("Invalid job credential").
  mount -t tmpfs -o mode=0755,size=4m,nosuid,nodev sunk-munge "$root/run/munge"
  chroot "$root" chown munge:munge /run/munge
  chroot --userspec=munge:munge "$root" /usr/sbin/munged --force \
    --seed-file=/run/munge/munged.seed --pid-file=/run/munge/munged.pid \
    --log-file="/var/log/munge/munged-$host.log"
fi
if [ -n "$userspec" ]; then
  exec chroot --userspec="$userspec" "$root" "$@"
fi
exec chroot "$root" "$@"
