"""RBAC from the audit log: the operator and the `helm test` Pod get exactly the rights they use.

The tier's API server keeps an audit log (Metadata level) of every request of the chart's two
ServiceAccounts, and the operator processes of ``test_operator.py`` and ``test_node_lock.py``
run as the operator's ServiceAccount with the chart's Roles (``chart_operator``). Read after
them (this file runs last), the log must show:

- no request of either account refused (403);
- every (API group, resource, verb) the chart grants used, or listed with its reason in
  ``rbac_unused.yaml`` (a grant no test can show, such as a check made at admission);
- no entry of ``rbac_unused.yaml`` stale: each is still granted and still absent from the log.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.cluster.conftest import (
    AUDITED_USERS,
    CRDS,
    OPERATOR_ACCOUNT,
    SUNK_NS,
    TEST_ACCOUNT,
)

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
UNUSED = HERE / "rbac_unused.yaml"
# The modules whose operator makes the requests the coverage check expects to see.
OPERATOR_MODULES = ("test_operator.py", "test_node_lock.py")
# What the chart may grant, rendered as the tier installs it (namespaced Roles) and with every
# switch that adds rules; the default (cluster-wide) rendering must grant the same.
NAMESPACED = ("operator.watchNamespaces={ns-a,ns-b}",)
SWITCHES = ("moco.enabled=true",)

Grant = tuple[str, str, str]  # (API group, resource[/subresource], verb)


def audit_events(log: Path, user: str) -> list[dict]:
    """The last recorded stage of each of ``user``'s requests."""
    events: dict[str, dict] = {}
    for line in log.read_text().splitlines():
        event = json.loads(line)
        if event.get("user", {}).get("username") == user:
            events[event["auditID"]] = event
    return list(events.values())


def used(event: dict) -> Grant | None:
    ref = event.get("objectRef")
    if not ref or "resource" not in ref:
        return None  # discovery and other non-resource URLs: no RBAC rule of ours
    resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
    return (ref.get("apiGroup") or "", resource, event["verb"])


def refused(event: dict) -> bool:
    decision = (event.get("annotations") or {}).get("authorization.k8s.io/decision")
    return decision == "forbid" or (event.get("responseStatus") or {}).get("code") == 403


def granted(helm: str, account: str, sets: tuple[str, ...]) -> set[Grant]:
    """Every (group, resource, verb) the rendered chart binds to ``account`` (resource names
    and namespaces aside)."""
    cmd = [helm, "template", "sunk", str(REPO / "charts/sunk"), "-n", SUNK_NS]
    for item in sets:
        cmd += ["--set", item]
    docs = [d for d in yaml.safe_load_all(subprocess.check_output(cmd, text=True)) if d]
    roles = {
        (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d
        for d in docs
        if d["kind"] in ("Role", "ClusterRole")
    }
    out: set[Grant] = set()
    for binding in docs:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(
            s["kind"] == "ServiceAccount" and s["name"] == account and s["namespace"] == SUNK_NS
            for s in binding["subjects"]
        ):
            continue
        ref = binding["roleRef"]
        scope = binding["metadata"].get("namespace") if ref["kind"] == "Role" else None
        for rule in roles[(ref["kind"], scope, ref["name"])]["rules"]:
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], rule
            out |= {
                (g, r, v)
                for g in rule["apiGroups"]
                for r in rule["resources"]
                for v in rule["verbs"]
            }
    return out


def unused_list(racy: bool = False) -> dict[Grant, str]:
    """The listed grants; ``racy``: only those marked ``racy: true`` (used or not in a run,
    depending on which component wins a race), which may also show up in the log."""
    entries = yaml.safe_load(UNUSED.read_text())
    out = {}
    for entry in entries:
        assert entry.get("reason", "").strip(), f"{UNUSED.name}: {entry} has no reason"
        if not racy or entry.get("racy"):
            out[(entry["apiGroup"], entry["resource"], entry["verb"])] = entry["reason"]
    return out


def show(grants: set[Grant]) -> str:
    return "\n".join(f"  {g or 'core'} {r} {v}" for g, r, v in sorted(grants))


def run_helm_test_check(control_plane, tmp_path: Path) -> subprocess.CompletedProcess:
    """`sunk-operator check` (the `helm test` Pod's command) as the test Pod's account."""
    kubeconfig = control_plane.token_kubeconfig(SUNK_NS, TEST_ACCOUNT, tmp_path / "kubeconfig")
    args = [sys.executable, "-m", "sunk.operator.main", "check", "--kubeconfig", str(kubeconfig)]
    args += [f"--crd={crd}" for crd in CRDS]
    args += [f"--deployment={SUNK_NS}/{OPERATOR_ACCOUNT}", "--timeout=3"]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)


def test_both_modes_grant_the_same(helm):
    """Watching every namespace or a list of them changes where the rules apply, not what they
    are: the audit of the namespaced mode covers the default too."""
    for account in (OPERATOR_ACCOUNT, TEST_ACCOUNT):
        assert granted(helm, account, SWITCHES) == granted(helm, account, NAMESPACED + SWITCHES)


def test_helm_test_account_from_the_audit_log(sunk_chart, control_plane, helm, tmp_path):
    proc = run_helm_test_check(control_plane, tmp_path)
    # The operator Deployment may have no available replica here (kwok Nodes come and go with
    # the tests); what matters is that every read was allowed.
    assert proc.returncode == 0 or "has no available replica" in proc.stdout, (
        proc.stdout + proc.stderr
    )
    events = audit_events(control_plane.audit_log, AUDITED_USERS[1])
    assert events, "the check made no request the audit log shows"
    assert not [e for e in events if refused(e)], [e["requestURI"] for e in events if refused(e)]
    seen = {g for g in map(used, events) if g}
    assert granted(helm, TEST_ACCOUNT, NAMESPACED) == seen


def test_operator_account_from_the_audit_log(request, control_plane, helm):
    ran = {Path(str(item.path)).name for item in request.session.items}
    if not ran & set(OPERATOR_MODULES):
        pytest.skip(f"run with {' and '.join(OPERATOR_MODULES)}: no operator ran this session")
    events = audit_events(control_plane.audit_log, AUDITED_USERS[0])
    assert events, "no request of the operator's ServiceAccount in the audit log"

    forbidden = sorted({f"{e['verb']} {e['requestURI']}" for e in events if refused(e)})
    assert not forbidden, "requests of the operator refused:\n" + "\n".join(forbidden)

    seen = {g for g in map(used, events) if g}
    grants = granted(helm, OPERATOR_ACCOUNT, NAMESPACED + SWITCHES)
    assert not seen - grants, (
        f"used but not granted (the audit shows them allowed?):\n{show(seen - grants)}"
    )
    listed = unused_list()
    assert not set(listed) - grants, (
        f"{UNUSED.name} lists what the chart no longer grants:\n{show(set(listed) - grants)}"
    )
    if not set(OPERATOR_MODULES) <= ran:
        pytest.skip(f"grant coverage needs all of {', '.join(OPERATOR_MODULES)} in the session")
    stale = set(listed) & seen - set(unused_list(racy=True))
    assert not stale, f"{UNUSED.name} lists grants the operator used after all:\n{show(stale)}"
    unexplained = grants - seen - set(listed)
    assert not unexplained, (
        "granted, never used by the operator in the tests and not listed with a reason in "
        f"{UNUSED.name} (remove the grant, or list it):\n{show(unexplained)}"
    )
