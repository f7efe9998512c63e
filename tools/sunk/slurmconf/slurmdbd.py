"""slurmdbd.conf. It carries the database password, so the operator stores it in a Secret."""

from __future__ import annotations

from sunk.slurmconf.format import BANNER, key_lines, pair
from sunk.slurmconf.guard import check_key, check_value, find_key, owned
from sunk.slurmconf.inputs import JWT_KEY, ClusterInputs

# MOCO's read-write user; its password is in the Secret `moco-<MySQLCluster name>`.
MOCO_USER = "moco-writable"
# SUNK's documented slurmdbd defaults.
DEFAULTS: dict[str, object] = {
    "ArchiveEvents": "yes",
    "ArchiveJobs": "yes",
    "ArchiveResvs": "yes",
    "ArchiveSteps": "no",
    "ArchiveSuspend": "no",
    "ArchiveTXN": "no",
    "ArchiveUsage": "no",
    "PurgeEventAfter": "1month",
    "PurgeJobAfter": "12month",
    "PurgeResvAfter": "1month",
    "PurgeStepAfter": "1month",
    "PurgeSuspendAfter": "1month",
    "PurgeTXNAfter": "12month",
    "PurgeUsageAfter": "24month",
    "DebugLevel": "verbose",
}
OWNED = frozenset(
    {
        "AuthType",
        "AuthAltTypes",
        "AuthAltParameters",
        "DbdHost",
        "DbdPort",
        "SlurmUser",
        "StorageType",
        "StorageHost",
        "StoragePort",
        "StorageUser",
        "StoragePass",
        "StorageLoc",
        "PidFile",
    }
)


FILE = "slurmdbd.conf"


def render_slurmdbd_conf(inputs: ClusterInputs, warnings: list[str]) -> str:
    acct, ep = inputs.cluster.accounting, inputs.endpoints
    external = acct.database_kind() == "external"
    user = "slurm"
    if external:
        user = acct.external.user
    elif acct.database.type == "moco":
        user = MOCO_USER
    settings: dict[str, object] = {
        "AuthType": "auth/munge",
        "AuthAltTypes": "auth/jwt" if inputs.cluster.jwt.enabled else None,
        "AuthAltParameters": f"jwt_key={JWT_KEY}" if inputs.cluster.jwt.enabled else None,
        "DbdHost": ep.dbd_host,
        "DbdPort": ep.dbd_port,
        "SlurmUser": "slurm",
        "PidFile": "/run/slurmdbd/slurmdbd.pid",
        "StorageType": "accounting_storage/mysql",
        "StorageHost": ep.storage_host,
        "StoragePort": ep.storage_port,
        "StorageUser": user,
        "StorageLoc": acct.database.name,
        **DEFAULTS,
    }
    # Values from the spec, checked under their own key paths.
    for key, where in (
        ("StorageHost", "accounting.external.host"),
        ("StorageUser", "accounting.external.user"),
        ("StorageLoc", "accounting.database.name"),
    ):
        check_value(str(settings[key]), FILE, where, words=True)
    for key in sorted(acct.config):
        check_key(key, FILE, f"accounting.config.{key}")
        if owned(key, OWNED):
            warnings.append(f"accounting.config.{key}: managed by the operator; ignored")
            continue
        settings[find_key(settings, key) or key] = acct.config[key]
    out = BANNER + "\n".join(key_lines(settings, FILE, "accounting.config")) + "\n"
    if inputs.db_password is None:
        return out + "# StoragePass is added by the operator from the database Secret.\n"
    return (
        out + pair("StoragePass", inputs.db_password, FILE, "the database password Secret") + "\n"
    )
