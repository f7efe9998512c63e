#!/bin/bash
# First start (empty data dir): create the database and its user from MARIADB_* variables, as
# the upstream image does; later starts keep the data as it is. Then run mariadbd in the
# foreground.
set -euo pipefail
datadir=${MARIADB_DATADIR:-/var/lib/mysql}

sql_string() { # a single-quoted SQL string literal
  printf "'%s'" "${1//\'/\'\'}"
}
# shellcheck disable=SC2016  # the back quotes are literal
sql_name() { # a back-quoted SQL identifier
  printf '`%s`' "${1//\`/\`\`}"
}

args=(--user=mysql --datadir="$datadir" --bind-address=0.0.0.0 --skip-name-resolve)
if [ ! -d "$datadir/mysql" ]; then
  : "${MARIADB_USER:?MARIADB_USER is required on first start}"
  : "${MARIADB_PASSWORD:?MARIADB_PASSWORD is required on first start}"
  install -d -o mysql -g mysql "$datadir"
  mariadb-install-db --user=mysql --datadir="$datadir" --skip-test-db >/dev/null
  init=/run/mysqld/init.sql
  {
    if [ -n "${MARIADB_DATABASE:-}" ]; then
      echo "CREATE DATABASE IF NOT EXISTS $(sql_name "$MARIADB_DATABASE");"
    fi
    echo "CREATE USER $(sql_string "$MARIADB_USER")@'%' IDENTIFIED BY $(sql_string "$MARIADB_PASSWORD");"
    if [ -n "${MARIADB_DATABASE:-}" ]; then
      echo "GRANT ALL ON $(sql_name "$MARIADB_DATABASE").* TO $(sql_string "$MARIADB_USER")@'%';"
    fi
    # The root password: given (MARIADB_ROOT_PASSWORD, from a Secret), or random and never
    # shown (MARIADB_RANDOM_ROOT_PASSWORD; nothing prints it, unlike the upstream image).
    if [ -n "${MARIADB_ROOT_PASSWORD:-}" ]; then
      echo "ALTER USER 'root'@'localhost' IDENTIFIED BY $(sql_string "$MARIADB_ROOT_PASSWORD");"
    elif [ -n "${MARIADB_RANDOM_ROOT_PASSWORD:-}" ]; then
      root=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
      echo "ALTER USER 'root'@'localhost' IDENTIFIED BY $(sql_string "$root");"
    fi
    echo "FLUSH PRIVILEGES;"
  } >"$init"
  chown mysql "$init"
  chmod 0600 "$init"
  args+=(--init-file="$init")
  echo "sunk-mariadb: initialised $datadir"
fi
exec mariadbd "${args[@]}"
