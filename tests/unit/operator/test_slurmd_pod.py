"""The slurmd Pod's security defaults and labels (the real-node e2e tier runs slurmd so), and
what the cluster's compute settings add to it: /dev/shm, the container plugin's volumes and
security settings."""

from __future__ import annotations

import pytest

from sunk.models.crds import NodeSetSpec, SlurmClusterSpec
from sunk.operator import names
from sunk.operator.cluster.objects import desired_objects
from sunk.operator.common import POD_SECURITY_CONTEXT
from sunk.operator.nodeset.pod import (
    CONTAINERS_VOLUME,
    CREDENTIALS_VOLUME,
    SHM_PATH,
    SHM_VOLUME,
    SLURMD_SECURITY_CONTEXT,
    template_hash,
)
from sunk.operator.nodeset.reconcile import pod_context
from sunk.slurmconf.guard import UnsafeConfigError
from sunk.slurmconf.inputs import NodeSetInput
from sunk.slurmconf.plugstack import RUNTIME_PATH
from tests.unit.operator.test_shared_volumes import (
    cluster,
    cluster_context,
    container,
    slurmd_pod,
)


def group(slurmd: dict, labels: dict | None = None) -> NodeSetInput:
    template = {"metadata": {"labels": labels or {}}, "spec": {"containers": [slurmd]}}
    return NodeSetInput("cpu", NodeSetSpec(clusterName="c", template=template))


def test_slurmd_is_unprivileged_with_a_listed_capability_set():
    pod = slurmd_pod(cluster(), group({"name": "slurmd", "image": "slurmd:1"}))
    security = container(pod["spec"], "slurmd")["securityContext"]
    assert security == SLURMD_SECURITY_CONTEXT
    assert security["privileged"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert "SYS_ADMIN" in security["capabilities"]["add"]  # the cgroup remount
    # a copy: changing one Pod's context changes no other
    security["capabilities"]["add"].append("NET_ADMIN")
    assert "NET_ADMIN" not in SLURMD_SECURITY_CONTEXT["capabilities"]["add"]


def test_slurmd_pods_run_under_the_runtime_default_seccomp_profile():
    pod = slurmd_pod(cluster(), group({"name": "slurmd", "image": "slurmd:1"}))
    assert pod["spec"]["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    # a copy per Pod
    pod["spec"]["securityContext"]["fsGroup"] = 5
    assert "fsGroup" not in POD_SECURITY_CONTEXT


def test_a_templates_pod_security_context_replaces_the_default():
    template = {"spec": {"securityContext": {"runAsUser": 0}, "containers": [{"name": "slurmd"}]}}
    spec = NodeSetSpec(clusterName="c", template=template)
    pod = slurmd_pod(cluster(), NodeSetInput("cpu", spec))
    assert pod["spec"]["securityContext"] == {"runAsUser": 0}


def test_a_groups_security_context_replaces_it_privileged_as_in_sunk():
    mine = {"name": "slurmd", "image": "slurmd:1", "securityContext": {"privileged": True}}
    pod = slurmd_pod(cluster(), group(mine))
    assert container(pod["spec"], "slurmd")["securityContext"] == {"privileged": True}


def test_a_template_cannot_label_slurmd_as_another_component():
    labels = {names.LABEL_COMPONENT: "accounting", "team": "ml"}
    pod = slurmd_pod(cluster(), group({"name": "slurmd", "image": "slurmd:1"}, labels))
    assert pod["metadata"]["labels"][names.LABEL_COMPONENT] == "slurmd"
    assert pod["metadata"]["labels"]["team"] == "ml"


# --------------------------------------------------------------------------- compute defaults
# /dev/shm, the container plugin's volumes and security settings.


def with_defaults(compute: dict | None = None, **spec) -> SlurmClusterSpec:
    """A cluster with containers on (`compute.pyxis.enabled`) over the chart's other compute
    defaults (sharedMemory 8Gi)."""
    compute = {**(compute or {})}
    compute["pyxis"] = {"enabled": True, **compute.get("pyxis", {})}
    return SlurmClusterSpec.model_validate(
        {"clusterName": "c", "syncer": {"nodeLocking": False}, "compute": compute, **spec}
    )


def mounts_of(pod: dict) -> dict[str, str]:
    return {m["mountPath"]: m["name"] for m in container(pod["spec"], "slurmd")["volumeMounts"]}


def volumes_of(pod: dict) -> dict[str, dict]:
    return {v["name"]: v for v in pod["spec"]["volumes"]}


def plain_group(**container_keys) -> NodeSetInput:
    return group({"name": "slurmd", "image": "slurmd:1", **container_keys})


def test_by_default_slurmd_gets_shm_and_the_containers_dir():
    pod = slurmd_pod(with_defaults(), plain_group())
    mounts, volumes = mounts_of(pod), volumes_of(pod)
    assert mounts[SHM_PATH] == SHM_VOLUME
    assert volumes[SHM_VOLUME] == {
        "name": SHM_VOLUME,
        "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"},
    }
    assert mounts[RUNTIME_PATH] == CONTAINERS_VOLUME == "containers"
    assert volumes[CONTAINERS_VOLUME] == {"name": "containers", "emptyDir": {}}
    assert CREDENTIALS_VOLUME not in volumes  # no credentialsSecret
    # compute.mpi.env (set by default) is the container plugin's: nothing of it in the Pod
    assert "/etc/slurm/task_prolog.sh" not in mounts
    assert "dispatchers" not in volumes  # no prolog, epilog or node locking here
    env = {e["name"] for e in container(pod["spec"], "slurmd")["env"]}
    assert not {name for name in env if name.startswith("OMPI_")}


def test_sizes_and_the_credentials_secret():
    pyxis = {"cacheVolumeSizeLimit": "200Gi", "credentialsSecret": "registry-creds"}
    pod = slurmd_pod(with_defaults({"pyxis": pyxis, "sharedMemory": "32Gi"}), plain_group())
    volumes, mounts = volumes_of(pod), mounts_of(pod)
    assert volumes[SHM_VOLUME]["emptyDir"]["sizeLimit"] == "32Gi"
    assert volumes["containers"]["emptyDir"] == {"sizeLimit": "200Gi"}
    assert volumes[CREDENTIALS_VOLUME] == {
        "name": CREDENTIALS_VOLUME,
        "secret": {"secretName": "registry-creds", "defaultMode": 0o400},
    }
    (mount,) = [
        m
        for m in container(pod["spec"], "slurmd")["volumeMounts"]
        if m["name"] == CREDENTIALS_VOLUME
    ]
    assert mount == {
        "name": CREDENTIALS_VOLUME,
        "mountPath": "/etc/sunk/containers/credentials",
        "readOnly": True,
    }
    assert mounts["/etc/sunk/containers/credentials"] == CREDENTIALS_VOLUME


def test_the_containers_dir_follows_enroot_data_path():
    pyxis = {"enrootConfig": {"ENROOT_DATA_PATH": "/scratch/containers"}}
    mounts = mounts_of(slurmd_pod(with_defaults({"pyxis": pyxis}), plain_group()))
    assert mounts["/scratch/containers"] == "containers"
    assert RUNTIME_PATH not in mounts


def test_a_groups_own_mounts_at_those_paths_win():
    local = {"name": "nvme", "hostPath": {"path": "/mnt/nvme/containers"}}
    dshm = {"name": "dshm", "emptyDir": {"medium": "Memory"}}
    template = {
        "spec": {
            "containers": [
                {
                    "name": "slurmd",
                    "volumeMounts": [
                        {"name": "nvme", "mountPath": RUNTIME_PATH},
                        {"name": "dshm", "mountPath": "/dev/shm/"},
                    ],
                }
            ],
            "volumes": [local, dshm],
        }
    }
    ns = NodeSetInput("cpu", NodeSetSpec(clusterName="c", template=template))
    pod = slurmd_pod(with_defaults(), ns)
    mounts, volumes = mounts_of(pod), volumes_of(pod)
    assert mounts[RUNTIME_PATH] == "nvme"
    assert mounts["/dev/shm/"] == "dshm" and SHM_PATH not in mounts
    # the defaults no mount uses are not added
    assert "containers" not in volumes and SHM_VOLUME not in volumes
    assert volumes["nvme"] == local


def test_turned_off_nothing_is_added():
    compute = {"pyxis": {"enabled": False}, "sharedMemory": None, "mpi": {"env": {}}}
    pod = slurmd_pod(with_defaults(compute), plain_group())
    assert not {SHM_VOLUME, "containers", "dispatchers"} & set(volumes_of(pod))
    assert not {SHM_PATH, RUNTIME_PATH} & set(mounts_of(pod))


def test_pyxis_off_keeps_shm():
    pod = slurmd_pod(with_defaults({"pyxis": {"enabled": False}}), plain_group())
    assert SHM_PATH in mounts_of(pod)
    assert RUNTIME_PATH not in mounts_of(pod)
    assert "dispatchers" not in volumes_of(pod)


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        ("localhost/enroot", {"type": "Localhost", "localhostProfile": "enroot"}),
        ("enroot", {"type": "Localhost", "localhostProfile": "enroot"}),
        ("RuntimeDefault", {"type": "RuntimeDefault"}),
        ("Unconfined", {"type": "Unconfined"}),
    ],
)
def test_the_apparmor_profile_goes_on_the_slurmd_container(profile, expected):
    spec = with_defaults({"pyxis": {"appArmorProfile": profile}})
    pod = slurmd_pod(spec, plain_group())
    security = container(pod["spec"], "slurmd")["securityContext"]
    assert security["appArmorProfile"] == expected
    assert security["capabilities"] == SLURMD_SECURITY_CONTEXT["capabilities"]
    assert "appArmorProfile" not in SLURMD_SECURITY_CONTEXT  # a copy was changed
    assert "appArmorProfile" not in container(pod["spec"], "munge").get("securityContext", {})


def test_the_apparmor_profile_needs_pyxis_and_yields_to_the_groups_own():
    off = with_defaults({"pyxis": {"enabled": False, "appArmorProfile": "enroot"}})
    pod = slurmd_pod(off, plain_group())
    assert "appArmorProfile" not in container(pod["spec"], "slurmd")["securityContext"]
    own = {"privileged": True, "appArmorProfile": {"type": "Unconfined"}}
    spec = with_defaults({"pyxis": {"appArmorProfile": "enroot"}})
    pod = slurmd_pod(spec, plain_group(securityContext=own))
    assert container(pod["spec"], "slurmd")["securityContext"] == own


def test_pyxis_pod_security_context_between_the_groups_and_ours():
    seccomp = {"seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/enroot"}}
    spec = with_defaults({"pyxis": {"podSecurityContext": seccomp}})
    assert slurmd_pod(spec, plain_group())["spec"]["securityContext"] == seccomp
    template = {"spec": {"securityContext": {"runAsUser": 0}, "containers": [{"name": "slurmd"}]}}
    mine = NodeSetInput("cpu", NodeSetSpec(clusterName="c", template=template))
    assert slurmd_pod(spec, mine)["spec"]["securityContext"] == {"runAsUser": 0}
    off = with_defaults({"pyxis": {"enabled": False, "podSecurityContext": seccomp}})
    assert slurmd_pod(off, plain_group())["spec"]["securityContext"] == POD_SECURITY_CONTEXT


def test_these_settings_roll_the_slurmd_pods():
    ns = plain_group()

    def digest(compute: dict) -> str:
        spec = with_defaults(compute)
        return template_hash(ns, pod_context("ns", "c", spec, ns.spec))

    base = digest({})
    for compute in (
        {"sharedMemory": "16Gi"},
        {"pyxis": {"cacheVolumeSizeLimit": "1Ti"}},
        {"pyxis": {"credentialsSecret": "creds"}},
        {"pyxis": {"appArmorProfile": "enroot"}},
        {"pyxis": {"podSecurityContext": {"runAsUser": 0}}},
        {"pyxis": {"enrootConfig": {"ENROOT_DATA_PATH": "/d"}}},
    ):
        assert digest(compute) != base, compute
    # what only plugstack.conf carries needs no new Pods (configless slurmds fetch it),
    # compute.mpi.env among it (the plugin's env= words)
    assert digest({"pyxis": {"imageCacheSize": "5G"}}) == base
    assert digest({"mpi": {"env": {"OMPI_MCA_pml": "ucx"}}}) == base
    assert digest({"mpi": {"env": {}}}) == base


def test_a_bad_runtime_path_is_a_config_error_of_the_nodeset():
    spec = with_defaults()
    spec.compute.pyxis.plugstackOptions.append("runtime_path=x")  # past the models
    ns = plain_group()
    with pytest.raises(UnsafeConfigError, match="runtime_path 'x' is not an absolute path"):
        template_hash(ns, pod_context("ns", "c", spec, ns.spec))


def test_the_cluster_configmap_carries_mpi_conf_and_plugstack_conf():
    ctx = cluster_context(with_defaults())
    (config,) = [
        o
        for o in desired_objects(ctx)
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == names.config_map("c")
    ]
    assert {"mpi.conf", "plugstack.conf"} <= set(config["data"])
    assert "task_prolog.sh" not in config["data"]
    assert "PMIxCliTmpDirBase=/var/spool/slurmd/pmix" in config["data"]["mpi.conf"]
    assert " env=OMPI_MCA_pml=ob1 " in config["data"]["plugstack.conf"]
