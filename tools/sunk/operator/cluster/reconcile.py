"""Reconcile one SlurmCluster: keys, rendered configuration, control-plane workloads, status.

Keys come first: a recorded key whose Secret is gone stops the reconcile at Ready=False
KeyMissing (one Event), and nothing is regenerated unless the regenerate-keys annotation asks
(``keyguard``)."""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from sunk.models import conditions as reasons
from sunk.models.compat import operator_too_old
from sunk.models.crds import API_VERSION, NodeSetSpec, SlurmClusterSpec
from sunk.operator import conditions, names, shared_volumes
from sunk.operator.apply import create_once, ensure
from sunk.operator.cache import Listed, Reader
from sunk.operator.client import ApiError, Kube, path_for
from sunk.operator.cluster import keyguard, keys, rollout, upgrade
from sunk.operator.cluster.accounting import slurmdbd_secret
from sunk.operator.cluster.base import ClusterContext
from sunk.operator.cluster.network import network_policies, operator_peer, policy_names
from sunk.operator.cluster.objects import desired_objects, disruption_budgets_off
from sunk.operator.events import emit, emit_on_change
from sunk.slurmconf import (
    ClusterInputs,
    Endpoints,
    NodeSetInput,
    Placement,
    Rendered,
    RenderError,
    render_all,
)

log = logging.getLogger("sunk.operator.cluster")
MOCO_CRD = "mysqlclusters.moco.cybozu.com"
# Event reasons (Events only, no condition carries them).
KEYS_REGENERATED = "KeysRegenerated"
KEY_CHANGED = "KeyChanged"
STUCK_POD_REPLACED = "StuckPodReplaced"


@dataclass(frozen=True)
class KeyState:
    """The keys step's outcome: the Secrets the cluster uses, ``status.keys``, and the
    KeyMissing message when a recorded key is gone (empty otherwise)."""

    munge: str
    jwt: str
    records: dict[str, dict[str, str]]
    missing: str = ""


async def ensure_keys(kube: Kube, body: dict[str, Any], spec: SlurmClusterSpec) -> KeyState:
    """Create the key Secrets a new cluster needs; report, never remake, one that was recorded
    and is gone, unless the regenerate-keys annotation asks for it. New records are written
    to ``status.keys`` (and into ``body``) before anything else happens, and the annotation
    is then removed."""
    meta = body["metadata"]
    ns = meta["namespace"]
    key_labels = {names.LABEL_CLUSTER: spec.clusterName, names.LABEL_MANAGED_BY: names.MANAGER}
    wanted = keyguard.slots(spec)
    live = {}
    for slot in wanted:
        secret = await kube.get(path_for("v1", "secrets", ns, slot.secret))
        live[slot.secret] = None if secret is None else (secret.get("data") or {})
    regenerate = keyguard.regenerate_requested(meta.get("annotations"))
    recorded = (body.get("status") or {}).get("keys") or {}
    plan = keyguard.plan_keys(wanted, recorded, live, regenerate)
    records = dict(plan.records)
    renewed = []
    for slot in plan.create:
        data = slot.generate()
        if not await create_once(kube, keys.secret(slot.secret, ns, data, key_labels)):
            existing = await kube.get(path_for("v1", "secrets", ns, slot.secret))
            data = (existing or {}).get("data") or {}  # created meanwhile: that one counts
        records[slot.field] = keyguard.record(slot.secret, data)
        if slot in plan.renewed:
            renewed.append((slot, records[slot.field]["fingerprint"]))
    changed = list(plan.changed)
    if regenerate:
        # Asked for new keys: a replaced one (say, made by an earlier pass that stopped before
        # it recorded it) is accepted as regenerated.
        renewed += [(slot, new) for slot, _, new in changed]
        changed = []
    if records != recorded:
        await kube.merge_patch(
            path_for(API_VERSION, "slurmclusters", ns, meta["name"], "status"),
            {"status": {"keys": records}},
        )
        # What the rest of this pass compares against (and a failure report carries over).
        body.setdefault("status", {})["keys"] = records
    if renewed:
        await emit(kube, body, KEYS_REGENERATED, keyguard.regenerated_message(renewed))
    elif regenerate:
        await emit(kube, body, KEYS_REGENERATED, keyguard.NOTHING_TO_REGENERATE, warning=False)
    if changed:
        await emit(kube, body, KEY_CHANGED, keyguard.changed_message(changed))
    if regenerate:
        # Spent once acted on, so it cannot remake a key that disappears later.
        await kube.merge_patch(
            path_for(API_VERSION, "slurmclusters", ns, meta["name"]),
            {"metadata": {"annotations": {names.ANN_REGENERATE_KEYS: None}}},
        )
    return KeyState(
        names.munge_secret_of(spec),
        names.jwt_secret_of(spec),
        records,
        keyguard.missing_message(plan) if plan.missing else "",
    )


async def database_password(
    kube: Kube,
    ns: str,
    spec: SlurmClusterSpec,
) -> tuple[str | None, tuple[str, str] | None, str]:
    """(password, (secret, key), problem) for slurmdbd.conf."""
    acct = spec.accounting
    if acct.database_kind() == "external":
        ref = acct.external.passwordSecret
        if ref is None:
            return None, None, "accounting.external.passwordSecret is not set"
        secret_ref = (ref.name, ref.key)
    elif acct.database.type == "moco":
        secret_ref = (f"moco-{names.accounting(spec.clusterName)}", "WRITABLE_PASSWORD")
    else:
        secret_ref = (names.db_secret(spec.clusterName), "password")
    secret = await kube.get(path_for("v1", "secrets", ns, secret_ref[0]))
    if secret is None or secret_ref[1] not in (secret.get("data") or {}):
        return None, secret_ref, f"Secret {secret_ref[0]} (key {secret_ref[1]}) is not there yet"
    return base64.b64decode(secret["data"][secret_ref[1]]).decode(), secret_ref, ""


async def cluster_nodesets(reader: Reader, ns: str, cluster: str) -> list[NodeSetInput]:
    items = await reader.nodesets(ns)
    out = []
    for item in items:
        if (item.get("spec") or {}).get("clusterName") != cluster:
            continue
        try:
            out.append(
                NodeSetInput(item["metadata"]["name"], NodeSetSpec.model_validate(item["spec"]))
            )
        except ValidationError as exc:
            log.warning("NodeSet %s/%s skipped: %s", ns, item["metadata"]["name"], exc)
    return out


async def placements(reader: Reader, ns: str, cluster: str) -> list[Placement]:
    pods = await reader.cluster_pods(ns, cluster)
    wanted = {p["spec"].get("nodeName") for p in pods if p["spec"].get("nodeName")}
    if not wanted:
        return []
    nodes = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in await reader.nodes()}
    return [
        Placement(p["metadata"]["name"], nodes[p["spec"]["nodeName"]])
        for p in pods
        if p["spec"].get("nodeName") in nodes
    ]


async def reconcile_cluster(
    kube: Kube,
    body: dict[str, Any],
    reader: Reader | None = None,
    operator_namespace: str | None = None,
) -> dict[str, Any]:
    """Returns the status written (or kept). ``reader``: where NodeSets, Pods and Nodes are
    read (the operator's watches; default: LISTs). ``operator_namespace``: where the
    operator's own Pods run (the NetworkPolicies let them reach slurmrestd); None outside a
    Pod.

    The steps, in order: parse the spec, ensure the keys, find the database password, render
    the configuration, build the objects, apply them, remove the ones switched off, read the
    components' readiness, write the status. A step that cannot go on ends the pass with its
    condition (InvalidSpec, KeyMissing, ConfigInvalid); a refused write is a Degraded
    condition, and the pass goes on with the rest."""
    reader = reader or Listed(kube)
    meta = body["metadata"]
    too_old = operator_too_old(meta)
    if too_old:  # a newer slurm chart's object: its fields may mean what this code cannot know
        await emit_on_change(kube, body, reasons.OPERATOR_TOO_OLD.name, too_old)
        return await _write_status(
            kube, body, [conditions.condition("Ready", False, reasons.OPERATOR_TOO_OLD, too_old)]
        )
    try:
        spec = SlurmClusterSpec.model_validate(body["spec"])
    except ValidationError as exc:
        # The user's to fix: said once (Event) and on the status, then nothing until the spec
        # changes (no exception, so no retry).
        message = conditions.invalid_spec_message(exc)
        await emit_on_change(kube, body, reasons.INVALID_SPEC.name, message)
        return await _write_status(
            kube, body, [conditions.condition("Ready", False, reasons.INVALID_SPEC, message)]
        )
    keys_state = await ensure_keys(kube, body, spec)
    if keys_state.missing:
        # Nothing else changes until the key is restored or regenerated on request.
        await emit_on_change(kube, body, reasons.KEY_MISSING.name, keys_state.missing)
        return await _write_status(
            kube,
            body,
            [conditions.condition("Ready", False, reasons.KEY_MISSING, keys_state.missing)],
            keys=keys_state.records,
        )
    database = await database_state(kube, meta["namespace"], spec)
    try:
        rendered = await render_config(reader, meta["namespace"], spec, database)
    except RenderError as exc:
        await emit_on_change(kube, body, reasons.CONFIG_INVALID.name, str(exc))
        return await _write_status(
            kube,
            body,
            [conditions.condition("Ready", False, reasons.CONFIG_INVALID, str(exc))],
            keys=keys_state.records,
        )
    ctx = ClusterContext(
        meta["name"],
        meta["namespace"],
        meta["uid"],
        spec,
        rendered,
        keys_state.munge,
        keys_state.jwt,
        database.secret_ref,
    )
    login_problem = login_volume_problem(spec, meta["name"])
    if login_problem:
        await emit_on_change(kube, body, reasons.CONFIG_INVALID.name, login_problem)
    objects, policies = build_objects(ctx, database, login_problem, operator_namespace)
    staging = await upgrade.stage(kube, objects)  # Slurm's order when releases change
    problems = await apply_objects(kube, staging.objects)
    problems += await remove_switched_off(kube, ctx, policies, login_problem)
    conds = await component_conditions(
        kube, body, spec, staging.objects, database, login_problem, problems, staging
    )
    if database.problem:
        await emit_on_change(kube, body, reasons.DATABASE_UNAVAILABLE.name, database.problem)
    for component, why in staging.held.items():
        await emit_on_change(kube, body, reasons.SLURM_UPGRADE_WAITING.name, f"{component}: {why}")
    return await _write_status(
        kube,
        body,
        conds,
        rendered.config_hash,
        keys_state.records,
        staging.running.get("controller"),
    )


@dataclass(frozen=True)
class Database:
    """The database step's outcome: slurmdbd's password and where it comes from, or why the
    database cannot be used yet (``problem``; empty when it can)."""

    password: str | None = None
    secret_ref: tuple[str, str] | None = None
    problem: str = ""

    @property
    def moco_missing(self) -> bool:
        return self.problem.startswith(MOCO_MISSING)


MOCO_MISSING = "database.type is moco but the MOCO operator (MySQLCluster CRD) is missing"


async def database_state(kube: Kube, ns: str, spec: SlurmClusterSpec) -> Database:
    if not spec.accounting.enabled:
        return Database()
    password, secret_ref, problem = await database_password(kube, ns, spec)
    if spec.accounting.database.type == "moco" and not await kube.get(
        path_for("apiextensions.k8s.io/v1", "customresourcedefinitions", None, MOCO_CRD)
    ):
        problem = MOCO_MISSING
    return Database(password, secret_ref, problem)


async def render_config(
    reader: Reader, ns: str, spec: SlurmClusterSpec, database: Database
) -> Rendered:
    """Every Slurm file of the cluster, from its spec, its NodeSets and where their Pods run
    (topology); raises RenderError for a configuration Slurm would not take."""
    inputs = ClusterInputs(
        spec,
        tuple(await cluster_nodesets(reader, ns, spec.clusterName)),
        Endpoints.for_cluster(spec, ns),
        tuple(await placements(reader, ns, spec.clusterName)),
        database.password if database.password is not None else "",
    )
    return render_all(inputs)


def login_volume_problem(spec: SlurmClusterSpec, name: str) -> str:
    """Why the login volumes cannot be merged ("" when they can). With a problem the login
    objects are left as they run, and LoginReady says why; the rest of the cluster is
    reconciled as usual."""
    if not spec.login.enabled:
        return ""
    shared = shared_volumes.merge_login(spec, name)
    return str(shared_volumes.VolumeConfigError(shared.problems)) if shared.problems else ""


def build_objects(
    ctx: ClusterContext, database: Database, login_problem: str, operator_namespace: str | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(every object to apply, in order; the NetworkPolicies among them)."""
    objects = desired_objects(ctx, with_login=not login_problem)
    policies = network_policies(ctx, operator_peer(operator_namespace))
    # First, so no Pod this pass starts (MariaDB's, say) is ever reachable without them.
    objects[:0] = policies
    if ctx.spec.accounting.enabled:
        dbd = slurmdbd_secret(ctx)
        if dbd is not None and database.password is not None:
            objects.insert(0, dbd)
    if database.moco_missing:
        objects = [o for o in objects if o["kind"] != "MySQLCluster"]
    return objects, policies


async def apply_objects(kube: Kube, objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Apply each object (only on change); returns the refused ones as (kind, message)."""
    problems: list[tuple[str, str]] = []
    for obj in objects:
        try:
            await ensure(kube, obj)
        except ApiError as exc:
            problems.append((obj["kind"], str(exc)))
    return problems


async def remove_switched_off(
    kube: Kube, ctx: ClusterContext, policies: list[dict[str, Any]], login_problem: str
) -> list[tuple[str, str]]:
    """Delete the PodDisruptionBudgets and NetworkPolicies the spec no longer asks for;
    returns the refused deletions as (kind, message)."""
    spec, ns = ctx.spec, ctx.namespace
    unwanted = [
        ("PodDisruptionBudget", path_for("policy/v1", "poddisruptionbudgets", ns, budget))
        for budget in disruption_budgets_off(ctx)
        # with a login problem the login objects are left as they run
        if not (budget == names.login(spec.clusterName) and login_problem)
    ]
    wanted = {p["metadata"]["name"] for p in policies}
    unwanted += [
        ("NetworkPolicy", path_for("networking.k8s.io/v1", "networkpolicies", ns, policy))
        for policy in policy_names(spec.clusterName)
        if policy not in wanted
    ]
    problems: list[tuple[str, str]] = []
    for kind, path in unwanted:
        try:
            await remove_owned(kube, path, spec.clusterName)
        except ApiError as exc:
            problems.append((kind, str(exc)))
    return problems


async def component_conditions(
    kube: Kube,
    body: dict[str, Any],
    spec: SlurmClusterSpec,
    objects: list[dict[str, Any]],
    database: Database,
    login_problem: str,
    problems: list[tuple[str, str]],
    staging: upgrade.Staging | None = None,
) -> list[dict[str, Any]]:
    """Ready, one <Component>Ready per component (from its workloads, naming each Pod that is
    not ready and why; a stuck Pod of an older revision is replaced: ``rollout``), and a
    Degraded condition per refused write."""
    components = [("Controller", objects_of(objects, "controller"))]
    if spec.accounting.enabled:
        # The in-cluster database (MariaDB's StatefulSet) first: slurmdbd waits for it.
        accounting = objects_of(objects, "database") + objects_of(objects, "accounting")
        components.append(("Accounting", accounting))
    if spec.rest.enabled:
        components.append(("Rest", objects_of(objects, "rest")))
    if spec.login.enabled:
        components.append(("Login", objects_of(objects, "login")))
    conds = []
    for component, workloads in components:
        health = [await rollout.workload_health(kube, w) for w in workloads]
        for replaced in (r for h in health for r in h.replaced):
            await emit(kube, body, STUCK_POD_REPLACED, f"{component}: replaced {replaced}")
        ready = all(h.ready for h in health)
        reason = reasons.COMPONENT_READY if ready else reasons.PODS_PROGRESSING
        message = "; ".join(h.message for h in health if not h.ready or ready)
        if component == "Accounting" and database.problem:
            ready, reason, message = False, reasons.DATABASE_UNAVAILABLE, database.problem
        if component == "Login" and login_problem:
            ready, reason, message = False, reasons.CONFIG_INVALID, login_problem
        label = component.lower()
        if staging is not None and label in staging.held:
            ready, reason = False, reasons.SLURM_UPGRADE_WAITING
            message = f"{staging.held[label]}; {message}"
        elif staging is not None and label in staging.notes and not ready:
            message = f"{staging.notes[label]}; {message}"
        conds.append(conditions.condition(f"{component}Ready", ready, reason, message))
    for kind, message in problems:
        conds.append(
            conditions.condition("Degraded", True, reasons.APPLY_FAILED, message, prefix=kind)
        )
    waiting = [c["type"].removesuffix("Ready") for c in conds if c["status"] == "False"]
    all_ready = not any(c["type"].endswith("Ready") for c in conds if c["status"] == "False")
    conds.insert(
        0,
        conditions.condition(
            "Ready",
            all_ready and not problems,
            reasons.ALL_COMPONENTS_READY if all_ready else reasons.PODS_PROGRESSING,
            "every component is ready"
            + (f"; {len(problems)} write(s) refused (Degraded)" if problems else "")
            if all_ready
            else f"waiting for {', '.join(waiting)} (see their conditions)",
        ),
    )
    return conds


async def remove_owned(kube: Kube, path: str, cluster: str) -> None:
    """Delete a PodDisruptionBudget or NetworkPolicy the operator made for ``cluster`` and its
    spec no longer asks for (nothing is pruned otherwise: without this, switching one off
    would not act). One missing, or not ours, is left alone."""
    live = await kube.get(path)
    labels = ((live or {}).get("metadata") or {}).get("labels") or {}
    if labels.get(names.LABEL_MANAGED_BY) == names.MANAGER and (
        labels.get(names.LABEL_CLUSTER) == cluster
    ):
        await kube.delete(path)


def objects_of(objects: list[dict[str, Any]], component: str) -> list[dict[str, Any]]:
    return [
        o
        for o in objects
        if o["kind"] in ("StatefulSet", "Deployment")
        and o["metadata"]["labels"].get(names.LABEL_COMPONENT) == component
    ]


async def _write_status(
    kube: Kube,
    body: dict[str, Any],
    conds: list[dict[str, Any]],
    config_hash: str | None = None,
    keys: dict[str, dict[str, str]] | None = None,
    slurmctld_release: str | None = None,
) -> dict[str, Any]:
    """A path that renders nothing (or reads no keys) keeps the previous configHash (or
    status.keys): the merge patch would keep them anyway, and leaving them out of the
    comparison would make every reconcile write. So does slurmctld's release while it rolls."""
    old = body.get("status") or {}
    fields: dict[str, Any] = {}
    release = slurmctld_release or old.get("slurmctldRelease")
    if release:
        fields["slurmctldRelease"] = release
    if config_hash or old.get("configHash"):
        fields["configHash"] = config_hash or old["configHash"]
    keys = old.get("keys") if keys is None else keys
    if keys:
        fields["keys"] = keys
    status, _ = await conditions.write_status(kube, body, "slurmclusters", fields, conds)
    return status
