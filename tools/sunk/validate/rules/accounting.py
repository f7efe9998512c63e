"""Accounting database rules: an external database needs a host and a password, and is not
moco."""

from __future__ import annotations

from collections.abc import Iterator

from sunk.validate.rules.context import RuleContext, as_map, get
from sunk.validate.rules.registry import Hit, rule

_HOST_PATHS = (
    ("accounting", "external", "host"),
    ("accounting", "database", "type"),
    ("accounting", "external", "enabled"),
    ("accounting", "external"),
    ("accounting",),
)
_PASSWORD_PATHS = (("accounting", "external", "passwordSecret"), *_HOST_PATHS)


def _external(ctx: RuleContext) -> bool:
    acct = as_map(ctx.values.get("accounting"))
    return get(acct, "database", "type") == "external" or get(acct, "external", "enabled") is True


@rule(
    "SUNK013",
    "accounting-external-without-host",
    "error",
    "Accounting uses an external database but accounting.external.host is empty.",
    "set accounting.external.host (or use database.type mariadb/moco)",
)
def external_without_host(ctx: RuleContext) -> Iterator[Hit]:
    """With `accounting.database.type: external` (or `accounting.external.enabled: true`), slurmdbd
    connects to a database the chart does not run, at `accounting.external.host`; with the host
    empty it has nowhere to connect. Accounting turned off (`accounting.enabled: false`) is not
    reported. The finding points at the key the values file set.

    Fails:
        accounting:
          database: {type: external}
          external:
            passwordSecret: {name: slurm-db, key: password}

    Passes:
        accounting:
          database: {type: external}
          external:
            host: db.example.org
            passwordSecret: {name: slurm-db, key: password}
    """
    acct = as_map(ctx.values.get("accounting"))
    on = acct.get("enabled", True) is not False and _external(ctx)
    if on and not get(acct, "external", "host"):
        yield Hit(ctx.user_path(*_HOST_PATHS), "external accounting database without a host")


@rule(
    "SUNK014",
    "accounting-external-without-password",
    "error",
    "Accounting uses an external database but no passwordSecret is given.",
    "set accounting.external.passwordSecret: {name: <secret>, key: password}",
)
def external_without_password(ctx: RuleContext) -> Iterator[Hit]:
    """An external accounting database (`accounting.database.type: external` or
    `accounting.external.enabled: true`) is reached with the password in the Secret named by
    `accounting.external.passwordSecret`, and the values name none. Accounting turned off is not
    reported.

    Fails:
        accounting:
          database: {type: external}
          external:
            host: db.example.org

    Passes:
        accounting:
          database: {type: external}
          external:
            host: db.example.org
            passwordSecret: {name: slurm-db, key: password}
    """
    acct = as_map(ctx.values.get("accounting"))
    on = acct.get("enabled", True) is not False and _external(ctx)
    if on and not get(acct, "external", "passwordSecret", "name"):
        yield Hit(
            ctx.user_path(*_PASSWORD_PATHS), "external accounting database without passwordSecret"
        )


@rule(
    "SUNK023",
    "accounting-external-conflicts-moco",
    "error",
    "accounting.external.enabled is set while database.type is moco.",
    "choose one: database.type external (with external.*) or moco",
)
def external_vs_moco(ctx: RuleContext) -> Iterator[Hit]:
    """`accounting.database.type: moco` asks for a MySQL cluster run by the moco operator, while
    `accounting.external.enabled: true` asks for a database outside the cluster. The operator
    takes the external one and runs no database, so the `moco` beside it would silently do
    nothing: the values should say one thing.

    Fails:
        accounting:
          database: {type: moco}
          external:
            enabled: true
            host: db.example.org
            passwordSecret: {name: slurm-db, key: password}

    Passes:
        accounting:
          database: {type: external}
          external:
            host: db.example.org
            passwordSecret: {name: slurm-db, key: password}
    """
    acct = as_map(ctx.values.get("accounting"))
    if get(acct, "external", "enabled") is True and get(acct, "database", "type") == "moco":
        yield Hit(("accounting", "external", "enabled"), "external.enabled conflicts with moco")
