"""Rules on the Lua plugin scripts (`slurmConfig.jobSubmitLua`, `slurmConfig.cliFilterLua`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sunk.slurmconf.guard import UnsafeConfigError, check_lua
from sunk.slurmconf.lua import (
    LUA_RUNTIME,
    REQUIRED,
    missing_functions,
    newer_syntax,
    syntax_error,
)
from sunk.validate.paths import dotted
from sunk.validate.rules.context import RuleContext, as_list, as_map, get
from sunk.validate.rules.registry import Hit, rule

# File → (its key under slurmConfig, the slurm.conf key that loads its plugin).
SCRIPTS = {
    "job_submit.lua": ("jobSubmitLua", "JobSubmitPlugins"),
    "cli_filter.lua": ("cliFilterLua", "CliFilterPlugins"),
}


def _scripts(ctx: RuleContext) -> Iterator[tuple[str, tuple[Any, ...], str]]:
    """(file name, key path, text) of every script the values carry: inline, or the data of a
    ConfigMap in extraObjects that a `configMap` reference names."""
    config = as_map(ctx.values.get("slurmConfig"))
    for name, (key, _) in SCRIPTS.items():
        entry = as_map(config.get(key))
        script = entry.get("script")
        if isinstance(script, str):
            yield name, ("slurmConfig", key, "script"), script
            continue
        ref = as_map(entry.get("configMap"))
        wanted = ref.get("name")
        data_key = ref.get("key") or name
        if not isinstance(wanted, str):
            continue
        for index, obj in enumerate(as_list(ctx.values.get("extraObjects"))):
            obj = as_map(obj)
            if obj.get("kind") != "ConfigMap" or get(obj, "metadata", "name") != wanted:
                continue
            text = get(obj, "data", data_key)
            if isinstance(text, str):
                yield name, ("extraObjects", index, "data", data_key), text


@rule(
    "SUNK029",
    "lua-script-invalid",
    "error",
    "A Lua plugin script (slurmConfig.jobSubmitLua / cliFilterLua, or the extraObjects "
    "ConfigMap one names) that does not parse, or holds characters the renderer refuses: "
    "slurmctld would not load job_submit.lua, and every sbatch, srun and salloc would fail "
    "with a broken cli_filter.lua.",
    "fix the script at the line shown",
)
def lua_script_invalid(ctx: RuleContext) -> Iterator[Hit]:
    """A Lua plugin script, inline (`slurmConfig.jobSubmitLua.script`, `cliFilterLua.script`) or
    in the `extraObjects` ConfigMap its `configMap` reference names, must parse (luaparser's Lua
    grammar, through `sunk.slurmconf.lua`) and pass the renderer's guard on the characters a
    script may hold (`sunk.slurmconf.guard.check_lua`). slurmctld does not load a broken
    job_submit.lua, and a broken cli_filter.lua fails every sbatch, srun and salloc. The finding
    gives the script's line and column, and for an inline block scalar, the values file's line.

    Fails:
        slurmConfig:
          jobSubmitLua:
            script: |
              function slurm_job_submit(job_desc, part_list, submit_uid)
                return slurm.SUCCESS
              function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
                return slurm.SUCCESS
              end

    Passes:
        slurmConfig:
          jobSubmitLua:
            script: |
              function slurm_job_submit(job_desc, part_list, submit_uid)
                return slurm.SUCCESS
              end
              function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
                return slurm.SUCCESS
              end
    """
    for name, path, text in _scripts(ctx):
        try:
            check_lua(text, name, dotted(path))
        except UnsafeConfigError as exc:
            yield Hit(path, f"{_what(name, path)}: {exc.problem}", text_line=_line_of(exc.problem))
            continue
        error = syntax_error(text)
        if error is not None:
            yield Hit(
                path,
                f"{_what(name, path)}, line {error.line}, column {error.column}: {error.message}",
                text_line=error.line,
            )


def _what(name: str, path: tuple[Any, ...]) -> str:
    """`job_submit.lua (slurmConfig.jobSubmitLua.script)`: the text output shows no key path."""
    return f"{name} ({dotted(path)})"


@rule(
    "SUNK030",
    "lua-newer-than-runtime",
    "error",
    f"A Lua plugin script using syntax Lua {LUA_RUNTIME} refuses (`goto`, `::labels::`, `//`, "
    f"bitwise operators, `<const>`/`<close>`): Debian's Slurm 24.11, in our images, embeds "
    f"Lua {LUA_RUNTIME}, so the script would not load.",
    f"write it in Lua {LUA_RUNTIME} (e.g. math.floor(a / b) for a // b)",
)
def lua_newer_than_runtime(ctx: RuleContext) -> Iterator[Hit]:
    """Debian's Slurm 24.11, in our images, embeds Lua 5.1, which refuses syntax added in later
    versions: `goto` and `::labels::` (5.2), integer division `//` and the bitwise operators
    (5.3), and `<const>`/`<close>` (5.4). A script that parses as newer Lua but uses any of them
    would not load. A script SUNK029 already reports is left to it.

    Fails:
        slurmConfig:
          jobSubmitLua:
            script: |
              function slurm_job_submit(job_desc, part_list, submit_uid)
                job_desc.comment = tostring(job_desc.min_cpus // 2)
                return slurm.SUCCESS
              end
              function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
                return slurm.SUCCESS
              end

    Passes:
        slurmConfig:
          jobSubmitLua:
            script: |
              function slurm_job_submit(job_desc, part_list, submit_uid)
                job_desc.comment = tostring(math.floor(job_desc.min_cpus / 2))
                return slurm.SUCCESS
              end
              function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
                return slurm.SUCCESS
              end
    """
    for name, path, text in _scripts(ctx):
        if _invalid(name, text):
            continue  # SUNK029 says so
        newer = newer_syntax(text)
        if newer is not None:
            yield Hit(
                path,
                f"{_what(name, path)}, line {newer.line}, column {newer.column}: "
                f"{newer.message} is not Lua {LUA_RUNTIME}",
                text_line=newer.line,
            )


def _invalid(name: str, text: str) -> bool:
    try:
        check_lua(text, name, name)
    except UnsafeConfigError:
        return True
    return syntax_error(text) is not None


def _line_of(problem: str) -> int | None:
    """The line check_lua names (`line N, column M: …`)."""
    if problem.startswith("line "):
        number = problem[5:].split(",", 1)[0]
        return int(number) if number.isdigit() else None
    return None


@rule(
    "SUNK031",
    "lua-missing-function",
    "warning",
    "A Lua plugin script whose top level does not define a function Slurm requires "
    "(job_submit.lua: slurm_job_submit and slurm_job_modify; cli_filter.lua: "
    "slurm_cli_setup_defaults, slurm_cli_pre_submit and slurm_cli_post_submit): Slurm refuses "
    "to load it.",
    "define the function, even as a stub returning slurm.SUCCESS",
)
def lua_missing_function(ctx: RuleContext) -> Iterator[Hit]:
    """After loading a script, Slurm looks up the functions its plugin calls, and refuses a script
    whose top level does not define each of them: slurm_job_submit and slurm_job_modify in
    job_submit.lua; slurm_cli_setup_defaults, slurm_cli_pre_submit and slurm_cli_post_submit in
    cli_filter.lua. A stub that returns slurm.SUCCESS is enough. A script SUNK029 already reports
    is left to it.

    Fails:
        slurmConfig:
          jobSubmitLua:
            script: |
              function slurm_job_submit(job_desc, part_list, submit_uid)
                return slurm.SUCCESS
              end

    Passes:
        slurmConfig:
          jobSubmitLua:
            script: |
              function slurm_job_submit(job_desc, part_list, submit_uid)
                return slurm.SUCCESS
              end
              function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
                return slurm.SUCCESS
              end
    """
    for name, path, text in _scripts(ctx):
        if _invalid(name, text):
            continue  # SUNK029 says so
        missing = missing_functions(name, text)
        if missing:
            yield Hit(
                path,
                f"{_what(name, path)} does not define {', '.join(missing)} (Slurm requires "
                f"{', '.join(REQUIRED[name])})",
            )


def _names_lua(value: Any) -> bool:
    items = value if isinstance(value, list) else str(value).split(",")
    return any(
        str(item).strip().lower() in ("lua", "job_submit/lua", "cli_filter/lua") for item in items
    )


@rule(
    "SUNK032",
    "lua-plugin-without-script",
    "error",
    "slurmConfig sets JobSubmitPlugins or CliFilterPlugins to lua without the script "
    "(slurmConfig.jobSubmitLua / cliFilterLua): nothing would mount job_submit.lua or "
    "cli_filter.lua, and slurmctld or the clients would fail to load the plugin.",
    "set slurmConfig.jobSubmitLua / cliFilterLua (the operator then adds the plugin itself)",
)
def lua_plugin_without_script(ctx: RuleContext) -> Iterator[Hit]:
    """`JobSubmitPlugins` or `CliFilterPlugins` (any case) naming `lua` (or `job_submit/lua`,
    `cli_filter/lua`) in `slurmConfig` loads the Lua plugin, which reads job_submit.lua or
    cli_filter.lua; the operator mounts those only from `slurmConfig.jobSubmitLua` or
    `cliFilterLua` (a script or a ConfigMap reference), and adds the plugin itself when one is
    set. Without it, slurmctld, or the clients, would fail to load the plugin.

    Fails:
        slurmConfig:
          JobSubmitPlugins: lua

    Passes:
        slurmConfig:
          jobSubmitLua:
            script: |
              function slurm_job_submit(job_desc, part_list, submit_uid)
                return slurm.SUCCESS
              end
              function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
                return slurm.SUCCESS
              end
    """
    config = as_map(ctx.values.get("slurmConfig"))
    for name, (key, plugins) in SCRIPTS.items():
        entry = as_map(config.get(key))
        if entry.get("script") or entry.get("configMap"):
            continue
        for setting, value in config.items():
            if setting.lower() == plugins.lower() and _names_lua(value):
                yield Hit(
                    ("slurmConfig", setting),
                    f"`{setting}` loads the Lua plugin but slurmConfig.{key} is not set: "
                    f"there is no {name}",
                )
