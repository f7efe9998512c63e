"""What one upgrade of a slurm release does, from the SlurmCluster and NodeSets running now and
the ones the new values render. Pure: the operator's own builders (control-plane workloads,
the slurmd Pods' template hash, the Slurm files) run over both, and their differences are what
the operator will do. Both sides are built by this version of the code with the same stand-ins
for what only the cluster knows (the database password, the lock hook's URL, where Pods run),
so those never show as changes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from sunk.errors import InputError
from sunk.models.crds import NodeSetSpec, SlurmClusterSpec
from sunk.operator import names
from sunk.operator.cluster.base import ClusterContext
from sunk.operator.cluster.objects import desired_objects
from sunk.operator.cluster.release_order import (
    DAEMONS,
    GATES,
    ORDER,
    WORKLOAD_KINDS,
    containers,
    daemon_release,
)
from sunk.operator.nodeset.pod import pod_context, template_hash
from sunk.slurmconf import ClusterInputs, Endpoints, NodeSetInput, RenderError, render_all
from sunk.slurmconf.inputs import slurmd_container
from sunk.slurmconf.releases import newer, release_of_image
from sunk.slurmconf.render import HOT_RELOAD
from sunk.syncer import lock

STEP_NAMES = {"accounting": "slurmdbd", "controller": "slurmctld", "rest": "slurmrestd",
              "login": "the login Pods"}  # fmt: skip
PASSWORD = "upgrade-check"  # slurmdbd.conf's StoragePass stand-in, the same on both sides
HOT = "read again by slurmctld, no restart"
ROLLS = "the control-plane Pods roll; slurmds read it again from slurmctld"
MAX_SHOWN = 12  # differences shown per object; the rest are counted


@dataclass(frozen=True)
class Side:
    """One state of a cluster: its SlurmCluster and NodeSets (live, or rendered from values)."""

    name: str  # the SlurmCluster's metadata.name
    namespace: str
    cluster: dict[str, Any]  # the SlurmCluster's spec, as stored
    nodesets: dict[str, dict[str, Any]]  # NodeSet name → spec, as stored

    def typed(self, where: str) -> tuple[SlurmClusterSpec, dict[str, NodeSetSpec]]:
        try:
            spec = SlurmClusterSpec.model_validate(self.cluster)
            sets = {n: NodeSetSpec.model_validate(s) for n, s in sorted(self.nodesets.items())}
        except ValidationError as exc:
            first = exc.errors()[0]
            path = ".".join(str(p) for p in first["loc"])
            raise InputError(f"{where}: {path}: {first['msg']}") from exc
        return spec, sets


@dataclass
class Plan:
    changes: list[str] = field(default_factory=list)  # spec differences, one a line
    files: list[str] = field(default_factory=list)  # Slurm files that change, and how
    releases: list[str] = field(default_factory=list)  # the Slurm upgrade's ordered steps
    restarts: list[str] = field(default_factory=list)  # control-plane workloads that roll
    drains: list[str] = field(default_factory=list)  # slurmd Pods replaced or removed

    def as_dict(self) -> dict[str, list[str]]:
        return {"changes": self.changes, "files": self.files, "slurmUpgrade": self.releases,
                "restarts": self.restarts, "drains": self.drains}  # fmt: skip

    @property
    def empty(self) -> bool:
        return not any(self.as_dict().values())


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."


def diff(old: Any, new: Any, path: str = "spec") -> list[str]:
    """Every leaf that differs, as ``path: old → new`` (``(none)`` where one side has none)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted(set(old) | set(new), key=str):
            out += diff(old.get(key, _NONE), new.get(key, _NONE), f"{path}.{key}")
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [
            line
            for i, (a, b) in enumerate(zip(old, new, strict=True))
            for line in diff(a, b, f"{path}[{i}]")
        ]
    if old == new:
        return []
    shown = ("(none)" if v is _NONE else _short(v) for v in (old, new))
    return [f"{path}: {' → '.join(shown)}"]


class _Missing:
    def __repr__(self) -> str:
        return "(none)"


_NONE = _Missing()


def _changes(live: Side, new: Side) -> list[str]:
    lines: list[str] = []

    def add(title: str, found: list[str]) -> None:
        lines.extend(f"{title}: {line}" for line in found[:MAX_SHOWN])
        if len(found) > MAX_SHOWN:
            lines.append(f"{title}: … and {len(found) - MAX_SHOWN} more")

    add(f"SlurmCluster {new.name}", diff(live.cluster, new.cluster))
    for name in sorted(set(live.nodesets) | set(new.nodesets)):
        if name not in live.nodesets:
            lines.append(f"NodeSet {name}: created")
        elif name not in new.nodesets:
            lines.append(f"NodeSet {name}: deleted")
        else:
            add(f"NodeSet {name}", diff(live.nodesets[name], new.nodesets[name]))
    return lines


@dataclass(frozen=True)
class _Built:
    """What the operator builds from one side."""

    files: dict[str, str]
    workloads: dict[tuple[str, str], dict[str, Any]]  # (kind, name) → StatefulSet/Deployment
    hashes: dict[str, str]  # NodeSet → its slurmd Pods' template hash
    slurmd: dict[str, str | None]  # NodeSet → the release of its slurmd image


def _build(side: Side, where: str) -> _Built:
    spec, sets = side.typed(where)
    inputs = ClusterInputs(
        spec,
        tuple(NodeSetInput(n, s) for n, s in sets.items()),
        Endpoints.for_cluster(spec, side.namespace),
        db_password=PASSWORD,
    )
    try:
        rendered = render_all(inputs)
    except RenderError as exc:
        raise InputError(f"{where}: the Slurm renderer refuses it: {exc}") from exc
    db = (names.db_secret(spec.clusterName), "password") if spec.accounting.enabled else None
    ctx = ClusterContext(side.name, side.namespace, "", spec, rendered,
                         names.munge_secret_of(spec), names.jwt_secret_of(spec), db)  # fmt: skip
    workloads = {
        (o["kind"], o["metadata"]["name"]): o
        for o in desired_objects(ctx)
        if o["kind"] in WORKLOAD_KINDS
    }
    hashes, slurmd = {}, {}
    for name, nodeset in sets.items():
        node_input = NodeSetInput(name, nodeset)
        hashes[name] = template_hash(
            node_input, pod_context(side.namespace, side.name, spec, nodeset)
        )
        slurmd[name] = release_of_image(slurmd_container(nodeset).get("image"))
    return _Built(dict(rendered.files), workloads, hashes, slurmd)


def _component(obj: dict[str, Any]) -> str:
    return (obj["metadata"].get("labels") or {}).get(names.LABEL_COMPONENT, "")


def _files(old: _Built, new: _Built) -> list[str]:
    lines = []
    for name in sorted(set(old.files) | set(new.files)):
        if old.files.get(name) == new.files.get(name):
            continue
        verb = (
            "added" if name not in old.files else "removed" if name not in new.files else "changes"
        )
        how = HOT if name in HOT_RELOAD else ROLLS
        lines.append(f"{name} {verb} ({how})")
    return lines


def _restarts(old: _Built, new: _Built) -> list[str]:
    lines = []
    rank = {c: i for i, c in enumerate(ORDER)}
    every = {**old.workloads, **new.workloads}
    for key in sorted(every, key=lambda k: (rank.get(_component(every[k]), len(ORDER)), k)):
        kind, name = key
        was, will = old.workloads.get(key), new.workloads.get(key)
        label = _component(will or was or {"metadata": {}})
        if was is None:
            lines.append(f"{label}: {kind} {name} created")
        elif will is None:
            lines.append(f"{label}: {kind} {name} removed")
        elif was["spec"].get("template") != will["spec"].get("template"):
            lines.append(f"{label}: {kind} {name} rolls ({_why(was, will)})")
        elif was["spec"].get("replicas") != will["spec"].get("replicas"):
            lines.append(
                f"{label}: {kind} {name} scales {was['spec'].get('replicas')} → "
                f"{will['spec'].get('replicas')} (no restart)"
            )
    return lines


def _why(was: dict[str, Any], will: dict[str, Any]) -> str:
    """The images that change, else whether the Slurm configuration does."""
    before = {c.get("name"): c.get("image") for c in containers(was)}
    moved: dict[tuple[str, str], list[str]] = {}
    for c in containers(will):
        if before.get(c.get("name")) != c.get("image"):
            moved.setdefault((str(before.get(c.get("name"))), c.get("image")), []).append(c["name"])
    if moved:
        return "; ".join(f"{a} → {b} ({', '.join(who)})" for (a, b), who in moved.items())
    if _template_annotation(was, names.ANN_CONFIG_HASH) != _template_annotation(
        will, names.ANN_CONFIG_HASH
    ):
        return "the Slurm configuration changes"
    return "its Pod template changes"


def _template_annotation(obj: dict[str, Any], key: str) -> str | None:
    return ((obj["spec"]["template"].get("metadata") or {}).get("annotations") or {}).get(key)


def _releases(old: _Built, new: _Built, live: Side) -> list[str]:
    """The Slurm upgrade's steps, in the order the operator takes them, when any daemon moves to
    a newer release."""
    moves: dict[str, tuple[str, str]] = {}
    for obj in new.workloads.values():
        component = _component(obj)
        was = old.workloads.get((obj["kind"], obj["metadata"]["name"]))
        if component not in DAEMONS or was is None:
            continue
        before, after = daemon_release(was, component), daemon_release(obj, component)
        if before and after and newer(after, before):
            moves[component] = (before, after)
    slurmd = {n: (old.slurmd.get(n), r) for n, r in new.slurmd.items() if n in live.nodesets}
    slurmd = {n: (a, b) for n, (a, b) in slurmd.items() if a and b and newer(b, a)}
    if not moves and not slurmd:
        return []
    steps = []
    for component in ORDER:
        if component in moves:
            before, after = moves[component]
            gate = GATES.get(component)
            wait = f", once {DAEMONS[gate]} runs {after} rolled out and ready" if gate else ""
            note = (
                " (its first start converts the accounting database)"
                if component == "accounting"
                else ""
            )
            steps.append(f"{STEP_NAMES[component]} {before} → {after}{note}{wait}")
    for name, (before, after) in sorted(slurmd.items()):
        steps.append(
            f"slurmd of NodeSet {name} {before} → {after}, once slurmctld runs {after}: "
            "each Pod drained and replaced after its jobs end"
        )
    return steps


def _drains(
    old: _Built,
    new: _Built,
    live: Side,
    new_side: Side,
    pods: list[dict[str, Any]],
    nodes: Mapping[str, dict[str, Any]],
) -> list[str]:
    lines = []
    for name in sorted(set(live.nodesets) | set(new_side.nodesets)):
        mine = sorted(
            (
                p
                for p in pods
                if (p["metadata"].get("labels") or {}).get(names.LABEL_NODESET) == name
            ),
            key=lambda p: p["metadata"]["name"],
        )
        shown = ", ".join(_pod(p, nodes) for p in mine) or "no Pods now"
        if name not in live.nodesets:
            continue
        if name not in new_side.nodesets:
            lines.append(
                f"NodeSet {name} deleted: its slurmd Pods ({shown}) drained and removed once their "
                "jobs end; it stays until no job names its partition"
            )
            continue
        if old.hashes[name] != new.hashes[name]:
            lines.append(
                f"NodeSet {name}: every slurmd Pod replaced ({shown}), each drained first and "
                "replaced once its jobs end, maxUnavailable at a time"
            )
        before = live.nodesets[name].get("replicas")
        after = new_side.nodesets[name].get("replicas")
        if before is not None and after is not None and after < before:
            lines.append(
                f"NodeSet {name} scales {before} → {after}: {before - after} slurmd Pod(s) "
                f"removed, idle ones first, busy ones drained until their jobs end ({shown})"
            )
    return lines


def _pod(pod: dict[str, Any], nodes: Mapping[str, dict[str, Any]]) -> str:
    """The Pod's name, with the jobs holding its Node's lock (the Node's annotation; the Pod
    carries only the lock's state)."""
    name = pod["metadata"]["name"]
    if lock.state_of(pod) == lock.UNLOCKED:
        return name
    node = nodes.get((pod.get("spec") or {}).get("nodeName") or "")
    holders = lock.holders_of(node) if node else lock.Holders()
    jobs = ",".join(job for job, _ in holders.jobs)
    return f"{name} (job {jobs} holds it)" if jobs else f"{name} (a job holds it)"


def plan(
    live: Side,
    new: Side,
    pods: Iterable[dict[str, Any]] = (),
    nodes: Iterable[dict[str, Any]] = (),
) -> Plan:
    """What upgrading ``live`` to ``new`` does; ``pods``: the cluster's slurmd Pods now, and
    ``nodes`` the Kubernetes Nodes they run on (whose lock annotations name the jobs)."""
    by_name = {n["metadata"]["name"]: n for n in nodes}
    old_built = _build(live, f"the live SlurmCluster {live.name}")
    new_built = _build(new, "the values")
    return Plan(
        changes=_changes(live, new),
        files=_files(old_built, new_built),
        releases=_releases(old_built, new_built, live),
        restarts=_restarts(old_built, new_built),
        drains=_drains(old_built, new_built, live, new, list(pods), by_name),
    )
