"""Every file Slurm needs, from one set of inputs, plus a content hash for pods."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

from sunk.models.quantity import QuantityError
from sunk.slurmconf import health, size
from sunk.slurmconf.cgroup import render_cgroup_conf
from sunk.slurmconf.gres import render_gres_conf
from sunk.slurmconf.guard import UnsafeConfigError, check_value, find_key
from sunk.slurmconf.inputs import ClusterInputs
from sunk.slurmconf.lua import CLI_FILTER, JOB_SUBMIT, LuaError, render_lua
from sunk.slurmconf.memory import SizingError
from sunk.slurmconf.mpi import render_mpi_conf
from sunk.slurmconf.plugstack import render_plugstack_conf
from sunk.slurmconf.registration import registration
from sunk.slurmconf.scripts import dispatcher, lock_script
from sunk.slurmconf.slurm_conf import render_slurm_conf
from sunk.slurmconf.slurmdbd import render_slurmdbd_conf
from sunk.slurmconf.sssd import FILE as SSSD_FILE
from sunk.slurmconf.sssd import render_sssd_conf
from sunk.slurmconf.topology import FILE as TOPOLOGY_FILE
from sunk.slurmconf.topology import layout, render_topology_conf

# Files a change of which needs no pod restart (`scontrol reconfigure` picks them up; the Lua
# plugins reread their scripts by themselves, see sunk.slurmconf.lua).
# Files read afresh where they are used: the health checks at each run of the runner.
HOT_RELOAD = frozenset({"topology.conf", JOB_SUBMIT, CLI_FILTER, health.FILE})


class RenderError(ValueError):
    """The inputs describe a cluster Slurm cannot run, or hold text that would change the
    structure of a Slurm file; the message names the file and the key."""


@dataclass(frozen=True)
class Rendered:
    files: dict[str, str]  # /etc/slurm file name → content (slurmdbd.conf is secret)
    registrations: dict[str, str]  # NodeSet name → slurmd --conf string (without dynamic features)
    warnings: list[str] = field(default_factory=list)

    @property
    def config_hash(self) -> str:
        """Hash of everything but hot-reloadable files: put it on pods so they roll on change."""
        digest = hashlib.sha256()
        for name in sorted(self.files):
            if name in HOT_RELOAD:
                continue
            digest.update(name.encode() + b"\0" + self.files[name].encode() + b"\0")
        return digest.hexdigest()[:16]


def topology_plugin(inputs: ClusterInputs) -> str:
    extra = inputs.cluster.slurmConfig.extraConfig
    settings = inputs.cluster.slurmConfig.model_extra or {}
    key = find_key(settings, "TopologyPlugin")
    if key is not None and settings[key]:
        return check_value(str(settings[key]), "topology.conf", f"slurmConfig.{key}", words=True)
    if "topology/block" in extra:
        return "topology/block"
    return "topology/tree"


def render_all(inputs: ClusterInputs) -> Rendered:
    """Every file; a RenderError names the file and key of any input the guard refuses."""
    try:
        return _render_all(inputs)
    except (SizingError, UnsafeConfigError, QuantityError, LuaError, size.ConfigSizeError) as exc:
        raise RenderError(str(exc)) from exc


def _render_all(inputs: ClusterInputs) -> Rendered:
    warnings: list[str] = []
    spec = inputs.cluster
    nodesets = tuple(sorted(inputs.nodesets, key=lambda ns: ns.name))
    plugin = topology_plugin(inputs)
    active, other = layout(
        inputs.placements, spec.topology.treeLabels, spec.topology.blockLabel, plugin
    )
    inputs = replace(
        inputs,
        nodesets=nodesets,
        topology_plugin=plugin if spec.compute.generateTopology and active else None,
    )
    if plugin == "topology/block" and active:
        warnings.append(
            "topology/block: stock Slurm 24.11 rejects blocks naming dynamic nodes "
            "that have not registered yet (SUNK patches Slurm for this)"
        )
    files = {
        "slurm.conf": render_slurm_conf(inputs, warnings),
        "cgroup.conf": render_cgroup_conf(dict(spec.slurmConfig.cgroupConfig)),
        "mpi.conf": render_mpi_conf(dict(spec.slurmConfig.mpiConfig)),
        "gres.conf": render_gres_conf(nodesets),
        "plugstack.conf": render_plugstack_conf(spec.compute.pyxis, spec.compute.mpi),
    }
    files.update(render_lua(spec.slurmConfig))
    if spec.compute.generateTopology:
        files["topology.conf"] = render_topology_conf(active, other, plugin)
    if spec.directoryService.enabled:
        files[SSSD_FILE] = render_sssd_conf(spec.directoryService)
    if spec.accounting.enabled:
        files["slurmdbd.conf"] = render_slurmdbd_conf(inputs, warnings)
    locking = spec.locks_nodes()
    for kind in ("prolog", "epilog"):
        if spec.runs_dispatcher(kind):
            files[f"{kind}.sh"] = dispatcher(kind, locking, spec.health_in(kind))
    if locking:
        files["sunk-lock.sh"] = lock_script()
    if spec.healthCheck.renders_file():
        files[health.FILE] = health.render_checks(spec.healthCheck)
    registrations = {ns.name: registration(ns, spec.compute.reservedMemory) for ns in nodesets}
    topology = TOPOLOGY_FILE if TOPOLOGY_FILE in files else None
    groups = [(ns.prefix, ns.spec.replicas) for ns in nodesets]
    warnings += size.check(files, groups, topology)
    return Rendered(files, registrations, warnings)
