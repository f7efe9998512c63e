"""sssd.conf for `directoryService`: one LDAP domain, read by the `sssd` sidecar of every Slurm
Pod (sunk.operator.directory).

SSSD reads an INI file: a line is ``key = value`` (the value runs to the end of the line) and
``#``/``;`` start a comment line. A line feed in a value would add a key, so every value passes
the guard (``check_value``: no control character, ``#``, ``"`` or ``\\``). The bind password is
not rendered: the file travels in a ConfigMap, and the sidecar appends
``ldap_default_authtok`` from the password Secret when it starts; that is why the domain
section comes last.

What the domain is for: identities (``id_provider = ldap``) and SSH public keys. Passwords are
never checked (``auth_provider = none``): users log in with their keys only.
"""

from __future__ import annotations

from sunk.models.values import DirectoryService
from sunk.slurmconf.format import BANNER
from sunk.slurmconf.guard import UnsafeConfigError, check_value

FILE = "sssd.conf"
DOMAIN = "directory"
# Where the sidecar finds the CA certificate (sunk.operator.directory mounts it there).
CA_DIR = "/etc/sunk/sssd-ca"
CA_FILE = f"{CA_DIR}/ca.crt"
# How long a lookup that found nothing is believed; also the delay before a user added to
# the directory after a failed lookup (a login attempt before the entry existed) is seen.
NEGATIVE_TIMEOUT = 15
# The clients' shared memory cache would otherwise serve an entry for 300 s (SSSD's default)
# whatever `entry_cache_timeout` says.
MEMCACHE_MAX = 300


def _value(text: str, where: str, *, words: bool = False) -> str:
    return check_value(text, FILE, f"directoryService.{where}", words=words)


def _uri(text: str, where: str) -> str:
    """One word, and no comma: SSSD splits `ldap_uri` at commas, so one would add a server."""
    _value(text, where, words=True)
    if "," in text:
        raise UnsafeConfigError(FILE, f"directoryService.{where}", f"URI {text!r} holds a comma")
    return text


def render_sssd_conf(directory: DirectoryService) -> str:
    lines = [
        "[sssd]",
        "services = nss, pam, ssh",
        f"domains = {DOMAIN}",
        "",
        "[nss]",
        f"entry_negative_timeout = {NEGATIVE_TIMEOUT}",
        f"memcache_timeout = {min(directory.cacheTimeout, MEMCACHE_MAX)}",
        "",
        "[pam]",
        "",
        "[ssh]",
        "",
        f"[domain/{DOMAIN}]",
        "id_provider = ldap",
        "auth_provider = none",
    ]
    if directory.allowGroups:
        groups = [_value(g, f"allowGroups[{i}]") for i, g in enumerate(directory.allowGroups)]
        lines += ["access_provider = simple", f"simple_allow_groups = {', '.join(groups)}"]
    else:
        lines.append("access_provider = permit")
    uris = [_uri(u, f"ldapUri[{i}]") for i, u in enumerate(directory.ldapUri)]
    lines += [
        f"ldap_uri = {', '.join(uris)}",
        f"ldap_search_base = {_value(directory.searchBase, 'searchBase')}",
        f"ldap_schema = {directory.schema_}",
        f"ldap_id_use_start_tls = {'true' if directory.startTls else 'false'}",
        "ldap_tls_reqcert = demand",
    ]
    if directory.caSecret is not None:
        lines.append(f"ldap_tls_cacert = {CA_FILE}")
    lines += [
        f"entry_cache_timeout = {directory.cacheTimeout}",
        "cache_credentials = false",
        "enumerate = false",
        f"default_shell = {_value(directory.defaultShell, 'defaultShell')}",
    ]
    if directory.homeDirectory:
        lines.append(f"override_homedir = {_value(directory.homeDirectory, 'homeDirectory')}")
    if directory.bindDn:
        lines.append(f"ldap_default_bind_dn = {_value(directory.bindDn, 'bindDn')}")
    return BANNER + "\n".join(lines) + "\n"
