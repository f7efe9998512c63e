"""slurm.conf for a configless cluster of dynamic nodes."""

from __future__ import annotations

from sunk.slurmconf import health, release_options
from sunk.slurmconf.format import (
    BANNER,
    LIST_KEYS,
    Repeated,
    key_lines,
    line,
    merge_list,
    split_list,
)
from sunk.slurmconf.gres import gres_types
from sunk.slurmconf.guard import UnsafeConfigError, check_key, check_value, find_key, owned
from sunk.slurmconf.inputs import (
    JWT_KEY,
    SLURMD_SPOOL,
    STATE_DIR,
    ClusterInputs,
    NodeSetInput,
    slurmd_container,
)
from sunk.slurmconf.memory import def_mem_per_cpu
from sunk.slurmconf.releases import release_of_image, release_of_tag

# Keys the operator derives from the cluster's shape; a user value would break it.
OWNED_KEYS = frozenset(
    {
        "ClusterName",
        "SlurmctldHost",
        "ControlMachine",
        "SlurmUser",
        "AuthType",
        "CredType",
        "AuthAltTypes",
        "AuthAltParameters",
        "StateSaveLocation",
        "SlurmdSpoolDir",
        "SlurmctldPort",
        "SlurmdPort",
        "AccountingStorageType",
        "AccountingStorageHost",
        "AccountingStoragePort",
        "MaxNodeCount",
        "NodeName",
        "NodeSet",
        "PartitionName",
        "Prolog",
        "Epilog",
        "ProctrackType",
    }
)
# Keys of a partition line the operator writes (the name and the member NodeSets).
OWNED_PARTITION_KEYS = frozenset({"PartitionName", "Nodes"})
# Keys of the passthrough map that are not slurm.conf keys.
NOT_SLURM_KEYS = frozenset(
    {"extraConfig", "cgroupConfig", "mpiConfig", "jobSubmitLua", "cliFilterLua"}
)
FILE = "slurm.conf"
# Slurm keeps node records in 32-bit counters; a bigger MaxNodeCount is not a cluster.
MAX_NODE_COUNT = 2**31 - 1
MAX_NODES_FLOOR = 1024
DEFAULT_DEF_MEM_PER_CPU = 4096
HA_TAKEOVER_SECONDS = 10
PMIX = "mpi/pmix"


def base_settings(inputs: ClusterInputs) -> dict[str, object]:
    spec, ep = inputs.cluster, inputs.endpoints
    settings: dict[str, object] = {
        "ClusterName": spec.clusterName,
        "SlurmctldHost": Repeated(f"{host}({addr})" for host, addr in ep.controllers),
        "SlurmUser": "slurm",
        "SlurmdUser": "root",
        "AuthType": "auth/munge",
        "CredType": "cred/munge",
        "SlurmctldPort": 6817,
        "SlurmdPort": 6818,
        "StateSaveLocation": STATE_DIR,
        "SlurmdSpoolDir": SLURMD_SPOOL,
        "SlurmctldPidFile": "/run/slurm/slurmctld.pid",
        "SlurmdPidFile": "/run/slurm/slurmd-%n.pid",
        "SlurmctldParameters": ["enable_configless"],
        "ReturnToService": 2,
        "MaxNodeCount": max_node_count(inputs.nodesets),
        "TreeWidth": 65533,
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": ["CR_Core_Memory"],
        "ProctrackType": "proctrack/cgroup",
        "TaskPlugin": ["task/cgroup", "task/affinity"],
        "JobAcctGatherType": "jobacct_gather/cgroup",
        "SchedulerType": "sched/backfill",
        "DefMemPerCPU": DEFAULT_DEF_MEM_PER_CPU,
        "SlurmdTimeout": 300,
        "InactiveLimit": 0,
        "KillWait": spec.scheduler.killWait,
        "MinJobAge": 300,
        "Waittime": 0,
        # srun --mpi=pmix by default (mpi.conf: sunk.slurmconf.mpi); a user's MpiDefault wins
        "MpiDefault": mpi_default(inputs),
    }
    if ep.backups:
        # A standby takes over after this long without the primary's answer (Slurm's default
        # 120 s would leave the cluster without a controller for two minutes); a user's wins.
        settings["SlurmctldTimeout"] = HA_TAKEOVER_SECONDS
    if spec.jwt.enabled:
        settings["AuthAltTypes"] = "auth/jwt"
        settings["AuthAltParameters"] = f"jwt_key={JWT_KEY}"
    types = gres_types(inputs.nodesets)
    if types:
        settings["GresTypes"] = types
    if inputs.topology_plugin:
        settings["TopologyPlugin"] = inputs.topology_plugin
    if spec.accounting.enabled:
        settings["AccountingStorageType"] = "accounting_storage/slurmdbd"
        settings["AccountingStorageHost"] = ep.dbd_addr
        settings["AccountingStoragePort"] = ep.dbd_port
    # The prolog may lock the job's Node and run the health checks before the job starts.
    if spec.runs_dispatcher("prolog"):
        settings["Prolog"] = "/etc/slurm/prolog.sh"
        settings["PrologFlags"] = ["Alloc"]
    if spec.runs_dispatcher("epilog"):
        settings["Epilog"] = "/etc/slurm/epilog.sh"
    settings.update(health.slurm_settings(spec.healthCheck))
    # No PlugStackConfig: configless slurmd and sackd fetch plugstack.conf from slurmctld and
    # read it beside slurm.conf, where the default points (slurmctld, the login Pods: the
    # mounted /etc/slurm).
    # The Lua plugins read job_submit.lua / cli_filter.lua beside slurm.conf (sunk.slurmconf.lua).
    lua = spec.slurmConfig.lua()
    if "job_submit.lua" in lua:
        settings["JobSubmitPlugins"] = ["lua"]
    if "cli_filter.lua" in lua:
        settings["CliFilterPlugins"] = ["lua"]
    return settings


def image_releases(inputs: ClusterInputs) -> list[str]:
    """The Slurm series the images that read slurm.conf name (controller, login, each
    NodeSet's slurmd container), in that order; images whose tags name none are left out."""
    spec = inputs.cluster
    found = [release_of_tag(c.image.tag or "") for c in (spec.controller, spec.login)]
    found += [release_of_image(slurmd_container(ns.spec).get("image")) for ns in inputs.nodesets]
    return list(dict.fromkeys(r for r in found if r))


def mpi_default(inputs: ClusterInputs) -> str:
    """``pmix``, unless a Slurm release the images name lacks the plugin: Debian forky's
    26.05 is built without PMIx, and with MpiDefault=pmix every plain `srun` there fails
    ("MPI: Cannot create context for mpi/pmix"), so such a cluster gets ``none`` (PMI2 stays
    available with `srun --mpi=pmi2`; `sunkctl validate` SUNK046 says so)."""
    lacking = [r for r in image_releases(inputs) if release_options.missing_plugin(r, PMIX)]
    return "none" if lacking else "pmix"


def max_node_count(nodesets: tuple[NodeSetInput, ...]) -> int:
    """Room for every dynamic node the NodeSets may create."""
    wanted = sum(ns.spec.replicas or 0 for ns in nodesets)
    if wanted > MAX_NODE_COUNT:
        raise UnsafeConfigError(
            FILE, "compute.nodes.*.replicas", f"{wanted} nodes in all exceed {MAX_NODE_COUNT}"
        )
    return max(MAX_NODES_FLOOR, wanted)


def apply_user_settings(
    settings: dict[str, object], user: dict[str, object], warnings: list[str]
) -> dict[str, object]:
    """The user's slurmConfig over ours: list keys merge, owned keys are refused. Keys are
    compared case-insensitively, as Slurm reads them; a user key replaces ours in place."""
    merged = dict(settings)
    for key in sorted(user):
        if key in NOT_SLURM_KEYS:
            continue
        check_key(key, FILE, f"slurmConfig.{key}")
        value = user[key]
        if owned(key, OWNED_KEYS):
            warnings.append(f"slurmConfig.{key}: managed by the operator; the value is ignored")
            continue
        existing = find_key(merged, key)
        if existing is not None and owned(key, LIST_KEYS):
            merged[existing] = merge_list(split_list(merged[existing]), split_list(value))
        elif existing is not None:
            merged[existing] = value
        else:
            merged[key] = value
    return merged


def partition_config(
    config: dict[str, object],
    user: dict[str, object],
    where: str,
    warnings: list[str],
) -> dict[str, object]:
    """A partition line's keys with the user's over ours (any case); the name and the
    members stay the operator's."""
    merged = dict(config)
    for key, value in user.items():
        check_key(key, FILE, f"{where}.{key}")
        if owned(key, OWNED_PARTITION_KEYS):
            warnings.append(f"{where}.{key}: set by the operator; the value is ignored")
            continue
        merged[find_key(merged, key) or key] = value
    return merged


def nodeset_lines(
    inputs: ClusterInputs, default_partition: str | None, warnings: list[str]
) -> list[str]:
    lines = []
    reserved = inputs.cluster.compute.reservedMemory
    for ns in inputs.nodesets:
        lines.append(line({"NodeSet": ns.name, "Feature": ns.name}, FILE, f"NodeSet {ns.name}"))
    for ns in inputs.nodesets:
        config: dict[str, object] = {
            "PartitionName": ns.name,
            "Nodes": ns.name,
            "Default": "YES" if ns.name == default_partition else None,
            "DefMemPerCPU": def_mem_per_cpu(ns, reserved),
            "State": "UP",
        }
        where = f"NodeSet {ns.name}: spec.partitionConfig"
        config = partition_config(config, dict(ns.spec.partitionConfig), where, warnings)
        lines.append(line(config, FILE, f"{where}.config"))
    return lines


def partition_lines(inputs: ClusterInputs, warnings: list[str]) -> list[str]:
    by_name = {ns.name: ns for ns in inputs.nodesets}
    reserved = inputs.cluster.compute.reservedMemory
    lines = []
    for index, part in enumerate(inputs.cluster.compute.partitions):
        where = f"compute.partitions[{index}]"
        # names, never quoted: the guard sees every one, even those left out below
        check_value(",".join(part.nodeSets), FILE, f"{where}.nodeSets", words=True)
        members = [by_name[n] for n in part.nodeSets if n in by_name]
        if "ALL" in part.nodeSets:
            members, nodes = list(by_name.values()), "ALL"
        else:
            # A name Slurm has no NodeSet line for is fatal to slurmctld ("Invalid node names
            # in partition"): a NodeSet deleted while the cluster's partitions still name it
            # is left out; the partition stays, with no nodes if none remain, so the jobs
            # queued in it stay valid.
            gone = [n for n in part.nodeSets if n not in by_name]
            if gone:
                warnings.append(
                    f"{where}.nodeSets: no NodeSet {', '.join(gone)} in this cluster; "
                    "left out of the partition"
                )
            nodes = ",".join(m.name for m in members) or None
        mems = [m for m in (def_mem_per_cpu(ns, reserved) for ns in members) if m]
        config: dict[str, object] = {
            "PartitionName": part.name,
            "Nodes": nodes,
            "Default": "YES" if part.default else None,
            "DefMemPerCPU": min(mems) if mems else None,
            "State": "UP",
        }
        config = partition_config(config, dict(part.config), f"{where}.config", warnings)
        lines.append(line(config, FILE, where))
    return lines


def default_partition(inputs: ClusterInputs) -> str | None:
    """The group partition that is Default=YES when no declared partition is the default."""
    declared = inputs.cluster.compute.partitions
    if any(p.default for p in declared) or "Default=YES" in inputs.cluster.compute.rawPartitions:
        return None
    names = [ns.name for ns in inputs.nodesets]
    return names[0] if names else None


def owned_keys_in_text(text: str, allowed: frozenset[str] = frozenset()) -> list[tuple[int, str]]:
    """(line number in the text, key) of every operator-owned slurm.conf key, in any case,
    and every `Include` directive, read as Slurm reads the lines (comments stripped).
    ``allowed``: lower-case owned keys the text may set (a raw partition line's own name)."""
    owned_lower = {k.lower(): k for k in OWNED_KEYS}
    found = []
    for number, text_line in enumerate(text.splitlines(), start=1):
        words = text_line.split("#", 1)[0].split()
        if words and words[0].lower() == "include":
            found.append((number, "Include"))
        for word in words:
            key = word.split("=", 1)[0].strip().lower()
            if "=" in word and key in owned_lower and key not in allowed:
                found.append((number, word.split("=", 1)[0]))
    return found


# Free text written into slurm.conf as given: (key path, owned keys the text may set, lower
# case). Raw partition lines name their partition and its nodes.
FREE_TEXT = (
    ("slurmConfig.extraConfig", frozenset()),
    ("compute.rawPartitions", frozenset({"partitionname", "nodes"})),
)


def free_text_problems(text: str, allowed: frozenset[str]) -> list[str]:
    """Why the text cannot go into slurm.conf: a key the operator owns (Slurm reads keys in
    any case and the last one wins, so `Prolog=/tmp/x` after ours would replace the lock
    prolog) or an `Include` of a file we do not render; one line each."""
    return [
        f"line {number}: `Include` reads a file we do not render"
        if key == "Include"
        else f"line {number}: `{key}` is managed by the operator"
        for number, key in owned_keys_in_text(text, allowed)
    ]


def render_slurm_conf(inputs: ClusterInputs, warnings: list[str]) -> str:
    spec = inputs.cluster
    user = dict(spec.slurmConfig.model_extra or {})
    settings = apply_user_settings(base_settings(inputs), user, warnings)
    out = [BANNER.rstrip("\n"), "", "# --- cluster"]
    out += key_lines(settings, FILE, "slurmConfig")
    out += ["", "# --- node groups (dynamic nodes join through their feature)"]
    out += nodeset_lines(inputs, default_partition(inputs), warnings)
    declared = partition_lines(inputs, warnings)
    if declared:
        out += ["", "# --- declared partitions", *declared]
    # Raw partition lines and extraConfig are free text by design, written as given after
    # everything the operator owns; an owned key in them is refused, not overridden.
    raw, extra = spec.compute.rawPartitions.strip(), spec.slurmConfig.extraConfig.strip()
    for (where, allowed), text in zip(FREE_TEXT, (extra, raw), strict=True):
        problems = free_text_problems(text, allowed)
        if problems:
            raise UnsafeConfigError(FILE, where, "; ".join(problems))
    if raw:
        out += ["", "# --- compute.partitions (raw)", raw]
    if extra:
        out += ["", "# --- slurmConfig.extraConfig", extra]
    return "\n".join(out) + "\n"
