"""The Lua plugins on real Slurm 24.11, with the scripts of examples/lua-plugins.yaml rendered by
the project's renderer: job_submit.lua in slurmctld, cli_filter.lua in the clients beside
slurm.conf (as on the controller and login Pods) and, through configless, on a compute node."""

from __future__ import annotations

import dataclasses
import re
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from sunk.chartio.helm import Release, template
from sunk.chartio.manifests import parse_release
from sunk.devenv.slurm_runtime import SlurmRuntime
from sunk.slurmconf import Endpoints, Rendered, render_all
from sunk.slurmconf.lua import newer_syntax, syntax_error

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
EXAMPLE = REPO / "examples" / "lua-plugins.yaml"
NODE = "cpu-000-001"
COMMENT = "via-cli-filter"  # what the example's cli_filter.lua sets
REFUSAL = "site policy: every job needs a time limit"  # what its job_submit.lua tells the user
CACHE = f"/var/spool/slurmd/{NODE}/conf-cache"  # SlurmdSpoolDir=/var/spool/slurmd/%n


@pytest.fixture(scope="module")
def booted(slurm_rootfs_path, helm, tmp_path_factory) -> Iterator[tuple[SlurmRuntime, Rendered]]:
    lua = yaml.safe_load(EXAMPLE.read_text())["slurmConfig"]
    layer = tmp_path_factory.mktemp("lua") / "lua.yaml"
    # The lock hook needs the operator: the prolog would find none and run the job unlocked.
    layer.write_text(yaml.safe_dump({"slurmConfig": lua, "syncer": {"nodeLocking": False}}))
    rt = SlurmRuntime(slurm_rootfs_path)
    try:
        release = parse_release(template(Release(), [DATA / "values-two-groups.yaml", layer]))
        endpoints = Endpoints(
            controller_host=rt.controller_host,
            controller_addr=rt.controller_addr,
            dbd_host=rt.accounting_host,
            dbd_addr=rt.accounting_addr,
            storage_host=rt.storage_host,
        )
        inputs = dataclasses.replace(
            release.cluster_inputs("tenant-slurm"), endpoints=endpoints, db_password="pw"
        )
        rendered = render_all(inputs)
        rt.start(rendered.files, munge_key=secrets.token_bytes(128))
        rt.add_node(NODE, rendered.registrations["cpu"])
        rt.wait_nodes_idle([NODE], timeout=180)
        yield rt, rendered
    finally:
        rt.close()


def submit(rt: SlurmRuntime, *args: str, node: str | None = None):
    return rt.run("sbatch", "-p", "cpu", "--parsable", *args, node=node)


def job_field(rt: SlurmRuntime, job: str, field: str) -> str:
    shown = rt.run("scontrol", "-o", "show", "job", job, check=True).stdout
    match = re.search(rf"\b{field}=(\S*)", shown)
    assert match, shown
    return match.group(1)


def wait_for(probe, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def nested_job(rt: SlurmRuntime) -> str:
    """A batch job that runs `sbatch` on the compute node; returns the inner job's id."""
    inner = "sbatch -p cpu --parsable --time=1 --wrap true"
    outer = submit(rt, "--time=2", "--output=/tmp/outer-%j.out", "--wrap", inner)
    assert outer.returncode == 0, outer.stderr
    job = outer.stdout.strip().split(";")[0]
    assert rt.wait_job(job, timeout=300) == "COMPLETED", rt.read_file(f"/tmp/outer-{job}.out")
    inner_id = rt.read_file(f"/tmp/outer-{job}.out").strip().split(";")[0]
    assert inner_id.isdigit(), inner_id
    assert job_field(rt, inner_id, "AllocNode:Sid").startswith(f"{NODE}:")
    return inner_id


def test_the_renderer_sets_the_plugins_and_writes_the_scripts(booted):
    rt, rendered = booted
    conf = rendered.files["slurm.conf"]
    assert "JobSubmitPlugins=lua\n" in conf and "CliFilterPlugins=lua\n" in conf
    shown = rt.run("scontrol", "show", "config", check=True).stdout
    assert re.search(r"JobSubmitPlugins\s+=\s+lua", shown)
    assert re.search(r"CliFilterPlugins\s+=\s+lua", shown)
    example = yaml.safe_load(EXAMPLE.read_text())["slurmConfig"]
    assert rendered.files["job_submit.lua"] == example["jobSubmitLua"]["script"]
    assert rendered.files["cli_filter.lua"] == example["cliFilterLua"]["script"]


def test_job_without_a_time_limit_fails_with_the_plugins_message(booted):
    rt, _ = booted
    refused = submit(rt, "--wrap", "true")
    assert refused.returncode != 0
    assert f"sbatch: error: {REFUSAL}" in refused.stderr


def test_job_with_a_time_limit_runs_and_carries_the_cli_filter_default(booted):
    rt, _ = booted
    ran = submit(rt, "--time=1", "--wrap", "true")
    assert ran.returncode == 0, ran.stderr
    job = ran.stdout.strip().split(";")[0]
    assert rt.wait_job(job) == "COMPLETED"
    assert job_field(rt, job, "Comment") == COMMENT
    assert job_field(rt, job, "TimeLimit") == "00:01:00"
    # A user's own option still wins over the filter's default.
    own = submit(rt, "--time=1", "--comment=mine", "--hold", "--wrap", "true")
    job = own.stdout.strip().split(";")[0]
    assert job_field(rt, job, "Comment") == "mine"
    rt.run("scancel", job, check=True)


def test_a_compute_node_gets_cli_filter_lua_from_slurmctld(booted):
    rt, rendered = booted
    # Configless: slurmd fetched the script with slurm.conf, and jobs' clients read it there.
    assert rt.read_file(f"{CACHE}/cli_filter.lua") == rendered.files["cli_filter.lua"]
    assert not Path(rt.root, CACHE.lstrip("/"), "job_submit.lua").exists()
    assert job_field(rt, nested_job(rt), "Comment") == COMMENT


def test_changed_scripts_apply_without_a_restart(booted):
    rt, rendered = booted
    job_submit = rendered.files["job_submit.lua"]
    stricter = job_submit.replace(
        "  return slurm.SUCCESS\nend",
        '  if job_desc.name == "forbidden" then\n'
        '    slurm.log_user("site policy: not that name")\n'
        "    return slurm.ERROR\n  end\n  return slurm.SUCCESS\nend",
        1,
    )
    assert stricter != job_submit and syntax_error(stricter) is None
    try:
        time.sleep(1.1)  # job_submit/lua reloads on a newer mtime (whole seconds)
        rt.write_files({"job_submit.lua": stricter})
        refused = submit(rt, "--time=1", "-J", "forbidden", "--wrap", "true")
        assert "sbatch: error: site policy: not that name" in refused.stderr

        # Lua 5.1 (Debian's Slurm) refuses `//`: a running slurmctld keeps the script it has
        # (a restart would not survive it: test_rejections), so the renderer refuses it.
        newer = stricter.replace('job_desc.name == "forbidden"', "7 // 2 == 3")
        assert syntax_error(newer) is None and newer_syntax(newer) is not None
        time.sleep(1.1)
        rt.write_files({"job_submit.lua": newer})
        refused = submit(rt, "--time=1", "-J", "forbidden", "--wrap", "true")
        assert "sbatch: error: site policy: not that name" in refused.stderr
        assert "unexpected symbol near '/', using previous script" in rt.logs(tail=500)
        rt.write_files({"job_submit.lua": stricter})

        # cli_filter.lua: clients beside /etc/slurm read the new one at once; a compute node
        # keeps slurmctld's copy until `scontrol reconfigure` (the controller Pod's loop).
        newer_filter = rendered.files["cli_filter.lua"].replace(COMMENT, "filter-v2")
        rt.write_files({"cli_filter.lua": newer_filter})
        here = submit(rt, "--time=1", "--hold", "--wrap", "true").stdout.strip()
        assert job_field(rt, here, "Comment") == "filter-v2"
        rt.run("scancel", here, check=True)
        assert job_field(rt, nested_job(rt), "Comment") == COMMENT
        rt.reconfigure()
        rt.wait_nodes_idle([NODE], timeout=180)
        wait_for(lambda: rt.read_file(f"{CACHE}/cli_filter.lua") == newer_filter, "the new cache")
        assert job_field(rt, nested_job(rt), "Comment") == "filter-v2"
    finally:
        rt.write_files(
            {"job_submit.lua": job_submit, "cli_filter.lua": rendered.files["cli_filter.lua"]}
        )
