"""The Lua plugin scripts through the real chart and the operator's builders: what lands in which
ConfigMap, and which Pods mount which script beside slurm.conf."""

from __future__ import annotations

from pathlib import Path

import yaml

from sunk.chartio.helm import Release, template
from sunk.chartio.manifests import parse_release
from sunk.operator.cluster.base import ClusterContext
from sunk.operator.cluster.objects import desired_objects
from sunk.slurmconf import render_all
from tests.chart.conftest import write_values

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "lua-plugins.yaml"
NS = "tenant-slurm"


def built(helm: str, *files: Path) -> tuple[dict, dict[str, dict]]:
    """(the SlurmCluster CR, the operator's objects by kind/name) for these values."""
    release = parse_release(template(Release(namespace=NS, helm=helm), list(files)))
    (cluster,) = release.of_kind("SlurmCluster")
    inputs = release.cluster_inputs(NS)
    rendered = render_all(inputs)
    ctx = ClusterContext(
        cluster["metadata"]["name"], NS, "uid", inputs.cluster, rendered, "m", "j", None
    )
    objects = {f"{o['kind']}/{o['metadata']['name']}": o for o in desired_objects(ctx)}
    return cluster, objects


def pod(objects: dict[str, dict], key: str) -> dict:
    return objects[key]["spec"]["template"]["spec"]


def etc_slurm(spec: dict, container: str) -> list[dict]:
    """The projected sources mounted at /etc/slurm in ``container``."""
    (main,) = [c for c in spec["containers"] if c["name"] == container]
    (mount,) = [m for m in main["volumeMounts"] if m["mountPath"] == "/etc/slurm"]
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    return volume["projected"]["sources"]


def lua_items(sources: list[dict]) -> dict[str, tuple[str, str]]:
    """path under /etc/slurm → (ConfigMap, key), for the *.lua files."""
    return {
        item["path"]: (src["configMap"]["name"], item["key"])
        for src in sources
        if "configMap" in src
        for item in src["configMap"].get("items", [])
        if item["path"].endswith(".lua")
    }


def test_inline_scripts_land_in_their_configmap_and_beside_slurm_conf(helm):
    cluster, objects = built(helm, EXAMPLE)
    scripts = yaml.safe_load(EXAMPLE.read_text())["slurmConfig"]
    # The chart passes the values through to the SlurmCluster unchanged.
    assert cluster["spec"]["slurmConfig"]["jobSubmitLua"] == scripts["jobSubmitLua"]
    assert cluster["spec"]["slurmConfig"]["cliFilterLua"] == scripts["cliFilterLua"]

    lua = objects["ConfigMap/lua-lua"]
    assert lua["data"] == {
        "job_submit.lua": scripts["jobSubmitLua"]["script"],
        "cli_filter.lua": scripts["cliFilterLua"]["script"],
    }
    assert lua["metadata"]["ownerReferences"][0]["kind"] == "SlurmCluster"
    config = objects["ConfigMap/lua-slurm-config"]["data"]
    assert not any(name.endswith(".lua") for name in config)
    assert "JobSubmitPlugins=lua\n" in config["slurm.conf"]
    assert "CliFilterPlugins=lua\n" in config["slurm.conf"]

    controller = pod(objects, "StatefulSet/lua-controller")
    # slurmctld reads job_submit.lua and serves cli_filter.lua to configless slurmds.
    assert lua_items(etc_slurm(controller, "slurmctld")) == {
        "job_submit.lua": ("lua-lua", "job_submit.lua"),
        "cli_filter.lua": ("lua-lua", "cli_filter.lua"),
    }
    # sbatch/srun/salloc on the login Pods: cli_filter.lua only, policy stays with slurmctld.
    login = pod(objects, "StatefulSet/lua-login")
    assert lua_items(etc_slurm(login, "sshd")) == {"cli_filter.lua": ("lua-lua", "cli_filter.lua")}
    for key, container in (
        ("Deployment/lua-rest", "slurmrestd"),
        ("Deployment/lua-accounting", "slurmdbd"),
    ):
        assert lua_items(etc_slurm(pod(objects, key), container)) == {}
    # A changed cli_filter.lua reaches the Pods in place, and the reconfigure loop pushes it on
    # to the slurmds; job_submit.lua is reread by the plugin (no restart that could fail).
    (loop,) = [c for c in controller["containers"] if c["name"] == "reconfigure"]
    assert "/etc/slurm/cli_filter.lua" in loop["args"][-1]
    assert "job_submit" not in loop["args"][-1]


def test_scripts_change_without_restarting_the_pods(helm, tmp_path):
    _, before = built(helm, EXAMPLE)
    changed = yaml.safe_load(EXAMPLE.read_text())
    changed["slurmConfig"]["cliFilterLua"]["script"] += "-- changed\n"
    _, after = built(helm, EXAMPLE, write_values(tmp_path, yaml.safe_dump(changed)))
    assert after["ConfigMap/lua-lua"]["data"] != before["ConfigMap/lua-lua"]["data"]
    for key in ("StatefulSet/lua-controller", "StatefulSet/lua-login"):
        assert after[key]["spec"]["template"] == before[key]["spec"]["template"], key


def test_configmap_references_are_mounted_under_the_plugins_file_names(helm, tmp_path):
    refs = {
        "slurmConfig": {
            "jobSubmitLua": {"configMap": {"name": "site-policy", "key": "submit.lua"}},
            "cliFilterLua": {"configMap": {"name": "site-policy"}},
        }
    }
    base = tmp_path / "base.yaml"
    base.write_text("clusterName: refs\n")
    _, objects = built(helm, base, write_values(tmp_path, yaml.safe_dump(refs)))
    assert "ConfigMap/refs-lua" not in objects  # nothing inline to hold
    conf = objects["ConfigMap/refs-slurm-config"]["data"]["slurm.conf"]
    assert "JobSubmitPlugins=lua\n" in conf and "CliFilterPlugins=lua\n" in conf
    controller = pod(objects, "StatefulSet/refs-controller")
    assert lua_items(etc_slurm(controller, "slurmctld")) == {
        "job_submit.lua": ("site-policy", "submit.lua"),
        "cli_filter.lua": ("site-policy", "cli_filter.lua"),
    }
    login = pod(objects, "StatefulSet/refs-login")
    assert lua_items(etc_slurm(login, "sshd")) == {
        "cli_filter.lua": ("site-policy", "cli_filter.lua")
    }


def test_no_scripts_no_plugins(helm):
    _, objects = built(helm, REPO / "examples" / "minimal-cpu.yaml")
    assert not any(key.endswith("-lua") for key in objects)
    conf = objects["ConfigMap/minimal-slurm-config"]["data"]["slurm.conf"]
    assert "JobSubmitPlugins" not in conf and "CliFilterPlugins" not in conf


def test_the_readme_shows_the_tested_example():
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Site policy in Lua", 1)[1]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert yaml.safe_load(block) == {
        "slurmConfig": yaml.safe_load(EXAMPLE.read_text())["slurmConfig"]
    }
