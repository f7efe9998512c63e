"""compute.pyxis, compute.sharedMemory and compute.mpi through the real chart: the SlurmCluster
carries them (a `null` too, which Helm drops from the values), and the operator's builders
make the Slurm files and the slurmd Pod from it. compute.mpi.env reaches job tasks through the
container plugin: `env=NAME=VALUE` words on its plugstack.conf line."""

from __future__ import annotations

from sunk.models.values import MPI_ENV_DEFAULTS
from sunk.slurmconf.plugstack import PLUGIN_SO
from tests.chart.conftest import operator_view, write_values

VALUES = """
clusterName: c
compute:
  nodes:
    cpu: {definitions: [cpu-epyc]}
"""


def _cluster(docs):
    (cluster,) = [d for d in docs if d["kind"] == "SlurmCluster"]
    return cluster["spec"]["compute"]


def test_the_chart_defaults_reach_the_slurm_files_and_the_pod(objects, tmp_path):
    docs = objects("slurm", write_values(tmp_path, VALUES))
    compute = _cluster(docs)
    assert compute["pyxis"]["enabled"] is True
    assert compute["sharedMemory"] == "8Gi"
    assert compute["mpi"]["env"] == MPI_ENV_DEFAULTS
    view = operator_view(docs, "ns")
    files = view.ctx.rendered.files
    assert (
        f"required {PLUGIN_SO} mount_home=1 remap_root=0 image_cache_size=20G "
        "env=OMPI_MCA_btl=self,vader,tcp env=OMPI_MCA_btl_tcp_if_include=eth0 "
        "env=OMPI_MCA_oob_tcp_if_include=eth0 env=OMPI_MCA_pml=ob1 container_scope=job"
    ) in files["plugstack.conf"].splitlines()
    slurm_conf = files["slurm.conf"].splitlines()
    assert "MpiDefault=pmix" in slurm_conf
    assert not any(x.lower().startswith("taskprolog") for x in slurm_conf)
    assert "task_prolog.sh" not in files
    assert "PMIxDirectConn=true" in files["mpi.conf"]
    (nodeset,) = view.nodesets
    pod = view.slurmd_pod(nodeset)["spec"]
    slurmd = next(c for c in pod["containers"] if c["name"] == "slurmd")
    paths = {m["mountPath"] for m in slurmd["volumeMounts"]}
    assert {"/dev/shm", "/var/lib/sunk/containers"} <= paths
    assert "/etc/slurm/task_prolog.sh" not in paths


def test_null_turns_them_off_through_helm(objects, tmp_path):
    sets = ("compute.sharedMemory=null", "compute.mpi.env=null", "compute.pyxis.enabled=false")
    docs = objects("slurm", write_values(tmp_path, VALUES), sets=sets)
    compute = _cluster(docs)
    assert compute["sharedMemory"] is None
    assert compute["mpi"] == {"env": {}}
    view = operator_view(docs, "ns")
    files = view.ctx.rendered.files
    assert PLUGIN_SO not in files["plugstack.conf"]
    assert "env=" not in files["plugstack.conf"]
    (nodeset,) = view.nodesets
    pod = view.slurmd_pod(nodeset)["spec"]
    slurmd = next(c for c in pod["containers"] if c["name"] == "slurmd")
    paths = {m["mountPath"] for m in slurmd["volumeMounts"]}
    assert not {"/dev/shm", "/var/lib/sunk/containers"} & paths


def test_one_variable_dropped_with_null(objects, tmp_path):
    docs = objects(
        "slurm", write_values(tmp_path, VALUES), sets=("compute.mpi.env.OMPI_MCA_pml=null",)
    )
    env = _cluster(docs)["mpi"]["env"]
    assert "OMPI_MCA_pml" not in env and env["OMPI_MCA_btl"] == "self,vader,tcp"
    plugstack = operator_view(docs, "ns").ctx.rendered.files["plugstack.conf"]
    assert "OMPI_MCA_pml" not in plugstack
    assert " env=OMPI_MCA_btl=self,vader,tcp " in plugstack


def test_an_override_merges_over_the_charts_defaults(objects, tmp_path):
    values = VALUES + "  mpi:\n    env: {OMPI_MCA_pml: ucx, UCX_TLS: tcp}\n"
    docs = objects("slurm", write_values(tmp_path, values))
    assert _cluster(docs)["mpi"]["env"] == {
        **MPI_ENV_DEFAULTS,
        "OMPI_MCA_pml": "ucx",
        "UCX_TLS": "tcp",
    }
    words = [
        w
        for w in operator_view(docs, "ns").ctx.rendered.files["plugstack.conf"].split()
        if w.startswith("env=")
    ]
    assert words == [
        "env=OMPI_MCA_btl=self,vader,tcp",
        "env=OMPI_MCA_btl_tcp_if_include=eth0",
        "env=OMPI_MCA_oob_tcp_if_include=eth0",
        "env=OMPI_MCA_pml=ucx",
        "env=UCX_TLS=tcp",
    ]
