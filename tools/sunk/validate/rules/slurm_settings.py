"""slurm.conf rules: `slurmConfig` keys Slurm does not know or the operator writes, values
Slurm would not parse (in `slurmConfig` and partitions), and owned keys hidden in free text
(`extraConfig`, raw partition lines)."""

from __future__ import annotations

import difflib
from collections.abc import Iterator

from sunk.slurmconf import option_types, release_options
from sunk.slurmconf.format import value_text
from sunk.slurmconf.slurm_conf import (
    FREE_TEXT,
    NOT_SLURM_KEYS,
    OWNED_KEYS,
    OWNED_PARTITION_KEYS,
    PMIX,
    free_text_problems,
)
from sunk.validate.rules.context import NODES, PARTS, RuleContext, as_map, get
from sunk.validate.rules.images import slurm_releases
from sunk.validate.rules.partitions import declared_partitions, raw_partitions
from sunk.validate.rules.registry import Hit, rule


def slurm_conf_keys() -> dict[str, str]:
    """lower-case key → spelling, for every slurm.conf key of a Slurm release we build (as its
    own parser takes them: `sunk.slurmconf.release_options`)."""
    return release_options.spellings("slurm.conf")


def _closest(key: str, known: dict[str, str]) -> str:
    """` (did you mean `Key`?)` for the known key closest to ``key`` (lower-case → spelling),
    or "" when none is close."""
    close = difflib.get_close_matches(key.lower(), list(known), n=1, cutoff=0.75)
    return f" (did you mean `{known[close[0]]}`?)" if close else ""


def partition_maps(ctx: RuleContext) -> list[tuple[tuple, str, dict]]:
    """Declared partitions' `config` and groups' `partitionConfig`: (path, whose, the map)."""
    maps = [
        ((*PARTS, index, "config"), f"partition `{part.get('name')}`", part.get("config"))
        for index, part in declared_partitions(ctx)
    ]
    maps += [
        ((*NODES, name, "partitionConfig"), f"group `{name}`", group.get("partitionConfig"))
        for name, group in ctx.groups.items()
    ]
    return [(path, whose, as_map(config)) for path, whose, config in maps]


def configured_options(ctx: RuleContext) -> Iterator[tuple[str, tuple, str, str, str]]:
    """Every option the values put into slurm.conf, as (table, the finding's path, its message
    prefix, key, value as Slurm reads it): `slurmConfig` (but its non-slurm.conf keys and
    nulls), then declared partitions' `config`, groups' `partitionConfig` and raw partition
    lines."""
    for key, value in as_map(ctx.values.get("slurmConfig")).items():
        if key not in NOT_SLURM_KEYS and value is not None:
            yield "slurm.conf", ("slurmConfig", key), "", key, value_text(value)
    for path, whose, config in partition_maps(ctx):
        for key, value in config.items():
            yield "partition", (*path, key), f"{whose}: ", key, value_text(value)
    for name, pairs in raw_partitions(ctx):
        for key, value in pairs.items():
            yield "partition", PARTS, f"partition `{name}`: ", key, value


@rule(
    "SUNK011",
    "unknown-slurm-conf-key",
    "error",
    "A slurmConfig key no Slurm release we build knows; slurmctld would not start.",
    "check the spelling against slurm.conf(5), or put free text in slurmConfig.extraConfig",
)
def unknown_slurm_key(ctx: RuleContext) -> Iterator[Hit]:
    """Every key of `slurmConfig` (but `extraConfig`, `cgroupConfig`, `mpiConfig`,
    `jobSubmitLua` and `cliFilterLua`) becomes a `Key=value` line of slurm.conf, and slurmctld
    does not start on a key it does not know. The rule checks each against the slurm.conf keys
    of every Slurm release we build images for, as their own parsers take them
    (`sunk/slurmconf/slurm_options.json`), case-insensitively as Slurm reads them, and suggests
    the closest known key. A key only some releases have is SUNK044's.

    Fails:
        slurmConfig:
          SchedulerParamters: bf_continue

    Passes:
        slurmConfig:
          SchedulerParameters: bf_continue
    """
    known = slurm_conf_keys()
    for key in as_map(ctx.values.get("slurmConfig")):
        if key in NOT_SLURM_KEYS or key.lower() in known:
            continue
        yield Hit(("slurmConfig", key), f"unknown slurm.conf key `{key}`{_closest(key, known)}")


@rule(
    "SUNK012",
    "operator-owned-slurm-key",
    "error",
    "A slurmConfig key the operator writes itself; the value would be ignored.",
    "remove the key: the operator derives it from the cluster's shape",
)
def owned_slurm_key(ctx: RuleContext) -> Iterator[Hit]:
    """Some slurm.conf keys come from the cluster's shape, not from the user: the cluster name,
    the controller's host, authentication, ports, spool and state directories and the like
    (`sunk.slurmconf.slurm_conf.OWNED_KEYS`). The operator writes them itself, so a `slurmConfig`
    entry for one (in any case) would be ignored.

    Fails:
        slurmConfig:
          SlurmctldHost: myhost

    Passes:
        slurmConfig:
          SchedulerParameters: bf_continue
    """
    owned = {k.lower(): k for k in OWNED_KEYS}
    for key in as_map(ctx.values.get("slurmConfig")):
        if key.lower() in owned:
            yield Hit(("slurmConfig", key), f"`{key}` is managed by the operator")


# The renderer's free text (by the CR's key path) as the values hold it: (path, name).
_FREE_TEXT_VALUES = {
    "slurmConfig.extraConfig": (("slurmConfig", "extraConfig"), "slurmConfig.extraConfig"),
    "compute.rawPartitions": (PARTS, "raw partition lines"),
}


@rule(
    "SUNK024",
    "owned-key-in-free-text",
    "error",
    "extraConfig or raw partition lines set a key the operator owns (Slurm reads keys in any "
    "case; the last one wins), or include another file.",
    "remove the key: the operator derives it from the cluster's shape",
)
def owned_key_in_free_text(ctx: RuleContext) -> Iterator[Hit]:
    """`slurmConfig.extraConfig` and raw partition lines (`compute.partitions` as text) go into
    slurm.conf as written, after the operator's own keys. Slurm reads keys in any case and the
    last one wins, so an owned key there (`clustername=x` as much as `ClusterName=x`) would
    override the operator's value; an `Include` line would read a file the operator does not
    render. Raw partition lines may name their partition and nodes (`PartitionName`, `Nodes`).
    Comments are skipped, as Slurm skips them.

    Fails:
        slurmConfig:
          extraConfig: |
            SchedulerParameters=bf_continue
            slurmctldport=7000

    Passes:
        slurmConfig:
          extraConfig: |
            SchedulerParameters=bf_continue
    """
    for where, allowed in FREE_TEXT:
        path, label = _FREE_TEXT_VALUES[where]
        text = get(ctx.values, *path)
        if isinstance(text, str):
            for problem in free_text_problems(text, allowed):
                yield Hit(path, f"{label}, {problem}")


@rule(
    "SUNK042",
    "slurm-option-value",
    "error",
    "A slurmConfig or partition value Slurm would not parse (a time, count, memory size, "
    "YES/NO or choice of the wrong form); slurmctld would refuse the file or ignore it.",
    "write the value in the form slurm.conf(5) gives for the key (the message names it)",
)
def slurm_option_value(ctx: RuleContext) -> Iterator[Hit]:
    """The renderer quotes a value with a space, so nothing is injected, but Slurm still reads
    each value by its key's type, and slurmctld refuses the whole file at its next start or
    reconfigure when one does not parse (or logs and ignores it, for a few keys). The rule
    reads the values of `slurmConfig`, of each partition's `config`, of each group's
    `partitionConfig` and of raw partition lines as Slurm 24.11's parser does, for the keys
    whose type it knows (`sunk.slurmconf.option_types`: times such as `MaxTime`, counts such
    as `MessageTimeout` up to 65535, memory in MB without a unit, YES/NO flags, choices such as
    a partition's `State` or `OverSubscribe`). The slurm tier feeds every
    example value of those types to Slurm's own parser, so the two agree.

    Fails:
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc]}
          partitions:
            - name: batch
              nodeSets: [cpu]
              config: {MaxTime: 10 Nodes=ALL}

    Passes:
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc]}
          partitions:
            - name: batch
              nodeSets: [cpu]
              config: {MaxTime: "1-00:00:00"}
    """
    types = {"slurm.conf": option_types.SLURM_CONF, "partition": option_types.PARTITION}
    for table, path, whose, key, value in configured_options(ctx):
        problem = option_types.value_problem(types[table], key, value)
        if problem:
            yield Hit(path, f"{whose}{problem}")


@rule(
    "SUNK044",
    "slurm-option-not-in-release",
    "error",
    "A slurm.conf or partition key that one Slurm release the images name does not have "
    "though another does; that release refuses the whole slurm.conf.",
    "use what every release the images run has, or upgrade every image past the change first",
)
def option_not_in_release(ctx: RuleContext) -> Iterator[Hit]:
    """Releases add, rename and remove options (`NamespaceType`, `PrologTimeout` and a
    partition's `Topology` arrived after 24.11), and every Slurm daemon and command refuses a
    slurm.conf with a key it does not know. The rule reads the Slurm series the images' tags
    name (`0.1.0-slurm24.11`: the controller, accounting, rest, login, compute and each group's
    images, all of which parse the file) and checks each `slurmConfig` key, and each partition
    `config` and group `partitionConfig` key (raw partition lines too), against what that
    release's own parser takes (`sunk/slurmconf/slurm_options.json`, generated from the
    releases we build and checked against them by the slurm tier). Mid-upgrade, with images on
    two releases, a key must suit both. Releases we have no table for, and tags that name no
    series, are not checked; plugins are SUNK046's.

    Fails:
        controller:
          image: {repository: opensunk/controller, tag: 0.1.0-slurm24.11}
        slurmConfig:
          PrologTimeout: 120

    Passes:
        controller:
          image: {repository: opensunk/controller, tag: 0.1.0-slurm26.05}
        accounting:
          image: {repository: opensunk/controller, tag: 0.1.0-slurm26.05}
        login:
          image: {repository: opensunk/login, tag: 0.1.0-slurm26.05}
        rest:
          image: {repository: opensunk/controller, tag: 0.1.0-slurm26.05}
        compute:
          image: {repository: opensunk/slurmd, tag: 0.1.0-slurm26.05}
        slurmConfig:
          MpiDefault: pmi2
          PrologTimeout: 120
    """
    named = slurm_releases(ctx)
    for table, path, whose, key, _ in configured_options(ctx):
        for release in named:
            problem = release_options.missing_key(release, table, key)
            if problem:
                yield Hit(path, f"{whose}{problem}")


@rule(
    "SUNK045",
    "unknown-partition-key",
    "error",
    "A partition `config` or group `partitionConfig` key that no Slurm release we build knows "
    "on a partition line; slurmctld would not start.",
    "check the spelling against slurm.conf(5)'s PARTITION CONFIGURATION",
)
def unknown_partition_key(ctx: RuleContext) -> Iterator[Hit]:
    """Each key of a declared partition's `config` and of a group's `partitionConfig` becomes
    `Key=value` on that partition's line of slurm.conf, and Slurm refuses the file over a key a
    partition line cannot take (a node or global option such as `DefMemPerNode` is fine there;
    `MaxTme` is not). The rule checks each against the partition-line keys of every release we
    build, as their own parsers take them, case-insensitively, and suggests the closest. The
    keys the operator writes itself (`PartitionName`, `Nodes`) are SUNK's other rules'.

    Fails:
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc]}
          partitions:
            - name: batch
              nodeSets: [cpu]
              config: {MaxTme: "1-00:00:00"}

    Passes:
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc]}
          partitions:
            - name: batch
              nodeSets: [cpu]
              config: {MaxTime: "1-00:00:00"}
    """
    known = release_options.spellings("partition")
    owned = {k.lower() for k in OWNED_PARTITION_KEYS}
    for path, whose, config in partition_maps(ctx):
        for key in config:
            if key.lower() in known or key.lower() in owned:
                continue
            suggestion = _closest(key, known)
            yield Hit((*path, key), f"{whose}: unknown partition key `{key}`{suggestion}")


@rule(
    "SUNK046",
    "slurm-plugin-not-in-image",
    "warning",
    "A plugin that our images for a Slurm release the image tags name do not carry, though "
    "our images for another release do (a site image may carry it).",
    "use a plugin every image has, or images built with it",
)
def plugin_not_in_image(ctx: RuleContext) -> Iterator[Hit]:
    """Each plugin a plugin key of `slurmConfig` names (`TaskPlugin`, `MpiDefault`,
    `JobContainerType`, `NamespaceType`, …) is checked against the plugins of our images for
    each Slurm release the image tags name (`sunk/slurmconf/slurm_options.json`): Debian
    builds Slurm 26.05 without PMIx, so its images have no `mpi/pmix`, and 24.11 has no
    `namespace/linux`. Slurm fails where it loads a plugin it does not find (`srun`: "MPI:
    Cannot create context for mpi/pmix"). A warning, not an error: an image built elsewhere
    may carry the plugin. Without `MpiDefault`, the renderer writes `MpiDefault=pmix` only
    when every release the images name has it, `none` otherwise, and the rule says so.

    Fails:
        controller:
          image: {repository: opensunk/controller, tag: 0.1.0-slurm26.05}
        accounting:
          image: {repository: opensunk/controller, tag: 0.1.0-slurm26.05}
        slurmConfig:
          MpiDefault: pmi2
          JobContainerType: job_container/tmpfs

    Passes:
        slurmConfig:
          JobContainerType: job_container/tmpfs
    """
    named = slurm_releases(ctx)
    for table, path, _, key, value in configured_options(ctx):
        for plugin in release_options.plugins_named(key, value) if table == "slurm.conf" else ():
            for release in named:
                missing = release_options.missing_plugin(release, plugin)
                if missing:
                    yield Hit(path, f"{missing}; Slurm fails where it loads it")
    if not any(k.lower() == "mpidefault" for k in as_map(ctx.values.get("slurmConfig"))):
        lacking = [r for r in named if release_options.missing_plugin(r, PMIX)]
        if lacking:
            yield Hit(
                ("slurmConfig",),
                f"MpiDefault is rendered `none`, not `pmix`: our Slurm {', '.join(lacking)} "
                "images have no mpi/pmix (Debian builds it without PMIx); `srun --mpi=pmi2` "
                "works there. Set MpiDefault to say which you want",
            )
