#!/bin/bash
# slapd in the foreground with one database for LDAP_SUFFIX, administered by
# cn=admin,<suffix> with LDAP_ADMIN_PASSWORD. On the first start (empty LDAP_DATADIR) the LDIF
# files in LDAP_SEED_DIR are loaded in name order. Everyone may read, except userPassword.
set -euo pipefail
suffix=${LDAP_SUFFIX:?LDAP_SUFFIX is required, e.g. dc=example,dc=org}
password=${LDAP_ADMIN_PASSWORD:?LDAP_ADMIN_PASSWORD is required}
datadir=${LDAP_DATADIR:-/var/lib/ldap}
seeds=${LDAP_SEED_DIR:-/etc/ldap/seed}
conf=/run/slapd/slapd.conf

die() {
  echo "sunk-ldap: error: $*" >&2
  exit 1
}
case "$suffix" in
  *[[:cntrl:]\"]*) die "LDAP_SUFFIX holds a control character or a quote" ;;
esac
case "$password" in
  *[[:cntrl:]]*) die "LDAP_ADMIN_PASSWORD holds a control character" ;;
esac

install -d -o openldap -g openldap /run/slapd "$datadir"
umask 027
cat >"$conf" <<CONF
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/nis.schema
include /etc/ldap/schema/inetorgperson.schema
# openssh-lpk: SSH public keys on user entries (what SSSD reads for sshd)
attributetype ( 1.3.6.1.4.1.24552.500.1.1.1.13 NAME 'sshPublicKey'
  DESC 'OpenSSH public key' EQUALITY octetStringMatch
  SYNTAX 1.3.6.1.4.1.1466.115.121.1.40 )
objectclass ( 1.3.6.1.4.1.24552.500.1.1.2.0 NAME 'ldapPublicKey' SUP top AUXILIARY
  DESC 'OpenSSH public key holder' MAY ( sshPublicKey \$ uid ) )
pidfile /run/slapd/slapd.pid
modulepath /usr/lib/ldap
moduleload back_mdb
database mdb
suffix "$suffix"
rootdn "cn=admin,$suffix"
rootpw $(slappasswd -s "$password")
directory $datadir
maxsize 104857600
index objectClass,uid,uidNumber,gidNumber,memberUid eq
access to attrs=userPassword by self write by anonymous auth by * none
access to * by * read
CONF
chgrp openldap "$conf"

if [ ! -e "$datadir/data.mdb" ]; then
  for ldif in "$seeds"/*.ldif; do
    [ -f "$ldif" ] || continue
    echo "sunk-ldap: loading $ldif"
    slapadd -f "$conf" -l "$ldif"
  done
fi
chown -R openldap:openldap "$datadir"
echo "sunk-ldap: serving $suffix on port 389"
exec slapd -d "${LDAP_DEBUG:-0}" -h ldap:/// -u openldap -g openldap -f "$conf"
