"""Rules on containers in jobs (`compute.pyxis`: the container plugin's options) and on what
the plugin does besides (`compute.mpi.env`), or what breaks inside its containers (a
TaskProlog)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sunk.models.values import MPI_ENV_DEFAULTS, PYXIS_OPTIONS
from sunk.validate.rules.context import RuleContext, as_list, as_map, get
from sunk.validate.rules.registry import Hit, rule


def _containers_on(ctx: RuleContext) -> bool:
    """`compute.pyxis.enabled`, true by default (as SUNK's values have it)."""
    return get(ctx.values, "compute", "pyxis", "enabled", default=True) is not False


@rule(
    "SUNK037",
    "unknown-container-option",
    "warning",
    "A compute.pyxis.plugstackOptions word whose key the container plugin does not know: it "
    "refuses unknown options, and steps that load it fail.",
    f"use one of {', '.join(PYXIS_OPTIONS)} (`key=value`), or a slurmd image with a plugin "
    "that knows the option",
)
def unknown_container_option(ctx: RuleContext) -> Iterator[Hit]:
    """`compute.pyxis.plugstackOptions` go verbatim onto the plugstack.conf line that loads the
    container plugin of the opensunk images, which takes Pyxis's option names (runtime_path,
    cache_path, image_cache_size, mount_home, remap_root, writable, container_scope,
    execute_entrypoint, sbatch_support, insecure_registries, credentials) as `key=value` words
    and refuses any other, and with it the job steps. A word whose key is not one of those is
    reported (a warning: a site's own slurmd image may bring a plugin that knows it). Only while
    `compute.pyxis.enabled` is on, as nothing reads the options otherwise.

    Fails:
        compute:
          pyxis:
            enabled: true
            plugstackOptions: [container_scope=job, container_image_save=/tmp]

    Passes:
        compute:
          pyxis:
            enabled: true
            plugstackOptions: [container_scope=global, execute_entrypoint=0]
    """
    if not _containers_on(ctx):
        return
    options = as_list(get(ctx.values, "compute", "pyxis", "plugstackOptions"))
    for index, word in enumerate(options):
        if not isinstance(word, str):
            continue
        key = word.split("=", 1)[0]
        if key not in PYXIS_OPTIONS:
            yield Hit(
                ("compute", "pyxis", "plugstackOptions", index),
                f"the container plugin does not know the option `{key}` (it would refuse "
                f"`{word}`, and with it every job step)",
            )


@rule(
    "SUNK038",
    "mpi-env-without-containers",
    "warning",
    "compute.mpi.env is set while compute.pyxis.enabled is false: the container plugin is what "
    "exports it to job tasks, so nothing sets it.",
    "set compute.pyxis.enabled: true, or export the variables in the job scripts",
)
def mpi_env_without_containers(ctx: RuleContext) -> Iterator[Hit]:
    """`compute.mpi.env` reaches job tasks through the container plugin: its plugstack.conf line
    carries one `env=NAME=VALUE` word per variable, and the plugin exports each in every task of
    every step (container or not) that does not have it. With `compute.pyxis.enabled` false no
    plugin is loaded and nothing sets them. The rule warns about each variable a values file or
    `--set` sets to a value other than the chart's default (the defaults themselves, left as
    they are, are quiet), and not about null or empty ones (they are not set anyway).

    Fails:
        compute:
          pyxis:
            enabled: false
          mpi:
            env:
              OMPI_MCA_pml: ucx

    Passes:
        compute:
          pyxis:
            enabled: true
          mpi:
            env:
              OMPI_MCA_pml: ucx
    """
    if _containers_on(ctx):
        return
    for name, value in as_map(get(ctx.values, "compute", "mpi", "env")).items():
        path = ("compute", "mpi", "env", name)
        if value in (None, "") or not ctx.set_by_user(path):
            continue
        if value == MPI_ENV_DEFAULTS.get(name):
            continue
        yield Hit(
            path,
            f"`{name}` is not set in job tasks: compute.pyxis.enabled is false, and only the "
            "container plugin exports compute.mpi.env",
        )


@rule(
    "SUNK039",
    "task-prolog-with-containers",
    "warning",
    "slurmConfig.TaskProlog is set while compute.pyxis.enabled is on: Slurm 24.11 runs a "
    "TaskProlog inside `srun --container-image` steps through slurmstepd, which the image "
    "lacks, so those steps fail (status 127); jobs on the nodes themselves are fine.",
    "drop the TaskProlog (compute.mpi.env sets MPI variables in every task, containers "
    "included), or keep it knowing that `--container-image` steps fail",
)
def task_prolog_with_containers(ctx: RuleContext) -> Iterator[Hit]:
    """Slurm 24.11 runs a TaskProlog inside the task, through slurmstepd's script launcher (it
    re-executes slurmstepd). In an `srun --container-image` step the container plugin has
    already moved the task into the image's root file system, which has no slurmstepd: the
    TaskProlog fails with status 127 and the step with it. Jobs that run on the nodes
    themselves are not affected. The rule warns about a `slurmConfig.TaskProlog` (in any case,
    as Slurm reads keys) with a value while `compute.pyxis.enabled` is on (the default).

    Fails:
        slurmConfig:
          TaskProlog: /etc/slurm/task_prolog.d/site.sh

    Passes:
        compute:
          pyxis:
            enabled: false
        slurmConfig:
          TaskProlog: /etc/slurm/task_prolog.d/site.sh
    """
    if not _containers_on(ctx):
        return
    for key, value in as_map(ctx.values.get("slurmConfig")).items():
        if key.lower() != "taskprolog" or value in (None, ""):
            continue
        yield Hit(
            ("slurmConfig", key),
            f"`{key}` fails every `--container-image` step (status 127): Slurm runs it inside "
            "the container through slurmstepd, which the image does not have",
        )


CONTAINER_CAPABILITIES = ("SYS_ADMIN", "SYS_CHROOT")


def _missing_capabilities(context: Any) -> list[str]:
    """What a container securityContext lacks for the plugin to set up containers (nothing
    when privileged or adding ALL; capabilities written with or without `CAP_`)."""
    if not isinstance(context, dict) or context.get("privileged") is True:
        return []
    added = {
        str(c).upper().removeprefix("CAP_") for c in as_list(get(context, "capabilities", "add"))
    }
    if "ALL" in added:
        return []
    return [c for c in CONTAINER_CAPABILITIES if c not in added]


@rule(
    "SUNK040",
    "containers-without-sys-admin",
    "warning",
    "A node group replaces the slurmd securityContext with one without SYS_ADMIN or SYS_CHROOT "
    "while containers are on: `srun --container-image` steps on its nodes fail.",
    "add SYS_ADMIN and SYS_CHROOT to securityContext.capabilities.add (or leave "
    "securityContext unset for the operator's default), or turn containers off with "
    "compute.pyxis.enabled: false",
)
def containers_without_sys_admin(ctx: RuleContext) -> Iterator[Hit]:
    """The container plugin gives each task of a `--container-image` step its own mount
    namespace, mounts `/proc`, `/sys`, `/dev`, the home and the user's binds there, and
    `chroot`s into the image (the runtime's default seccomp profile refuses `pivot_root`);
    `--container-remap-root` adds a user namespace. Those need `CAP_SYS_ADMIN` and
    `CAP_SYS_CHROOT` in the slurmd container. The operator's default securityContext for
    slurmd has both; a group's own `securityContext` (or `compute.nodeDefaults.securityContext`)
    replaces the default whole, so one without them (and not privileged) makes every container
    step on that group's nodes fail. Jobs on the nodes themselves
    still run, but slurmd's cgroup plugins need the capability too (the entrypoint says so).

    Fails:
        compute:
          nodes:
            cpu:
              definitions: [cpu-epyc]
              securityContext:
                capabilities: {drop: [ALL], add: [CHOWN, SETUID, SETGID, KILL]}

    Passes:
        compute:
          nodes:
            cpu:
              definitions: [cpu-epyc]
              securityContext:
                capabilities:
                  drop: [ALL]
                  add: [CHOWN, SETUID, SETGID, KILL, SYS_ADMIN, SYS_CHROOT]
    """
    if not _containers_on(ctx):
        return
    for group, spec in ctx.groups.items():
        context = spec.get("securityContext")
        missing = [] if context is None else _missing_capabilities(context)
        if not missing:
            continue
        path = ctx.user_path(
            ("compute", "nodes", group, "securityContext"),
            ("compute", "nodeDefaults", "securityContext"),
        )
        yield Hit(
            path,
            f"group `{group}`: this securityContext lacks {' and '.join(missing)} and is not "
            "privileged, so `srun --container-image` steps on its nodes fail",
        )
