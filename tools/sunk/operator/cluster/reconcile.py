"""Reconcile one SlurmCluster: keys, rendered configuration, control-plane workloads, status."""

from __future__ import annotations

import base64
import logging
from typing import Any

from pydantic import ValidationError

from sunk.models import conditions as reasons
from sunk.models.crds import API_VERSION, NodeSetSpec, SlurmClusterSpec
from sunk.operator import conditions, names, shared_volumes
from sunk.operator.apply import create_once, ensure
from sunk.operator.cluster import keys
from sunk.operator.cluster.objects import ClusterContext, desired_objects, slurmdbd_secret
from sunk.operator.events import emit_on_change
from sunk.operator.kube import ApiError, Kube, path_for
from sunk.slurmconf import (
    ClusterInputs,
    Endpoints,
    NodeSetInput,
    Placement,
    RenderError,
    render_all,
)

log = logging.getLogger("sunk.operator.cluster")
MOCO_CRD = "mysqlclusters.moco.cybozu.com"


async def ensure_keys(kube: Kube, name: str, ns: str, spec: SlurmClusterSpec) -> tuple[str, str]:
    key_labels = {names.LABEL_CLUSTER: spec.clusterName, names.LABEL_MANAGED_BY: names.MANAGER}
    munge = names.munge_secret_of(spec)
    jwt = names.jwt_secret_of(spec)
    if not spec.munge.existingSecret:
        await create_once(kube, keys.secret(munge, ns, keys.munge_key(), key_labels))
    if not spec.jwt.existingSecret:
        await create_once(kube, keys.secret(jwt, ns, keys.jwt_key(), key_labels))
    if spec.login.enabled:
        await create_once(
            kube,
            keys.secret(
                names.hostkeys_secret(spec.clusterName), ns, keys.ssh_host_keys(), key_labels
            ),
        )
    db = spec.accounting.database
    external = db.type == "external" or spec.accounting.external.enabled
    if spec.accounting.enabled and not external and db.type == "mariadb":
        await create_once(
            kube, keys.secret(names.db_secret(spec.clusterName), ns, keys.db_password(), key_labels)
        )
    return munge, jwt


async def database_password(
    kube: Kube,
    ns: str,
    spec: SlurmClusterSpec,
) -> tuple[str | None, tuple[str, str] | None, str]:
    """(password, (secret, key), problem) for slurmdbd.conf."""
    acct = spec.accounting
    if acct.database.type == "external" or acct.external.enabled:
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


async def cluster_nodesets(kube: Kube, ns: str, cluster: str) -> list[NodeSetInput]:
    items = await kube.list(path_for(API_VERSION, "nodesets", ns))
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


async def placements(kube: Kube, ns: str, cluster: str) -> list[Placement]:
    pods = await kube.list(
        path_for("v1", "pods", ns), f"{names.LABEL_CLUSTER}={cluster},{names.LABEL_NODESET}"
    )
    wanted = {p["spec"].get("nodeName") for p in pods if p["spec"].get("nodeName")}
    if not wanted:
        return []
    nodes = {
        n["metadata"]["name"]: n["metadata"].get("labels") or {}
        for n in await kube.list(path_for("v1", "nodes"))
    }
    return [
        Placement(p["metadata"]["name"], nodes[p["spec"]["nodeName"]])
        for p in pods
        if p["spec"].get("nodeName") in nodes
    ]


async def workload_ready(kube: Kube, obj: dict[str, Any]) -> bool:
    meta = obj["metadata"]
    plural = "statefulsets" if obj["kind"] == "StatefulSet" else "deployments"
    live = await kube.get(path_for("apps/v1", plural, meta["namespace"], meta["name"]))
    if not live:
        return False
    want = obj["spec"].get("replicas", 1)
    return (live.get("status") or {}).get("readyReplicas", 0) >= want


async def reconcile_cluster(kube: Kube, body: dict[str, Any]) -> dict[str, Any]:
    """Returns the status written (or kept)."""
    meta = body["metadata"]
    ns, name = meta["namespace"], meta["name"]
    problems: list[tuple[str, str]] = []
    try:
        spec = SlurmClusterSpec.model_validate(body["spec"])
    except ValidationError as exc:
        return await _write_status(
            kube,
            body,
            [conditions.condition("Ready", False, reasons.INVALID_SPEC, str(exc).splitlines()[0])],
            None,
        )

    munge, jwt = await ensure_keys(kube, name, ns, spec)
    nodesets = await cluster_nodesets(kube, ns, spec.clusterName)
    password, secret_ref, db_problem = (None, None, "")
    if spec.accounting.enabled:
        password, secret_ref, db_problem = await database_password(kube, ns, spec)
    if (
        spec.accounting.enabled
        and spec.accounting.database.type == "moco"
        and not await kube.get(
            path_for("apiextensions.k8s.io/v1", "customresourcedefinitions", None, MOCO_CRD)
        )
    ):
        db_problem = "database.type is moco but the MOCO operator (MySQLCluster CRD) is missing"
    inputs = ClusterInputs(
        spec,
        tuple(nodesets),
        Endpoints.for_cluster(spec, ns),
        tuple(await placements(kube, ns, spec.clusterName)),
        password if password is not None else "",
    )
    try:
        rendered = render_all(inputs)
    except RenderError as exc:
        await emit_on_change(kube, body, reasons.CONFIG_INVALID.name, str(exc))
        return await _write_status(
            kube,
            body,
            [conditions.condition("Ready", False, reasons.CONFIG_INVALID, str(exc))],
            None,
        )

    ctx = ClusterContext(name, ns, meta["uid"], spec, rendered, munge, jwt, secret_ref)
    # Login volumes that cannot be merged: the login objects are left as they run, and
    # LoginReady says why (the rest of the cluster is reconciled as usual).
    login_problem = ""
    if spec.login.enabled:
        shared = shared_volumes.merge_login(spec, name)
        if shared.problems:
            login_problem = str(shared_volumes.VolumeConfigError(shared.problems))
            await emit_on_change(kube, body, reasons.CONFIG_INVALID.name, login_problem)
    objects = desired_objects(ctx, with_login=not login_problem)
    if spec.accounting.enabled:
        dbd = slurmdbd_secret(ctx)
        if dbd is not None and password is not None:
            objects.insert(0, dbd)
    for obj in objects:
        if obj["kind"] == "MySQLCluster" and db_problem.startswith("database.type is moco"):
            continue
        try:
            await ensure(kube, obj)
        except ApiError as exc:
            problems.append((obj["kind"], str(exc)))

    components = [("Controller", objects_of(objects, "controller"))]
    if spec.accounting.enabled:
        components.append(("Accounting", objects_of(objects, "accounting")))
    if spec.rest.enabled:
        components.append(("Rest", objects_of(objects, "rest")))
    if spec.login.enabled:
        components.append(("Login", objects_of(objects, "login")))
    conds = []
    for component, workloads in components:
        ready = all([await workload_ready(kube, w) for w in workloads])
        reason = reasons.COMPONENT_READY if ready else reasons.PODS_PROGRESSING
        message = ""
        if component == "Accounting" and db_problem:
            ready, reason, message = False, reasons.DATABASE_UNAVAILABLE, db_problem
        if component == "Login" and login_problem:
            ready, reason, message = False, reasons.CONFIG_INVALID, login_problem
        conds.append(conditions.condition(f"{component}Ready", ready, reason, message))
    for kind, message in problems:
        conds.append(
            conditions.condition("Degraded", True, reasons.APPLY_FAILED, message, prefix=kind)
        )
    all_ready = all(c["status"] == "True" for c in conds if c["type"].endswith("Ready"))
    conds.insert(
        0,
        conditions.condition(
            "Ready",
            all_ready and not problems,
            reasons.ALL_COMPONENTS_READY if all_ready else reasons.PODS_PROGRESSING,
        ),
    )
    if db_problem:
        await emit_on_change(kube, body, reasons.DATABASE_UNAVAILABLE.name, db_problem)
    return await _write_status(kube, body, conds, rendered.config_hash)


def objects_of(objects: list[dict[str, Any]], component: str) -> list[dict[str, Any]]:
    return [
        o
        for o in objects
        if o["kind"] in ("StatefulSet", "Deployment")
        and o["metadata"]["labels"].get(names.LABEL_COMPONENT) == component
    ]


async def _write_status(
    kube: Kube, body: dict[str, Any], conds: list[dict[str, Any]], config_hash: str | None
) -> dict[str, Any]:
    fields = {"configHash": config_hash} if config_hash else {}
    status, _ = await conditions.write_status(kube, body, "slurmclusters", fields, conds)
    return status
