"""Reconcile one NodeSet: create pinned slurmd Pods on the Nodes it takes, label those Nodes
(``claims``), remove Pods safely (``removal``), write status. A deleted NodeSet keeps a
finalizer until its Pods are gone and no job that has not ended names its partition."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pydantic import ValidationError

from sunk.models import conditions as reasons
from sunk.models.compat import operator_too_old
from sunk.models.conditions import Reason
from sunk.models.crds import API_VERSION, NodeSetSpec, SlurmClusterSpec
from sunk.operator import conditions, names, s6
from sunk.operator.apply import ensure
from sunk.operator.cache import Listed, Reader
from sunk.operator.client import ApiError, Kube, path_for
from sunk.operator.common import owner_reference, service_account
from sunk.operator.events import emit, emit_on_change
from sunk.operator.nodeset import removal
from sunk.operator.nodeset.claims import bounded, label_nodes, release_node
from sunk.operator.nodeset.feasibility import INSUFFICIENT
from sunk.operator.nodeset.plan import Plan, plan
from sunk.operator.nodeset.pod import PodContext, pod_context, s6_services
from sunk.slurmconf import NodeSetInput
from sunk.slurmconf.guard import UnsafeConfigError
from sunk.slurmconf.inputs import slurmd_container
from sunk.slurmconf.memory import SizingError
from sunk.slurmconf.releases import release_of_image, release_of_tag, skew_problem
from sunk.syncer.plan import SlurmNode

log = logging.getLogger("sunk.operator.nodeset")


class SlurmLink(Protocol):
    """What a NodeSet reconcile needs from its cluster's Syncer."""

    def view(self) -> Mapping[str, SlurmNode] | None: ...

    async def forget(self, node: str) -> None: ...

    async def read_now(self) -> Mapping[str, SlurmNode] | None: ...

    def unanswered_for(self) -> float: ...

    async def partition_jobs(self, partition: str) -> list[int]: ...


LinkFor = Callable[[str, str], SlurmLink | None]  # (namespace, clusterName) → the Syncer
# How often a NodeSet waiting on Slurm (jobs naming its partition, slurmctld's upgrade) looks
# again: neither wakes it.
WAIT_RECHECK_SECONDS = 30
# New removals wait for Slurm state while slurmrestd has been silent this long at most (it is
# replaced in a Slurm upgrade, say); past it, an outage, they are chosen without it, so
# removalGracePeriodSeconds still bounds the wait. How soon such a NodeSet looks again.
BLIND_HOLD_SECONDS = 180
BLIND_RECHECK_SECONDS = 5
PARTITION_GRACE_EXPIRED = "PartitionGraceExpired"  # Event: the NodeSet went under its jobs


def _no_link(_ns: str, _cluster: str) -> SlurmLink | None:
    return None


class PodNameTaken(RuntimeError):
    """A Pod this NodeSet would create exists already and is not this NodeSet's."""


async def _create_pod(kube: Kube, pod: dict[str, Any]) -> bool:
    """Create the Pod; True when this request made it. A 409 is fine when the Pod is ours (an
    earlier pass, a create whose answer was lost and was repeated, or a replaced Pod still
    terminating); a Pod of that name owned by anything else is an error the NodeSet reports
    (ReconcileFailed), not something to skip silently."""
    try:
        await kube.create(pod)
        return True
    except ApiError as exc:
        if exc.status != 409:
            raise
        meta = pod["metadata"]
        existing = await kube.get(path_for("v1", "pods", meta["namespace"], meta["name"]))
        if existing is None:
            return False  # gone meanwhile: the next pass creates it
        ours = {o.get("uid") for o in meta.get("ownerReferences") or []}
        theirs = existing["metadata"].get("ownerReferences") or []
        if not ours & {o.get("uid") for o in theirs}:
            owner = ", ".join(f"{o.get('kind')}/{o.get('name')}" for o in theirs) or "no owner"
            raise PodNameTaken(
                f"Pod {meta['namespace']}/{meta['name']} exists and belongs to {owner}; "
                "this NodeSet cannot create its Pod of that name"
            ) from None
        return False


async def _create_expected(kube: Kube, reader: Reader, pod: dict[str, Any]) -> None:
    """Create a Pod the reader already expects; unless this request made it, it is expected
    no more: a 409 may be an old Pod still terminating, which must not be read as present
    once the watch shows it gone."""
    made = False
    try:
        made = await _create_pod(kube, pod)
    finally:
        if not made:
            reader.unexpect(pod)


async def _set_finalizer(kube: Kube, body: dict[str, Any], present: bool) -> None:
    meta = body["metadata"]
    current = list(meta.get("finalizers") or [])
    if (names.FINALIZER_SAFE_REMOVAL in current) == present:
        return
    wanted = (
        [*current, names.FINALIZER_SAFE_REMOVAL]
        if present
        else [f for f in current if f != names.FINALIZER_SAFE_REMOVAL]
    )
    patch = {"metadata": {"resourceVersion": meta["resourceVersion"], "finalizers": wanted}}
    try:
        await kube.merge_patch(
            path_for(API_VERSION, "nodesets", meta["namespace"], meta["name"]), patch
        )
    except ApiError as exc:
        if exc.status not in (404, 409):  # changed meanwhile: the next reconcile sees it
            raise


def version_skew(
    cluster: SlurmClusterSpec, spec: NodeSetSpec, running: str | None = None
) -> tuple[Reason, str] | None:
    """Why Slurm would refuse this NodeSet's slurmd beside the cluster's slurmctld, or None:
    the Slurm releases their image tags name (as `sunkctl validate` SUNK043 reads them), with
    ``running`` (the SlurmCluster's ``status.slurmctldRelease``) for what slurmctld runs now.
    A slurmd waiting for slurmctld's upgrade in progress is SlurmUpgradeWaiting, not a skew."""
    node = release_of_image(slurmd_container(spec).get("image"))
    wanted = release_of_tag(cluster.controller.image.tag or "")
    ctld = running or wanted
    problem = skew_problem(node, ctld) if node and ctld else None
    if problem is None:
        return None
    if running and wanted and node and skew_problem(node, wanted) is None:
        return reasons.SLURM_UPGRADE_WAITING, (
            f"the slurmd image runs Slurm {node}; slurmctld runs {running} and is being "
            f"upgraded to {wanted}: this NodeSet's Pods stay as they are until it runs it "
            "(Slurm upgrades slurmdbd, then slurmctld, then the slurmds)"
        )
    return reasons.VERSION_SKEW, (
        f"the slurmd image runs Slurm {node} and slurmctld {ctld}: {problem}. Slurm upgrades "
        "slurmdbd, then slurmctld, then the slurmds; this NodeSet's Pods stay as they are until "
        "the controller is upgraded (or the slurmd image set back)"
    )


async def reconcile_nodeset(
    kube: Kube,
    body: dict[str, Any],
    link_for: LinkFor = _no_link,
    recheck: Callable[[float], None] | None = None,
    hook_url: str = "",
    namespaces: tuple[str, ...] = (),
    reader: Reader | None = None,
    label_later: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """``link_for`` finds the cluster's Syncer; ``recheck(seconds)`` asks for another
    reconcile when a removal's grace period runs out; ``hook_url`` is the operator's lock
    hook, given to the Pods when their cluster locks nodes; ``namespaces`` are the ones the
    operator watches (empty: all), the only ones it may read NodeSets in; ``reader`` is where
    Nodes, Pods, NodeSets and SlurmClusters are read (the operator's watches; default: LISTs);
    ``label_later()`` asks for the Node labels to be written as separate work (default: here,
    after the Pods are created; see ``sunk.operator.nodeset.claims``).
    """
    reader = reader or Listed(kube)
    meta = body["metadata"]
    ns, name = meta["namespace"], meta["name"]
    deleting = bool(meta.get("deletionTimestamp"))
    too_old = None if deleting else operator_too_old(meta)  # a deletion is ours to make safe
    if too_old:
        await emit_on_change(kube, body, reasons.OPERATOR_TOO_OLD.name, too_old)
        return await _not_ready(kube, body, reasons.OPERATOR_TOO_OLD, too_old)
    try:
        spec = NodeSetSpec.model_validate(body["spec"])
    except ValidationError as exc:
        if deleting:  # nothing can be planned from it: let it go
            await _set_finalizer(kube, body, False)
        message = conditions.invalid_spec_message(exc)
        await emit_on_change(kube, body, reasons.INVALID_SPEC.name, message)
        return await _not_ready(kube, body, reasons.INVALID_SPEC, message)
    nodeset = NodeSetInput(name, spec.model_copy(update={"replicas": 0}) if deleting else spec)
    cluster_obj = await _find_cluster(reader, ns, spec.clusterName)
    if cluster_obj is None:
        if deleting:  # no Slurm to protect any more: the Pods go with the NodeSet
            await _set_finalizer(kube, body, False)
            return body.get("status") or {}
        return await _not_ready(
            kube,
            body,
            reasons.CLUSTER_NOT_FOUND,
            f"no SlurmCluster with clusterName {spec.clusterName!r} in {ns}",
        )
    try:
        cluster = SlurmClusterSpec.model_validate(cluster_obj["spec"])
    except ValidationError:
        # The cluster's own status says why; its next generation wakes this NodeSet. Its Pods
        # stay as they are: nothing can be planned without the cluster's spec.
        return await _not_ready(
            kube,
            body,
            reasons.CLUSTER_INVALID,
            f"SlurmCluster {cluster_obj['metadata']['name']} has an invalid spec (its Ready "
            "condition lists the problems); waiting for it to be fixed",
        )
    running = (cluster_obj.get("status") or {}).get("slurmctldRelease")
    skew = None if deleting else version_skew(cluster, spec, running)
    if skew:
        reason, why = skew
        await emit_on_change(kube, body, reason.name, why)
        if recheck is not None:  # the SlurmCluster's status changing wakes no NodeSet
            recheck(WAIT_RECHECK_SECONDS)
        return await _not_ready(kube, body, reason, why)
    # Safe removal needs a Syncer; without one, Pods are deleted at once (as the README says).
    safe = cluster.syncs()
    link = link_for(ns, cluster.clusterName) if safe else None
    view = link.view() if link is not None else None
    if not safe:  # nothing to wait for: the Pods go with the NodeSet (garbage collection)
        await _set_finalizer(kube, body, False)
        if deleting:
            return body.get("status") or {}
    elif not deleting:
        await _set_finalizer(kube, body, True)
    ctx = pod_context(ns, cluster_obj["metadata"]["name"], cluster, spec, hook_url)
    nodes = await reader.nodes()
    pods = [
        p
        for p in await reader.nodeset_pods(ns, name)
        if any(o.get("uid") == meta["uid"] for o in p["metadata"].get("ownerReferences") or [])
    ]
    live = {
        (i["metadata"]["namespace"], i["metadata"]["name"])
        for i in await reader.nodesets(None, namespaces)
    }
    seen = namespaces or None
    try:
        holders = await reader.node_holders(namespaces)
        result = plan(nodeset, body, ctx, nodes, pods, live, view, seen, holders)
        chosen = _chosen(pods)
        blind = False
        if link is not None and not deleting and any(p not in chosen for p, _ in result.delete):
            # Which Pods to remove is chosen on Slurm state read now: a job may have started
            # since the Syncer's last pass.
            fresh = await link.read_now()
            if fresh is not None:
                view = fresh
                holders = await reader.node_holders(namespaces)
                result = plan(nodeset, body, ctx, nodes, pods, live, view, seen, holders)
            elif link.unanswered_for() <= BLIND_HOLD_SECONDS:
                # slurmrestd answered a moment ago (it is being replaced, say): no new Pod is
                # chosen blind. A blind choice may mark the busy node, and a mark holds until
                # its jobs end, spending the rollout's maxUnavailable on it meanwhile.
                blind = True
                result.delete = [(pod, why) for pod, why in result.delete if pod in chosen]
        # Nothing awaited since the holders were read (the watches' reads do not suspend):
        # the Nodes this plan takes are marked taken before any other NodeSet plans.
        reader.expect(result.create)
    except (SizingError, UnsafeConfigError) as exc:  # a registration Slurm cannot take
        await emit_on_change(kube, body, reasons.CONFIG_INVALID.name, str(exc))
        return await _write_status(
            kube,
            body,
            body.get("status") or {},
            [conditions.condition("Ready", False, reasons.CONFIG_INVALID, str(exc))],
        )
    by_name = {n["metadata"]["name"]: n for n in nodes}
    try:
        await bounded([release_node(kube, by_name[n]) for n in result.release])
        if link is not None and view is not None:
            # A name coming back (a replaced Pod) starts from a fresh Slurm node record.
            for pod in result.create:
                if pod["metadata"]["name"] in view:
                    await _forget(link, pod["metadata"]["name"])
        if result.create:
            await _pod_prerequisites(kube, body, cluster_obj, nodeset, ctx)
    except BaseException:
        for pod in result.create:  # not on their way after all
            reader.unexpect(pod)
        raise
    await bounded([_create_expected(kube, reader, pod) for pod in result.create])
    if result.claim or result.create:
        if label_later is not None:
            label_later()  # off the path that brings the Pods up
        else:
            mine = [*pods, *result.create]
            for node_name in await label_nodes(kube, mine, by_name, name, ns, cluster.clusterName):
                result.claimed_elsewhere[node_name] = "claimed concurrently by another NodeSet"
    wanted = {pod: "NodeSet deleted" if deleting else why for pod, why in result.delete}
    grace = cluster.syncer.removalGracePeriodSeconds
    steps = removal.decide(pods, wanted, view, safe, grace, time.time())
    await _carry_out(kube, body, ns, steps)
    if steps.recheck_in is not None and recheck is not None:
        recheck(steps.recheck_in + 1)
    if blind and recheck is not None:
        recheck(BLIND_RECHECK_SECONDS)
    if deleting and not pods:
        waiting = await _partition_wait(link, name)
        # removalGracePeriodSeconds bounds this wait as it bounds a Pod's (0: no bound)
        deleted = removal.parse_stamp(meta["deletionTimestamp"])
        left = grace - (time.time() - deleted if deleted is not None else 0.0)
        if waiting is not None and grace > 0 and left <= 0:
            await emit(
                kube,
                body,
                PARTITION_GRACE_EXPIRED,
                f"{waiting}; removalGracePeriodSeconds ({grace} s) ran out: the NodeSet goes, "
                "and its partition with it",
            )
            waiting = None
        if waiting is None:
            await _set_finalizer(kube, body, False)
            return result.status  # the NodeSet is gone now: no status to write
        await emit_on_change(kube, body, reasons.PARTITION_IN_USE.name, waiting)
        if recheck is not None:
            recheck(min(WAIT_RECHECK_SECONDS, left + 1) if grace > 0 else WAIT_RECHECK_SECONDS)
        ready = conditions.condition("Ready", False, reasons.PARTITION_IN_USE, waiting)
        return await _write_status(kube, body, result.status, [ready])
    if result.invalid is not None:
        await emit_on_change(kube, body, reasons.CONFIG_INVALID.name, result.invalid)
    return await _write_status(kube, body, result.status, _conditions(result, steps, grace))


async def _pod_prerequisites(
    kube: Kube,
    body: dict[str, Any],
    cluster_obj: dict[str, Any],
    nodeset: NodeSetInput,
    ctx: PodContext,
) -> None:
    """What new slurmd Pods need to exist first, applied only when there are Pods to create:
    the slurmd ServiceAccount (the SlurmCluster's reconcile applies it too, but this NodeSet
    may come first, and the API server refuses a Pod naming a missing account) and the s6
    services' ConfigMap, which the Pods read when they start."""
    cluster, meta = ctx.cluster, cluster_obj["metadata"]
    await ensure(kube, service_account(ctx.namespace, cluster, "slurmd", meta["name"], meta["uid"]))
    services = s6_services(nodeset, ctx)
    if services:
        labels = {names.LABEL_NODESET: nodeset.name, names.LABEL_CLUSTER: cluster}
        owners = [owner_reference("NodeSet", body)]
        name = names.nodeset_s6_map(nodeset.name)
        await ensure(kube, s6.config_map(name, ctx.namespace, services, labels, owners))


async def _forget(link: SlurmLink, node: str) -> None:
    try:
        await link.forget(node)
    except Exception as exc:  # slurmd re-registers into the old record: it still works
        log.warning("could not delete the old Slurm node record %s: %s", node, exc)


async def _patch_pod(kube: Kube, ns: str, pod: str, patch: dict[str, Any]) -> None:
    try:
        await kube.merge_patch(path_for("v1", "pods", ns, pod), patch)
    except ApiError as exc:
        if exc.status != 404:  # gone meanwhile: nothing left to mark
            raise


async def _carry_out(kube: Kube, body: dict[str, Any], ns: str, steps: removal.Steps) -> None:
    now = removal.stamp(time.time())

    def annotate(pod: str, why: str | None) -> Any:
        since = now if why is not None else None
        patch = {
            "metadata": {"annotations": {names.ANN_REMOVAL: why, names.ANN_REMOVAL_SINCE: since}}
        }
        return _patch_pod(kube, ns, pod, patch)

    await bounded([annotate(pod, why) for pod, why in steps.mark.items()])
    await bounded([annotate(pod, None) for pod in steps.unmark])
    for pod in steps.mark:
        log.info(
            "%s/%s: removing Pod %s (%s): draining it in Slurm first",
            ns,
            body["metadata"]["name"],
            pod,
            steps.mark[pod],
        )
    for pod in steps.expired:
        await emit(
            kube,
            body,
            "RemovalGraceExpired",
            f"Pod {pod} still ran jobs when removalGracePeriodSeconds ran out; it is deleted "
            "and its jobs fail",
        )
    await bounded([kube.delete(path_for("v1", "pods", ns, pod)) for pod in steps.delete])


async def _partition_wait(link: SlurmLink | None, partition: str) -> str | None:
    """Why a deleted NodeSet whose Pods are gone must stay (None: it may go). Its partition
    line goes with it, and slurmctld ends every job that still names a partition its
    configuration lost, pending ones included; so the NodeSet waits until none does."""
    if link is None:
        return f"waiting for the cluster's Syncer to read which jobs name partition {partition}"
    try:
        jobs = await link.partition_jobs(partition)
    except Exception as exc:  # slurmrestd away: not knowing is not "no job"
        return f"cannot read which jobs name partition {partition} ({exc}); waiting"
    if not jobs:
        return None
    shown = ", ".join(map(str, jobs[:20])) + (", …" if len(jobs) > 20 else "")
    return (
        f"{len(jobs)} job(s) that have not ended name partition {partition} ({shown}); "
        "slurmctld would end them if the partition left its configuration: the NodeSet stays "
        "until they end, move (`scontrol update jobid=<id> partition=<other>`) or are cancelled"
    )


def _chosen(pods: list[dict[str, Any]]) -> set[str]:
    """Pods already marked for removal, or already going."""
    return {
        p["metadata"]["name"]
        for p in pods
        if names.ANN_REMOVAL in (p["metadata"].get("annotations") or {})
        or p["metadata"].get("deletionTimestamp")
    }


def _conditions(result: Plan, steps: removal.Steps, grace: int) -> list[dict[str, Any]]:
    status = result.status
    ready = status["numberReady"] >= min(status["desiredNumberScheduled"], status["numberFeasible"])
    conds = [
        conditions.condition(
            "Ready",
            ready,
            reasons.ALL_PODS_READY if ready else reasons.PODS_PROGRESSING,
            f"{status['numberReady']}/{status['desiredNumberScheduled']} ready, "
            f"{status['numberFeasible']} feasible Nodes" + _infeasible_note(result),
        )
        if result.invalid is None
        else conditions.condition("Ready", False, reasons.CONFIG_INVALID, result.invalid)
    ]
    if result.conflicts:
        detail = "; ".join(f"{n}: {why}" for n, why in sorted(result.conflicts.items()))
        conds.append(conditions.condition("NodeConflict", True, reasons.NODE_CONFLICT, detail))
    elif result.claimed_elsewhere:
        detail = "; ".join(f"{n}: {why}" for n, why in sorted(result.claimed_elsewhere.items()))
        conds.append(conditions.condition("NodeConflict", True, reasons.NODE_CLAIMED, detail))
    else:
        conds.append(conditions.condition("NodeConflict", False, reasons.NO_CONFLICT))
    if result.update_blocked:
        blocked = "; ".join(
            f"{node}: {short}" for node, short in sorted(result.update_blocked.items())
        )
        conds.append(
            conditions.condition(
                "RollingUpdate",
                True,
                reasons.UPDATE_BLOCKED,
                f"the new template does not fit {blocked}; those Pods keep the older template",
            )
        )
    elif result.rolling:
        how = (
            "delete them to replace them (updateStrategy OnDelete)"
            if result.on_delete
            else "they are drained in Slurm and replaced within maxUnavailable"
        )
        note = f"{status['numberOutdated']} Pods run an older template; {how}"
        conds.append(conditions.condition("RollingUpdate", True, reasons.TEMPLATE_CHANGED, note))
    if steps.waiting:
        limit = f"at most {grace}s" if grace else "however long they run"
        conds.append(
            conditions.condition(
                "Removing",
                True,
                reasons.WAITING_FOR_JOBS,
                f"{', '.join(sorted(steps.waiting))} drained in Slurm; waiting for their jobs "
                f"({limit})",
            )
        )
    else:
        conds.append(conditions.condition("Removing", False, reasons.NO_REMOVAL))
    return conds


def _infeasible_note(result: Plan, shown: int = 3) -> str:
    """Which Nodes the NodeSet selects but cannot fit on, so "1 feasible Nodes" explains
    itself (Nodes outside its affinity or tolerations are simply not in the group)."""
    items = sorted((n, why) for n, why in result.infeasible.items() if why.startswith(INSUFFICIENT))
    if not items:
        return ""
    text = "; ".join(f"{node}: {why}" for node, why in items[:shown])
    more = f"; {len(items) - shown} more" if len(items) > shown else ""
    return f" (not feasible: {text}{more})"


async def _find_cluster(reader: Reader, ns: str, cluster: str) -> dict[str, Any] | None:
    for item in await reader.clusters(ns):
        if (item.get("spec") or {}).get("clusterName") == cluster:
            return item
    return None


async def _not_ready(kube: Kube, body: dict[str, Any], reason: Reason, message: str) -> dict:
    """Ready=False with ``reason`` and nothing else: a pass that cannot plan."""
    return await _write_status(
        kube, body, {}, [conditions.condition("Ready", False, reason, message)]
    )


async def _write_status(
    kube: Kube,
    body: dict[str, Any],
    counters: dict[str, Any],
    conds: list[dict[str, Any]],
) -> dict[str, Any]:
    status, written = await conditions.write_status(kube, body, "nodesets", counters, conds)
    if not written:
        return status
    old = (body.get("status") or {}).get("conditions") or []
    old_conflict = next((c for c in old if c["type"] == "NodeConflict"), {})
    new_conflict = next((c for c in status["conditions"] if c["type"] == "NodeConflict"), {})
    if new_conflict.get("status") == "True" and new_conflict.get("message") != old_conflict.get(
        "message"
    ):
        reason = new_conflict["reason"]  # a Warning only for a conflict a human must fix
        await emit(
            kube, body, reason, new_conflict["message"], reason == reasons.NODE_CONFLICT.name
        )
    return status
