"""slurm.conf rules: `slurmConfig` keys Slurm does not know or the operator writes, values
Slurm would not parse (in `slurmConfig` and partitions), and owned keys hidden in free text
(`extraConfig`, raw partition lines)."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from functools import cache
from importlib import resources

from sunk.slurmconf import option_types
from sunk.slurmconf.format import value_text
from sunk.slurmconf.slurm_conf import FREE_TEXT, NOT_SLURM_KEYS, OWNED_KEYS, free_text_problems
from sunk.validate.rules.context import NODES, PARTS, RuleContext, as_map, get
from sunk.validate.rules.partitions import declared_partitions, raw_partitions
from sunk.validate.rules.registry import Hit, rule


@cache
def slurm_conf_keys() -> dict[str, str]:
    """lower-case key → canonical spelling, from the packaged list for Slurm 24.11."""
    text = resources.files("sunk.validate.rules").joinpath("slurm_conf_keys.txt").read_text()
    keys = [line.strip() for line in text.splitlines()]
    return {k.lower(): k for k in keys if k and not k.startswith("#")}


@rule(
    "SUNK011",
    "unknown-slurm-conf-key",
    "error",
    "A slurmConfig key that slurm.conf (Slurm 24.11) does not know; slurmctld would not start.",
    "check the spelling against slurm.conf(5), or put free text in slurmConfig.extraConfig",
)
def unknown_slurm_key(ctx: RuleContext) -> Iterator[Hit]:
    """Every key of `slurmConfig` (but `extraConfig`, `cgroupConfig`, `mpiConfig`,
    `jobSubmitLua` and `cliFilterLua`) becomes a `Key=value` line of slurm.conf, and slurmctld
    does not start on a key it does not know. The rule checks each against the keys of
    slurm.conf(5) for Slurm 24.11 (`rules/slurm_conf_keys.txt`), case-insensitively as Slurm
    reads them, and suggests the closest known key.

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
        close = difflib.get_close_matches(key.lower(), list(known), n=1, cutoff=0.75)
        extra = f" (did you mean `{known[close[0]]}`?)" if close else ""
        yield Hit(("slurmConfig", key), f"unknown slurm.conf key `{key}`{extra}")


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
    for key, value in as_map(ctx.values.get("slurmConfig")).items():
        if key in NOT_SLURM_KEYS or value is None:
            continue
        problem = option_types.value_problem(option_types.SLURM_CONF, key, value_text(value))
        if problem:
            yield Hit(("slurmConfig", key), problem)
    partition = option_types.PARTITION
    # declared partitions' `config` and groups' `partitionConfig`: (path, whose, the map)
    maps = [
        ((*PARTS, index, "config"), f"partition `{part.get('name')}`", part.get("config"))
        for index, part in declared_partitions(ctx)
    ]
    maps += [
        ((*NODES, name, "partitionConfig"), f"group `{name}`", group.get("partitionConfig"))
        for name, group in ctx.groups.items()
    ]
    for path, whose, config in maps:
        for key, value in as_map(config).items():
            problem = option_types.value_problem(partition, key, value_text(value))
            if problem:
                yield Hit((*path, key), f"{whose}: {problem}")
    for name, pairs in raw_partitions(ctx):
        for key, value in pairs.items():
            problem = option_types.value_problem(partition, key, value)
            if problem:
                yield Hit(PARTS, f"partition `{name}`: {problem}")
