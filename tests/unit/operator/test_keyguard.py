"""Key fingerprints and the plan for a cluster's key Secrets (``operator.cluster.keyguard``)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

import pytest

from sunk.models.crds import SlurmClusterSpec
from sunk.operator import names
from sunk.operator.cluster import keyguard
from sunk.operator.cluster.keyguard import plan_keys


def spec(**values) -> SlurmClusterSpec:
    return SlurmClusterSpec.model_validate({"clusterName": "c", **values})


def slot_names(slots) -> list[str]:
    return [s.field for s in slots]


DATA = {"munge.key": "a2V5"}
OTHER = {"munge.key": "bmV3"}


def test_fingerprint_is_sha256_of_the_compact_sorted_data():
    data = {"b": "QQ==", "a": "Qg=="}
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    assert keyguard.fingerprint(data) == hashlib.sha256(text.encode()).hexdigest()[:16]
    assert keyguard.fingerprint(data) == keyguard.fingerprint(dict(reversed(data.items())))
    assert keyguard.fingerprint(data) != keyguard.fingerprint({"a": "QQ==", "b": "Qg=="})


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq not installed")
def test_fingerprint_matches_the_documented_shell_command():
    data = {"jwt.key": "c2VjcmV0", "a": "Zm9v"}
    secret = json.dumps({"kind": "Secret", "data": data}, indent=2)
    out = subprocess.run(
        "jq -jcS .data | sha256sum | cut -c1-16",
        shell=True,
        input=secret,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == keyguard.fingerprint(data)


def test_slots_of_the_default_cluster():
    assert [(s.field, s.secret) for s in keyguard.slots(spec())] == [
        ("munge", "c-munge"),
        ("jwt", "c-jwt"),
        ("sshHostKeys", "c-login-hostkeys"),
        ("databasePassword", "c-db"),
        ("databaseRootPassword", "c-db-root"),
    ]


def test_user_provided_and_unused_keys_are_no_slots():
    s = spec(
        munge={"existingSecret": "mine"},
        jwt={"existingSecret": "my-jwt"},
        login={"enabled": False},
        accounting={"external": {"enabled": True}},
    )
    assert keyguard.slots(s) == []
    assert slot_names(keyguard.slots(spec(accounting={"enabled": False}))) == [
        "munge",
        "jwt",
        "sshHostKeys",
    ]


def test_each_slot_generates_what_the_daemons_read():
    generated = {s.field: s.generate() for s in keyguard.slots(spec())}
    assert set(generated["munge"]) == {"munge.key"}
    assert set(generated["jwt"]) == {"jwt.key"}
    assert set(generated["databasePassword"]) == {"password"}
    assert set(generated["sshHostKeys"]) == {"ssh_host_ed25519_key", "ssh_host_ed25519_key.pub"}


MUNGE = keyguard.slots(spec())[0]


def test_a_new_cluster_creates_its_keys():
    plan = plan_keys([MUNGE], {}, {"c-munge": None}, regenerate=False)
    assert (plan.create, plan.renewed, plan.missing, plan.records) == ((MUNGE,), (), (), {})


def test_an_existing_unrecorded_secret_is_adopted():
    """A cluster from before status.keys, or recreated after its SlurmCluster was deleted."""
    plan = plan_keys([MUNGE], None, {"c-munge": DATA}, regenerate=False)
    assert plan.create == () and plan.changed == ()
    assert plan.records == {"munge": keyguard.record("c-munge", DATA)}


def test_a_recorded_present_key_changes_nothing():
    recorded = {"munge": keyguard.record("c-munge", DATA)}
    plan = plan_keys([MUNGE], recorded, {"c-munge": DATA}, regenerate=False)
    assert (plan.create, plan.missing, plan.changed) == ((), (), ())
    assert plan.records == recorded


def test_a_recorded_key_that_is_gone_is_missing_not_created():
    recorded = {"munge": keyguard.record("c-munge", DATA)}
    plan = plan_keys([MUNGE], recorded, {"c-munge": None}, regenerate=False)
    assert (plan.create, plan.missing) == ((), (MUNGE,))
    assert plan.records == recorded  # kept: it says what to restore


def test_regenerate_creates_the_missing_key():
    recorded = {"munge": keyguard.record("c-munge", DATA)}
    plan = plan_keys([MUNGE], recorded, {"c-munge": None}, regenerate=True)
    assert (plan.create, plan.renewed, plan.missing) == ((MUNGE,), (MUNGE,), ())


def test_regenerate_leaves_present_keys_alone():
    recorded = {"munge": keyguard.record("c-munge", DATA)}
    plan = plan_keys([MUNGE], recorded, {"c-munge": DATA}, regenerate=True)
    assert (plan.create, plan.renewed, plan.records) == ((), (), recorded)


def test_a_replaced_secret_is_changed_and_recorded_anew():
    old = keyguard.record("c-munge", DATA)
    plan = plan_keys([MUNGE], {"munge": old}, {"c-munge": OTHER}, regenerate=False)
    new = keyguard.fingerprint(OTHER)
    assert plan.changed == ((MUNGE, old["fingerprint"], new),)
    assert plan.records["munge"]["fingerprint"] == new


def test_records_of_unused_keys_are_kept_and_a_record_of_another_secret_is_not_used():
    jwt = {"secretName": "c-jwt", "fingerprint": "0123456789abcdef"}
    elsewhere = {"secretName": "old-name", "fingerprint": "fedcba9876543210"}
    plan = plan_keys([MUNGE], {"jwt": jwt, "munge": elsewhere}, {"c-munge": None}, False)
    assert plan.create == (MUNGE,) and plan.missing == ()
    assert plan.records["jwt"] == jwt


def test_missing_message_names_each_secret_and_fingerprint_and_the_annotation():
    jwt_slot = keyguard.slots(spec())[1]
    recorded = {
        "munge": keyguard.record("c-munge", DATA),
        "jwt": keyguard.record("c-jwt", {"jwt.key": "eA=="}),
    }
    plan = plan_keys([MUNGE, jwt_slot], recorded, {"c-munge": None, "c-jwt": None}, False)
    message = keyguard.missing_message(plan)
    assert message.startswith(
        f"munge key Secret c-munge (fingerprint {recorded['munge']['fingerprint']}), "
        f"JWT key Secret c-jwt (fingerprint {recorded['jwt']['fingerprint']}) are gone"
    )
    assert f'{names.ANN_REGENERATE_KEYS}="true"' in message
    assert message == keyguard.missing_message(plan)  # stable: one Event, not one per pass


def test_only_true_asks_for_regeneration():
    assert keyguard.regenerate_requested({names.ANN_REGENERATE_KEYS: "true"})
    for value in ("false", "yes", "True ", ""):
        assert not keyguard.regenerate_requested({names.ANN_REGENERATE_KEYS: value})
    assert not keyguard.regenerate_requested(None)
