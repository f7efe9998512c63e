"""Containers in jobs and MPI, as the renderer writes them: plugstack.conf (the container
plugin and its options, `compute.mpi.env` among them as `env=NAME=VALUE` words: the plugin
exports them to every job task), mpi.conf and MpiDefault. No TaskProlog of ours: Slurm 24.11
runs one inside `--container-image` steps, where it fails."""

from __future__ import annotations

import re

import pytest

from sunk.models.crds import SlurmClusterSpec
from sunk.models.values import MPI_ENV_DEFAULTS, MPI_ENV_VALUE
from sunk.slurmconf import ClusterInputs, Endpoints, RenderError, render_all
from sunk.slurmconf.guard import UnsafeConfigError, check_value
from sunk.slurmconf.plugstack import PLUGIN_SO, RUNTIME_PATH, env_options, runtime_path

EP = Endpoints("ctl-0", "10.0.0.1", "dbd", "10.0.0.2")


def render(**spec):
    cluster = SlurmClusterSpec.model_validate({"clusterName": "c", **spec})
    return render_all(ClusterInputs(cluster, (), EP))


def plugin_line(mpi_env=None, **pyxis) -> list[str]:
    compute = {"pyxis": {"enabled": True, **pyxis}}
    if mpi_env is not None:
        compute["mpi"] = {"env": mpi_env}
    text = render(compute=compute).files["plugstack.conf"]
    (line,) = [x for x in text.splitlines() if x and not x.startswith("#")]
    words = line.split(" ")
    assert words[:2] == ["required", PLUGIN_SO]
    return words[2:]


def conf(rendered, name="slurm.conf") -> list[str]:
    return [x for x in rendered.files[name].splitlines() if x and not x.startswith("#")]


# --------------------------------------------------------------------------- plugstack.conf


# compute.mpi.env's defaults as the plugin's words, in name order
DEFAULT_ENV_WORDS = [
    "env=OMPI_MCA_btl=self,vader,tcp",
    "env=OMPI_MCA_btl_tcp_if_include=eth0",
    "env=OMPI_MCA_oob_tcp_if_include=eth0",
    "env=OMPI_MCA_pml=ob1",
]


def test_the_default_line_loads_the_container_plugin():
    text = render().files["plugstack.conf"]  # compute.pyxis.enabled is true by default
    assert (
        f"required {PLUGIN_SO} mount_home=1 remap_root=0 image_cache_size=20G "
        + " ".join(DEFAULT_ENV_WORDS)
        + " container_scope=job"
    ) in text.splitlines()
    assert plugin_line() == [
        "mount_home=1",
        "remap_root=0",
        "image_cache_size=20G",
        *DEFAULT_ENV_WORDS,
        "container_scope=job",
    ]


def test_disabled_there_is_no_plugin_line():
    text = render(compute={"pyxis": {"enabled": False}}).files["plugstack.conf"]
    assert all(x.startswith("#") for x in text.splitlines())
    assert "env=" not in text  # compute.mpi.env is not acted on (validate: SUNK038)


def test_mount_home_and_remap_root_follow_their_values():
    assert plugin_line(mountHome=False, remapRoot=False)[:2] == ["mount_home=0", "remap_root=0"]


@pytest.mark.parametrize(
    ("key", "value", "option"),
    [
        ("ENROOT_DATA_PATH", "/scratch/containers", "runtime_path=/scratch/containers"),
        ("ENROOT_CACHE_PATH", "/scratch/cache", "cache_path=/scratch/cache"),
        ("ENROOT_ROOTFS_WRITABLE", "yes", "writable=1"),
        ("ENROOT_ROOTFS_WRITABLE", "FALSE", "writable=0"),
        ("ENROOT_ROOTFS_WRITABLE", "1", "writable=1"),
        ("ENROOT_MOUNT_HOME", "no", "mount_home=0"),
        ("ENROOT_REMAP_ROOT", "true", "remap_root=1"),
    ],
)
def test_each_mapped_enroot_key_becomes_its_option(key, value, option):
    words = plugin_line(mpi_env={}, enrootConfig={key: value})
    assert words[2] == option  # after mount_home/remap_root, before the size
    assert words[-1] == "container_scope=job"


def test_enroot_mount_home_comes_after_mount_home_so_the_plugin_takes_it():
    words = plugin_line(mountHome=True, enrootConfig={"ENROOT_MOUNT_HOME": "no"})
    assert words.index("mount_home=1") < words.index("mount_home=0")


def test_mapped_keys_keep_one_order_and_other_keys_are_not_written():
    config = {
        "ENROOT_TEMP_PATH": "/enroot",
        "ENROOT_REMAP_ROOT": "no",
        "ENROOT_DATA_PATH": "/data",
    }
    words = plugin_line(mpi_env={}, enrootConfig=config)
    assert words[2:4] == ["runtime_path=/data", "remap_root=0"]
    assert not any("enroot" in w.lower() for w in words)


def test_size_registries_env_then_the_users_options_last():
    words = plugin_line(
        mpi_env={"UCX_TLS": "tcp", "FI_PROVIDER": "tcp;ofi_rxm"},
        imageCacheSize="100G",
        insecureRegistries=["registry.local:5000", "10.0.0.9"],
        plugstackOptions=["container_scope=global", "mount_home=0"],
    )
    assert words == [
        "mount_home=1",
        "remap_root=0",
        "image_cache_size=100G",
        "insecure_registries=registry.local:5000,10.0.0.9",
        "env=FI_PROVIDER=tcp;ofi_rxm",  # in name order
        "env=UCX_TLS=tcp",
        "container_scope=global",
        "mount_home=0",  # verbatim, last: it wins in the plugin
    ]


# --------------------------------------------------------------------------- compute.mpi.env


def test_the_mpi_env_defaults_are_open_mpi_over_tcp():
    spec = SlurmClusterSpec.model_validate({"clusterName": "c"})
    assert spec.compute.mpi.env == MPI_ENV_DEFAULTS
    assert spec.compute.mpi.env is not MPI_ENV_DEFAULTS  # a copy: no spec edits the constant
    assert spec.compute.pyxis.enabled is True


def test_an_override_replaces_its_word_and_adds_new_ones():
    env = {**MPI_ENV_DEFAULTS, "OMPI_MCA_pml": "ucx", "UCX_NET_DEVICES": "mlx5_0:1"}
    words = [w for w in plugin_line(mpi_env=env) if w.startswith("env=")]
    assert words == [
        "env=OMPI_MCA_btl=self,vader,tcp",
        "env=OMPI_MCA_btl_tcp_if_include=eth0",
        "env=OMPI_MCA_oob_tcp_if_include=eth0",
        "env=OMPI_MCA_pml=ucx",
        "env=UCX_NET_DEVICES=mlx5_0:1",
    ]


def test_a_value_may_hold_equals_signs_the_plugin_splits_at_the_first():
    assert env_options({"OMPI_MCA_mca_base_env_list": "A=1;B=2"}) == [
        "env=OMPI_MCA_mca_base_env_list=A=1;B=2"
    ]


@pytest.mark.parametrize("drop", [None, ""])
def test_a_null_or_empty_value_drops_its_word(drop):
    words = plugin_line(mpi_env={**MPI_ENV_DEFAULTS, "OMPI_MCA_pml": drop})
    assert [w for w in words if w.startswith("env=")] == DEFAULT_ENV_WORDS[:3]
    assert not any("OMPI_MCA_pml" in w for w in words)


def test_no_variables_no_env_words():
    assert not any(w.startswith("env=") for w in plugin_line(mpi_env={}))
    nulls = dict.fromkeys(MPI_ENV_DEFAULTS)
    assert not any(w.startswith("env=") for w in plugin_line(mpi_env=nulls))


@pytest.mark.parametrize("value", ["a b", "a\tb", "a\nb", " ", "x\x0by", "x\ry"])
def test_whitespace_in_a_value_is_refused_by_the_model(value):
    with pytest.raises(ValueError, match="compute"):
        SlurmClusterSpec.model_validate(
            {"clusterName": "c", "compute": {"mpi": {"env": {"OMPI_MCA_btl": value}}}}
        )


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("self, tcp", "a space"),
        ("a\tb", "a tab"),
        ("a\nenv=LD_PRELOAD=/x.so", "a line feed"),
        ("tcp#x", "comment"),
        ('"tcp"', '`"`'),
        ("tcp\\", "an escape"),
    ],
)
def test_the_renderer_refuses_a_value_that_is_not_one_word(value, problem):
    spec = SlurmClusterSpec.model_validate({"clusterName": "c"})
    spec.compute.mpi.env["OMPI_MCA_btl"] = value  # past the model
    with pytest.raises(RenderError, match=r"^plugstack.conf: compute.mpi.env.OMPI_MCA_btl: ") as e:
        render_all(ClusterInputs(spec, (), EP))
    assert problem in str(e.value)


def test_the_renderer_refuses_a_name_that_is_not_a_variable():
    spec = SlurmClusterSpec.model_validate({"clusterName": "c"})
    spec.compute.mpi.env["OMPI_MCA_x=y"] = "1"  # past the model
    with pytest.raises(RenderError, match=r"compute.mpi.env.OMPI_MCA_x=y: not a variable name"):
        render_all(ClusterInputs(spec, (), EP))


def test_with_the_plugin_off_the_renderer_reads_no_env():
    spec = SlurmClusterSpec.model_validate(
        {"clusterName": "c", "compute": {"pyxis": {"enabled": False}}}
    )
    spec.compute.mpi.env["OMPI_MCA_btl"] = "a b"  # nothing writes it: nothing to refuse
    assert "env=" not in render_all(ClusterInputs(spec, (), EP)).files["plugstack.conf"]


@pytest.mark.parametrize(
    "value",
    [
        "",
        "ob1",
        "self,vader,tcp",
        "10.0.0.0/8",
        "a=b;c:d",
        "ünïcode",
        " ",
        "a b",
        "a\tb",
        "a\rb",
        "a\x00b",
        "a\x7fb",
        "a#b",
        'a"b',
        "a\\b",
        "x\x1b[2K",
    ],
)
def test_the_model_and_the_renderer_refuse_the_same_values(value):
    def renderer_takes(text: str) -> bool:
        try:
            check_value(text, "plugstack.conf", "compute.mpi.env.X", words=True)
        except UnsafeConfigError:
            return False
        return True

    def model_takes(text: str) -> bool:
        try:
            SlurmClusterSpec.model_validate(
                {"clusterName": "c", "compute": {"mpi": {"env": {"OMPI_MCA_btl": text}}}}
            )
        except ValueError:
            return False
        return True

    assert model_takes(value) == renderer_takes(value)
    # the schema's pattern (the CRD's and values.schema.json's) says the same
    assert bool(re.fullmatch(MPI_ENV_VALUE, value)) == model_takes(value)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"ENROOT_ROOTFS_WRITABLE": "maybe"}, "is not yes/no/true/false/1/0"),
        ({"ENROOT_DATA_PATH": "relative/dir"}, "is not an absolute path"),
        ({"ENROOT_CACHE_PATH": "/a b"}, "a space"),
        ({"ENROOT_DATA_PATH": "/a#b"}, "comment"),
    ],
)
def test_mapped_values_pass_the_guard(config, message):
    with pytest.raises(RenderError, match=r"^plugstack.conf: compute.pyxis.enrootConfig.ENROOT_"):
        render(compute={"pyxis": {"enabled": True, "enrootConfig": config}})
    with pytest.raises(RenderError, match=message):
        render(compute={"pyxis": {"enabled": True, "enrootConfig": config}})


def test_an_unmapped_enroot_value_is_not_checked():
    render(
        compute={"pyxis": {"enabled": True, "enrootConfig": {"ENROOT_LOGIN_SHELL": "/bin/bash -l"}}}
    )


def test_a_relative_runtime_path_option_is_refused():
    with pytest.raises(RenderError, match=r"plugstackOptions\[0\]: runtime_path 'x' is not"):
        render(compute={"pyxis": {"enabled": True, "plugstackOptions": ["runtime_path=x"]}})


def test_runtime_path_is_the_last_word_that_sets_it():
    spec = SlurmClusterSpec.model_validate({"clusterName": "c"})
    assert runtime_path(spec.compute.pyxis) == RUNTIME_PATH
    pyxis = spec.compute.pyxis.model_copy(
        update={
            "enrootConfig": {"ENROOT_DATA_PATH": "/data"},
            "plugstackOptions": ["runtime_path=/last"],
        }
    )
    assert runtime_path(pyxis) == "/last"


def test_slurm_conf_names_no_plugstack_file():
    for pyxis in (True, False):
        lines = conf(render(compute={"pyxis": {"enabled": pyxis}}))
        assert not any(x.lower().startswith("plugstackconfig") for x in lines)


# --------------------------------------------------------------------------- MPI


def test_mpi_default_is_pmix_and_the_users_wins():
    assert "MpiDefault=pmix" in conf(render())
    lines = conf(render(slurmConfig={"mpidefault": "none"}))  # any case, as Slurm reads it
    assert [x for x in lines if x.lower().startswith("mpidefault")] == ["MpiDefault=none"]


def test_mpi_conf_defaults_and_passthrough():
    assert conf(render(), "mpi.conf") == [
        "PMIxCliTmpDirBase=/var/spool/slurmd/pmix",
        "PMIxDirectConn=true",
    ]
    out = render(slurmConfig={"mpiConfig": {"pmixdirectconn": False, "PMIxTimeout": 600}})
    assert conf(out, "mpi.conf") == [
        "PMIxCliTmpDirBase=/var/spool/slurmd/pmix",
        "PMIxDirectConn=no",  # Slurm reads keys in any case: the user's replaces ours
        "PMIxTimeout=600",
    ]
    assert not any("mpiConfig" in x for x in conf(out))


def test_mpi_conf_goes_through_the_guard():
    spec = SlurmClusterSpec.model_validate({"clusterName": "c"})
    spec.slurmConfig.mpiConfig["PMIxEnv"] = "A=1\nPMIxCliTmpDirBase=/x"  # past the model
    with pytest.raises(RenderError, match=r"^mpi.conf: slurmConfig.mpiConfig.PMIxEnv: "):
        render_all(ClusterInputs(spec, (), EP))


# --------------------------------------------------------------------------- TaskProlog


def test_there_is_no_task_prolog_of_ours():
    out = render()
    assert "task_prolog.sh" not in out.files
    assert not any(x.lower().startswith("taskprolog") for x in conf(out))


def test_the_users_task_prolog_passes_through_as_any_key():
    out = render(slurmConfig={"taskprolog": "/opt/site/prolog"})  # any case, as Slurm reads it
    assert [x for x in conf(out) if x.lower().startswith("taskprolog")] == [
        "taskprolog=/opt/site/prolog"
    ]
    assert "task_prolog.sh" not in out.files


@pytest.mark.parametrize("name", ["PATH", "LD_PRELOAD", "OMPI_MCA_btl;x", "ompi_mca_btl"])
def test_only_mpi_variable_names_are_accepted(name):
    with pytest.raises(ValueError, match="compute"):
        SlurmClusterSpec.model_validate(
            {"clusterName": "c", "compute": {"mpi": {"env": {name: "x"}}}}
        )


def test_new_variables_reach_the_nodes_through_plugstack_conf():
    # as any other option of the plugin: the config hash (the controller and login Pods) follows
    # plugstack.conf; the slurmd Pods fetch it configless (tests/unit/operator/test_slurmd_pod.py)
    before = render()
    after = render(compute={"mpi": {"env": {"OMPI_MCA_pml": "ucx"}}})
    assert before.files["plugstack.conf"] != after.files["plugstack.conf"]
    assert before.files["slurm.conf"] == after.files["slurm.conf"]
    assert before.config_hash != after.config_hash
