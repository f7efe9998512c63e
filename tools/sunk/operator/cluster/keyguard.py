"""Which key Secrets the operator made for a SlurmCluster, and what happens when one goes (pure).

``status.keys`` records, for every key the operator created, the Secret's name and a
fingerprint of its data. A recorded key whose Secret has disappeared is *missing*: the cluster
is reported (``KeyMissing``) and the key is not made again, because a new munge or JWT key
splits the cluster between Pods that hold the old key and Pods that get the new one. The user
asks for new keys with the ``sunk.coreweave.com/regenerate-keys: "true"`` annotation.

A key the user provides (``munge.existingSecret``, ``jwt.existingSecret``) is never one of
these: the operator neither records nor creates it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sunk.operator import names
from sunk.operator.cluster import keys
from sunk.operator.hashing import stable_hash

FINGERPRINT_LENGTH = 16
REGENERATE = "true"  # the annotation value that asks for missing keys to be made again


def fingerprint(data: Mapping[str, str] | None) -> str:
    """The first 16 hex digits of sha256 over a Secret's ``data`` (its base64 values) written
    as compact JSON with sorted keys; the same as
    ``kubectl get secret NAME -o json | jq -jcS .data | sha256sum | cut -c1-16``."""
    return stable_hash(dict(data or {}), FINGERPRINT_LENGTH)


def record(secret: str, data: Mapping[str, str] | None) -> dict[str, str]:
    """One entry of ``status.keys``."""
    return {"secretName": secret, "fingerprint": fingerprint(data)}


@dataclass(frozen=True)
class KeySlot:
    """A key Secret the operator makes: ``field`` names its entry in ``status.keys``."""

    field: str
    what: str  # for messages: "munge key"
    secret: str
    generate: Callable[[], dict[str, str]] = field(compare=False, repr=False)


def slots(spec: Any) -> list[KeySlot]:
    """The key Secrets the operator makes for a SlurmCluster spec: munge and JWT unless the
    user brings their own Secret, the SSH host keys when login is enabled, the database
    password when the operator runs MariaDB."""
    cluster = spec.clusterName
    out = []
    if not spec.munge.existingSecret:
        out.append(KeySlot("munge", "munge key", names.munge_secret(cluster), keys.munge_key))
    if not spec.jwt.existingSecret:
        out.append(KeySlot("jwt", "JWT key", names.jwt_secret(cluster), keys.jwt_key))
    if spec.login.enabled:
        out.append(
            KeySlot(
                "sshHostKeys",
                "SSH host keys",
                names.hostkeys_secret(cluster),
                keys.ssh_host_keys,
            )
        )
    acct = spec.accounting
    external = acct.database.type == "external" or acct.external.enabled
    if acct.enabled and not external and acct.database.type == "mariadb":
        out.append(
            KeySlot(
                "databasePassword",
                "database password",
                names.db_secret(cluster),
                keys.db_password,
            )
        )
    return out


def regenerate_requested(annotations: Mapping[str, str] | None) -> bool:
    return (annotations or {}).get(names.ANN_REGENERATE_KEYS) == REGENERATE


@dataclass(frozen=True)
class KeyPlan:
    """What to do with a cluster's key Secrets.

    ``create``: never recorded (a new cluster, a component just enabled), or recorded, gone
    and asked for again (those are also in ``renewed``). ``missing``: recorded and gone, not
    asked for: report, make nothing. ``changed``: present, but not the Secret that was
    recorded (someone replaced it): adopt it and say so. ``records``: ``status.keys`` for the
    Secrets present now; the caller adds the ones it creates. Records of keys the spec no
    longer uses are kept, so turning a component off and on again cannot silently replace
    its key either."""

    create: tuple[KeySlot, ...] = ()
    renewed: tuple[KeySlot, ...] = ()
    missing: tuple[KeySlot, ...] = ()
    changed: tuple[tuple[KeySlot, str, str], ...] = ()  # (slot, recorded, now)
    records: dict[str, dict[str, str]] = field(default_factory=dict)


def plan_keys(
    wanted: list[KeySlot],
    recorded: Mapping[str, Any] | None,
    live: Mapping[str, Mapping[str, str] | None],
    regenerate: bool,
) -> KeyPlan:
    """``live``: Secret name → its ``data``, or None when the Secret does not exist."""
    records = {k: dict(v) for k, v in (recorded or {}).items() if isinstance(v, Mapping)}
    create, renewed, missing, changed = [], [], [], []
    for slot in wanted:
        old = records.get(slot.field)
        if old is not None and old.get("secretName") != slot.secret:
            old = None  # recorded for another Secret: not a record of this one
        data = live.get(slot.secret)
        if data is not None:
            now = record(slot.secret, data)
            if old is not None and old.get("fingerprint") != now["fingerprint"]:
                changed.append((slot, str(old.get("fingerprint")), now["fingerprint"]))
            records[slot.field] = now
        elif old is None:
            create.append(slot)
        elif regenerate:
            create.append(slot)
            renewed.append(slot)
        else:
            missing.append(slot)
    return KeyPlan(tuple(create), tuple(renewed), tuple(missing), tuple(changed), records)


def missing_message(plan: KeyPlan) -> str:
    """The KeyMissing condition and Event message; stable while nothing changes, so the Event
    is written once."""
    gone = ", ".join(
        f"{s.what} Secret {s.secret} (fingerprint {plan.records[s.field]['fingerprint']})"
        for s in plan.missing
    )
    verb = "is" if len(plan.missing) == 1 else "are"
    return (
        f"{gone} {verb} gone and not regenerated: restore the Secret, or annotate the "
        f'SlurmCluster {names.ANN_REGENERATE_KEYS}="{REGENERATE}" to generate a new key '
        "(the daemons that use it then need a restart)"
    )


def regenerated_message(renewed: list[tuple[KeySlot, str]]) -> str:
    """The Event after keys were made again on request."""
    made = ", ".join(f"{s.what} in Secret {s.secret} (fingerprint {fp})" for s, fp in renewed)
    return (
        f"new key recorded on request: {made}. Running daemons keep the old key until they "
        "restart: restart every Pod that uses it (see README, Keys)"
    )


NOTHING_TO_REGENERATE = (
    "regenerate-keys: no recorded key Secret was missing, so none was replaced; to replace a "
    "key, delete its Secret and set the annotation again (see README, Keys)"
)


def changed_message(changed: list[tuple[KeySlot, str, str]]) -> str:
    parts = ", ".join(
        f"{s.what} Secret {s.secret} (fingerprint {old} -> {new})" for s, old, new in changed
    )
    return (
        f"replaced outside the operator: {parts}; the new key is recorded. Running daemons "
        "keep the old key until they restart"
    )
