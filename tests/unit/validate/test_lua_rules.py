"""`sunkctl validate` on the Lua plugin scripts: SUNK029–SUNK032, at the script's line in the
values file."""

from __future__ import annotations

from typer.testing import CliRunner

from sunk.cli.main import app
from tests.unit.validate.conftest import at, ids

GOOD_JOB_SUBMIT = """\
      function slurm_job_submit(job_desc, part_list, submit_uid)
        return slurm.SUCCESS
      end
      function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
        return slurm.SUCCESS
      end
"""


def values(script: str, key: str = "jobSubmitLua") -> str:
    return f"slurmConfig:\n  {key}:\n    script: |\n{script}"


def test_a_good_script_is_clean(check):
    assert check(values(GOOD_JOB_SUBMIT)).findings == []


def test_a_syntax_error_points_at_its_line_in_the_values_file(check):
    bad = GOOD_JOB_SUBMIT.replace(
        "        return slurm.SUCCESS\n      end\n      function slurm_job_modify",
        "        if job_desc.time_limit = 0 then\n      end\n      function slurm_job_modify",
        1,
    )
    report = check(values(bad))
    # Line 5 of the file is line 2 of the script: the `=` that should be `==`.
    assert at(report) == {("SUNK029", 5)}
    (finding,) = report.findings
    assert finding.key_path == "slurmConfig.jobSubmitLua.script"
    assert finding.message.startswith(
        "job_submit.lua (slurmConfig.jobSubmitLua.script), line 2, column "
    )


def test_the_cli_prints_file_line_key_path_and_script_line(check, tmp_path):
    script = "      x = 1\n\n      if x then\n"
    (tmp_path / "v.yaml").write_text(values(script, "cliFilterLua"))
    result = CliRunner().invoke(app, ["validate", "--no-render", "v.yaml"])
    assert result.exit_code == 1
    # The script ends on its line 3; the error is at its end (line 4, the values file's 7).
    assert (
        "v.yaml:7  SUNK029  error  cli_filter.lua (slurmConfig.cliFilterLua.script), "
        "line 4, column 1: mismatched input"
    ) in result.stdout


def test_a_quoted_script_points_at_its_key(check):
    report = check('slurmConfig:\n  jobSubmitLua:\n    script: "x = = 1"\n')
    assert at(report) == {("SUNK029", 3)}


def test_hidden_characters_are_refused_at_their_line(check):
    script = "      x = 1\n      y = 2 -- \u202e\n"
    report = check(values(script))
    assert at(report) == {("SUNK029", 5)}
    assert "U+202E" in report.findings[0].message


def test_syntax_lua_51_refuses_is_an_error(check):
    script = GOOD_JOB_SUBMIT.replace("return slurm.SUCCESS", "return 7 // 2", 1)
    report = check(values(script))
    assert at(report) == {("SUNK030", 5)}
    assert "`//` integer division (Lua 5.3) is not Lua 5.1" in report.findings[0].message


def test_a_missing_required_function_is_a_warning(check):
    script = "      function slurm_job_submit(j, p, u) return slurm.SUCCESS end\n"
    report = check(values(script))
    assert ids(report) == {"SUNK031"}
    (finding,) = report.findings
    assert str(finding.severity) == "warning"
    assert "does not define slurm_job_modify" in finding.message
    filter_script = "      function slurm_cli_pre_submit(o, i) return 0 end\n"
    report = check(values(filter_script, "cliFilterLua"))
    assert "slurm_cli_setup_defaults, slurm_cli_post_submit" in report.findings[0].message


def test_a_plugin_without_its_script(check):
    report = check("slurmConfig:\n  JobSubmitPlugins: [require_timelimit, lua]\n")
    assert at(report) == {("SUNK032", 2)}
    report = check("slurmConfig:\n  clifilterplugins: cli_filter/lua\n")
    assert at(report) == {("SUNK032", 2)}
    report = check(
        "slurmConfig:\n  JobSubmitPlugins: lua\n  jobSubmitLua:\n    configMap: {name: p}\n"
    )
    assert report.findings == []


def test_a_referenced_configmap_in_extra_objects_is_checked(check):
    text = (
        "slurmConfig:\n"
        "  cliFilterLua:\n"
        "    configMap: {name: site-lua, key: filter.lua}\n"
        "extraObjects:\n"
        "  - apiVersion: v1\n"
        "    kind: ConfigMap\n"
        "    metadata: {name: site-lua}\n"
        "    data:\n"
        "      filter.lua: |\n"
        "        function slurm_cli_setup_defaults(options, early)\n"
        "          return slurm.SUCCESS\n"
        "        end end\n"
    )
    report = check(text)
    assert at(report) == {("SUNK029", 12)}
    assert report.findings[0].key_path == 'extraObjects[0].data["filter.lua"]'


def test_the_lua_keys_are_not_slurm_conf_keys(check):
    report = check(values(GOOD_JOB_SUBMIT) + "  cliFilterLua: {configMap: {name: x}}\n")
    assert "SUNK011" not in ids(report)
