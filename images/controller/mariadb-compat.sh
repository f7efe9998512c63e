#!/usr/bin/env bash
# Image build step: unpack an older MariaDB client library for slurmdbd.
#
# trixie's libmariadb3 (MariaDB Connector/C 3.4.x) breaks slurmdbd 24.11: its first query fails
# with "5027 Number of columns in result ... exceeds maximum allowed number of columns" and
# slurmdbd exits ("_check_mysql_concat_is_sane: null result"). The bookworm connector (3.3.x)
# works. It is unpacked beside the system one; only slurmdbd is pointed at it (LD_LIBRARY_PATH,
# see entrypoint.sh). MARIADB_COMPAT_SUITE= (empty) skips this step.
set -euo pipefail
suite=${MARIADB_COMPAT_SUITE:-}
target=/opt/sunk/mariadb-compat/lib
[ -n "$suite" ] || { echo "mariadb-compat: skipped"; exit 0; }
uri=$(sed -n 's/^deb \([^ ]*\) .*/\1/p' /etc/apt/sources.list 2>/dev/null | head -n1)
[ -n "$uri" ] || uri=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources | head -n1)
[ -n "$uri" ] || { echo "mariadb-compat: no apt source in the image" >&2; exit 1; }
work=$(mktemp -d)
mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
echo "deb $uri $suite main" >"$work/sources.list"
opts=(-q "-oDir::Etc::SourceList=$work/sources.list" "-oDir::Etc::SourceParts=-"
  "-oDir::State::Lists=$work/lists" "-oDir::Cache=$work/cache" "-oAPT::Sandbox::User=root")
apt-get "${opts[@]}" update
(cd "$work" && apt-get "${opts[@]}" download "libmariadb3/$suite")
dpkg-deb -x "$work"/libmariadb3_*.deb "$work/x"
mkdir -p "$target"
cp "$work"/x/usr/lib/*/libmariadb.so.3 "$target/"
dpkg-deb -f "$work"/libmariadb3_*.deb Version >"$target/VERSION"
rm -rf "$work"
echo "mariadb-compat: libmariadb3 $(cat "$target/VERSION") from $suite in $target"
