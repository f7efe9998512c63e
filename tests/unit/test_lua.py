"""The Lua plugin scripts in the models, the guard and the renderer (sunk.slurmconf.lua)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sunk.models.crds import SlurmClusterSpec
from sunk.models.values import LuaScript, SlurmValues
from sunk.slurmconf import ClusterInputs, Endpoints, RenderError, render_all
from sunk.slurmconf.guard import UnsafeConfigError, check_lua
from sunk.slurmconf.lua import (
    LuaSyntaxError,
    global_functions,
    missing_functions,
    newer_syntax,
    syntax_error,
)

EP = Endpoints("ctl-0", "10.0.0.1", "dbd", "10.0.0.2")
JOB_SUBMIT = """\
function slurm_job_submit(job_desc, part_list, submit_uid)
  if job_desc.time_limit == slurm.NO_VAL then
    slurm.log_user("need a time limit")
    return slurm.ERROR
  end
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end
"""
CLI_FILTER = """\
function slurm_cli_setup_defaults(options, early)
\toptions.comment = "a # b \\"c\\" \\\\ ünï"  -- tabs, #, quotes, backslashes are Lua
\treturn slurm.SUCCESS
end
slurm_cli_pre_submit = function(options, offset) return slurm.SUCCESS end
function slurm_cli_post_submit(offset, job_id, step_id) return slurm.SUCCESS end
"""


def render(**slurm_config):
    spec = SlurmClusterSpec.model_validate({"clusterName": "c", "slurmConfig": slurm_config})
    return render_all(ClusterInputs(spec, (), EP))


def conf_line(rendered, key: str) -> str | None:
    lines = rendered.files["slurm.conf"].splitlines()
    return next((line for line in lines if line.startswith(f"{key}=")), None)


def test_scripts_are_written_verbatim_and_the_plugins_configured():
    out = render(jobSubmitLua={"script": JOB_SUBMIT}, cliFilterLua={"script": CLI_FILTER})
    assert out.files["job_submit.lua"] == JOB_SUBMIT
    assert out.files["cli_filter.lua"] == CLI_FILTER
    assert conf_line(out, "JobSubmitPlugins") == "JobSubmitPlugins=lua"
    assert conf_line(out, "CliFilterPlugins") == "CliFilterPlugins=lua"
    assert "jobSubmitLua" not in out.files["slurm.conf"]


def test_without_scripts_no_plugin_is_configured():
    out = render()
    assert conf_line(out, "JobSubmitPlugins") is None
    assert conf_line(out, "CliFilterPlugins") is None
    assert not any(name.endswith(".lua") for name in out.files)


def test_a_users_plugins_are_kept_after_lua():
    out = render(jobSubmitLua={"script": JOB_SUBMIT}, JobSubmitPlugins="require_timelimit")
    assert conf_line(out, "JobSubmitPlugins") == "JobSubmitPlugins=lua,require_timelimit"
    # Slurm reads keys in any case; ours and the user's merge all the same.
    out = render(cliFilterLua={"script": CLI_FILTER}, clifilterplugins=["lua", "syslog"])
    assert conf_line(out, "CliFilterPlugins") == "CliFilterPlugins=lua,syslog"


def test_a_configmap_reference_configures_the_plugin_and_renders_no_file():
    out = render(jobSubmitLua={"configMap": {"name": "site-policy"}})
    assert conf_line(out, "JobSubmitPlugins") == "JobSubmitPlugins=lua"
    assert "job_submit.lua" not in out.files


def test_changing_a_script_keeps_the_config_hash():
    # Both plugins reread their scripts: Pods need not restart (they do when one appears).
    one = render(jobSubmitLua={"script": JOB_SUBMIT}, cliFilterLua={"script": CLI_FILTER})
    two = render(
        jobSubmitLua={"script": JOB_SUBMIT + "-- v2\n"}, cliFilterLua={"script": CLI_FILTER + " "}
    )
    assert one.config_hash == two.config_hash
    assert render().config_hash != one.config_hash


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("x = 1\x00", r"line 1, column 6: the control character '\\x00'"),
        ("x = 1\ny = 2 -- a\rb()", r"line 2, column 11: a carriage return \(CR\)"),
        ("x = 1 -- \x1b[2K", r"line 1, column 10: the control character '\\x1b'"),
        ("x = 1\x7f", r"line 1, column 6: the control character '\\x7f'"),
        ("\n\nx = 1 -- \u202e", r"line 3, column 10: the bidirectional control U\+202E"),
        ("x = 1 -- \u2066", r"U\+2066"),
        ("  \n\t\n", "script is empty"),
        ("x = 1\n" * 50_000, "longer than 262144 characters"),
    ],
)
def test_the_guard_refuses_what_hides_code(text, problem):
    with pytest.raises(UnsafeConfigError, match=problem):
        check_lua(text, "job_submit.lua", "slurmConfig.jobSubmitLua.script")
    # Past the models (a hand-edited object in the operator's memory): the renderer refuses.
    spec = SlurmClusterSpec(clusterName="c")
    script = LuaScript.model_construct(script=text, configMap=None)
    object.__setattr__(spec.slurmConfig, "jobSubmitLua", script)
    with pytest.raises(RenderError, match=r"^job_submit\.lua: slurmConfig\.jobSubmitLua\.script"):
        render_all(ClusterInputs(spec, (), EP))


def test_the_guard_lets_lua_through():
    assert check_lua(CLI_FILTER, "cli_filter.lua", "k") == CLI_FILTER


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("x = 1\nif x then\n", r"line 3, column 1: mismatched input '<EOF>'"),
        ("x = 'unterminated\n", "line 1, column 5: token recognition error"),
        ("local t = {1,,2}\n", "line 1, column 14"),
        ("function f()\n  return 7 // 2\nend\n", r"line 2, column 12: `//` .* is not Lua 5\.1"),
        ("local a <const> = 1\n", r"line 1, column 9: a `<const>`/`<close>` \(Lua 5\.4\)"),
    ],
)
def test_the_renderer_refuses_a_script_slurm_would_not_load(text, where):
    with pytest.raises(
        RenderError, match=rf"^cli_filter\.lua: slurmConfig\.cliFilterLua\.script: {where}"
    ):
        render(cliFilterLua={"script": text})


@pytest.mark.parametrize(
    "text",
    [
        "local s = [[\nlong\n]] .. [==[ ]] ]==]\n",
        "#!/usr/bin/lua\nx = 0x1F + 1e3 + .5\n",
        "for k, v in pairs({a = 1, [2] = 'b'; 'c'}) do print(k, v) end\n",
        "local function f(...) return select('#', ...) end\nx = #t .. 'x'\n",
        "repeat local z = 1 until z\nwhile true do break end\n",
        "a.b.c:d 'x'\nf{1}\nif a ~= b and not c or d then elseif e then else end\n",
        "x = a < b and c > d\nlocal y = -2 ^ 2 % 3\n",
    ],
)
def test_lua_51_scripts_pass(text):
    assert syntax_error(text) is None
    assert newer_syntax(text) is None


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("goto done\n::done::\n", "`goto` (Lua 5.2)"),
        ("do ::top:: end\n", "a `::label::` (Lua 5.2)"),
        ("x = a & b\n", "`&`"),
        ("x = a | b\n", "`|`"),
        ("x = ~a\n", "`~`"),
        ("x = a << 1\n", "`<<`"),
        ("x = a >> 1\n", "`>>`"),
        ("local a, b <close> = f()\n", "a `<const>`/`<close>` (Lua 5.4)"),
    ],
)
def test_newer_syntax_is_named(text, what):
    assert syntax_error(text) is None
    found = newer_syntax(text)
    assert found is not None and found.message.startswith(what)


def test_nesting_is_bounded_as_in_lua_51():
    # Lua 5.1 stops at 200 syntax levels; deeper input is refused from the tokens alone, so
    # a hostile script costs the parser nothing.
    found = syntax_error("x = " + "(" * 100_000 + "1" + ")" * 100_000)
    assert found == LuaSyntaxError(1, 205, "nested more than 200 levels deep (Lua 5.1's limit)")
    assert syntax_error("if a then " * 201 + "end " * 201).column == 2001
    assert syntax_error("x = " + "f({(" * 66 + "1" + ")})" * 66) is None
    assert syntax_error("f(" * 200 + ")" * 200) is None


def test_global_functions_from_the_top_level():
    text = """\
local M = {}
function slurm_job_submit(a, b, c) return 0 end
slurm_job_modify = function() local inner = 1 end
local function helper() end
function M.method() end
a, b = 1, 2
local c, d = 3, 4
t.x = 5
for i = 1, 3 do inblock = 1 end
if x then inif = 2 end
e = { field = 1 }
g(h == 1)
"""
    assert global_functions(text) == {"slurm_job_submit", "slurm_job_modify", "a", "b", "e"}


def test_required_functions():
    assert {"slurm_job_submit", "slurm_job_modify"} <= global_functions(JOB_SUBMIT)
    assert missing_functions("job_submit.lua", JOB_SUBMIT) == []
    assert missing_functions("cli_filter.lua", CLI_FILTER) == []
    assert missing_functions("job_submit.lua", "local function slurm_job_submit() end") == [
        "slurm_job_submit",
        "slurm_job_modify",
    ]


def test_the_models_take_a_script_or_a_reference_not_both():
    values = SlurmValues.model_validate(
        {
            "slurmConfig": {
                "jobSubmitLua": {"script": JOB_SUBMIT},
                "cliFilterLua": {"configMap": {"name": "site-lua", "key": "cli.lua"}},
            }
        }
    )
    assert sorted(values.slurmConfig.lua()) == ["cli_filter.lua", "job_submit.lua"]
    assert values.slurmConfig.model_extra == {}
    with pytest.raises(ValidationError, match="set either script or configMap, not both"):
        SlurmValues.model_validate(
            {"slurmConfig": {"jobSubmitLua": {"script": "x=1", "configMap": {"name": "a"}}}}
        )
    for bad in ({"script": "x\r"}, {"script": ""}, {"configMap": {"name": "Not_DNS"}}):
        with pytest.raises(ValidationError):
            SlurmValues.model_validate({"slurmConfig": {"cliFilterLua": bad}})
    assert SlurmValues.model_validate({"slurmConfig": {"cliFilterLua": {}}}).slurmConfig.lua() == {}
