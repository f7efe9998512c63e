"""The ConfigMaps the operator writes stay far under the API server's 1 MiB at thousands of
Slurm nodes, and the renderer says so before a cluster grows into the limit."""

from __future__ import annotations

import base64
import random
import re

import pytest

from sunk.models.crds import NodeSetSpec, SlurmClusterSpec
from sunk.operator.cluster.accounting import slurmdbd_secret
from sunk.operator.cluster.base import ClusterContext
from sunk.operator.cluster.objects import desired_objects
from sunk.slurmconf import ClusterInputs, Endpoints, render_all
from sunk.slurmconf.inputs import NodeSetInput, Placement
from sunk.slurmconf.size import LIMIT, PROJECTED, WARN_AT, ConfigSizeError, check

TREE = ["ib.coreweave.cloud/fabric", "ib.coreweave.cloud/superpod", "ib.coreweave.cloud/leafgroup"]
BLOCK = "ds.coreweave.com/nvlink.domain"
GROUPS = ("h100", "h200", "gb200-nvl72", "cpu-epyc")
# Slurm's hostlist: a prefix, then [lo-hi,n,...] or a plain name.
_PART = re.compile(r"([^,\[]+)(?:\[([^\]]+)\])?")


def _expand(hostlist: str) -> set[str]:
    names = set()
    for prefix, body in _PART.findall(hostlist):
        prefix = prefix.lstrip(",")
        if not body:
            names.add(prefix)
            continue
        for item in body.split(","):
            lo, _, hi = item.partition("-")
            for n in range(int(lo), int(hi or lo) + 1):
                names.add(f"{prefix}{n:0{len(lo)}d}")
    return names


def _nodeset(name: str, replicas: int | None = None) -> NodeSetInput:
    template = {"spec": {"containers": [{"name": "slurmd", "resources": {"limits": {
        "cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8"}}}]}}  # fmt: skip
    return NodeSetInput(name, NodeSetSpec(clusterName="c", template=template, replicas=replicas))


def _placements(count: int) -> list[Placement]:
    """``count`` Slurm nodes over four NodeSets, named as the operator names Pods (the last two
    octets of the Node's IP), the IPs scattered at random: no run of them shares a hostlist
    range, the worst case for the file's size. 32 nodes a leaf group, 32 leaf groups a
    superpod, 18 nodes an NVLink domain."""
    rng = random.Random(count)
    out = []
    for index, ip in enumerate(rng.sample(range(256 * 256), count)):
        group = GROUPS[index % len(GROUPS)]
        labels = {
            TREE[0]: "fabric-a",
            TREE[1]: f"superpod-{index // 1024:03d}",
            TREE[2]: f"leaf-{index // 32:04d}",
            BLOCK: f"nvl-{index // 18:05d}",
        }
        out.append(Placement(f"{group}-{ip // 256:03d}-{ip % 256:03d}", labels))
    return out


def _data_bytes(obj: dict) -> int:
    """What the API server counts against the limit: keys and values of data (decoded),
    stringData and binaryData."""
    size = sum(len(k) + len(v.encode()) for k, v in (obj.get("stringData") or {}).items())
    for field in ("data", "binaryData"):
        encoded = obj["kind"] == "Secret" or field == "binaryData"  # base64 in the object
        for key, value in (obj.get(field) or {}).items():
            size += len(key) + len(base64.b64decode(value) if encoded else value.encode())
    return size


def _render(count: int, **spec):
    cluster = SlurmClusterSpec.model_validate(
        {
            "clusterName": "c",
            "directoryService": {
                "enabled": True,
                "ldapUri": ["ldap://ldap"],
                "searchBase": "dc=example,dc=org",
            },
            **spec,
        }
    )
    inputs = ClusterInputs(
        cluster,
        tuple(_nodeset(g) for g in GROUPS),
        Endpoints.for_cluster(cluster, "ns"),
        tuple(_placements(count)),
        db_password="pw",
    )
    return cluster, render_all(inputs)


@pytest.mark.parametrize(
    ("count", "budget"),
    [(5000, LIMIT // 8), (20000, WARN_AT)],
    ids=["5000", "20000"],
)
def test_every_configmap_stays_far_under_the_limit_at(count: int, budget: int):
    """Every ConfigMap and Secret the operator writes for a cluster of ``count`` Slurm nodes
    on tree and block topology: at 5,000 nodes under an eighth of 1 MiB, at 20,000 under half;
    topology.conf still names every node in its active layout, and the renderer warns of
    nothing."""
    cluster, rendered = _render(count)
    assert not [w for w in rendered.warnings if "KiB" in w], rendered.warnings
    ctx = ClusterContext("c", "ns", "uid-1", cluster, rendered, "c-munge", "c-jwt", None)
    objects = [*desired_objects(ctx), slurmdbd_secret(ctx)]
    sizes = {
        f"{o['kind']}/{o['metadata']['name']}": _data_bytes(o)
        for o in objects
        if o and o["kind"] in ("ConfigMap", "Secret")
    }
    assert "ConfigMap/c-topology" in sizes and "Secret/c-slurmdbd-conf" in sizes, sizes
    over = {name: size for name, size in sizes.items() if size > budget}
    assert not over, f"over {budget} bytes at {count} nodes: {over}"

    topology = rendered.files["topology.conf"]
    listed = set()
    for line in topology.splitlines():
        if line.startswith("SwitchName=") and " Nodes=" in line:
            listed |= _expand(line.split(" Nodes=", 1)[1])
    assert listed == {p.slurm_node for p in _placements(count)}
    # the block layout (inactive) is too large to repeat as comments: one line says so
    assert "# BlockName=" not in topology and "left out past 64 KiB" in topology


def test_a_small_cluster_keeps_the_other_layout_as_comments():
    _, rendered = _render(40)
    assert "# BlockName=nvl-00000 Nodes=" in rendered.files["topology.conf"]


def test_replicas_that_would_outgrow_the_limit_are_a_warning_before_any_pod_exists():
    cluster = SlurmClusterSpec.model_validate({"clusterName": "c"})
    nodesets = tuple(_nodeset(f"{g}-long-group-name", replicas=10000) for g in GROUPS)
    rendered = render_all(ClusterInputs(cluster, nodesets, Endpoints.for_cluster(cluster, "ns")))
    (warning,) = [w for w in rendered.warnings if w.startswith(PROJECTED)]
    assert (
        "at 40000 replicas topology.conf may reach 1240 KiB, more than the 1024 KiB a "
        "ConfigMap holds" in warning
    ), warning
    half = tuple(_nodeset(f"{g}-long-group-name", replicas=5000) for g in GROUPS)
    rendered = render_all(ClusterInputs(cluster, half, Endpoints.for_cluster(cluster, "ns")))
    (warning,) = [w for w in rendered.warnings if w.startswith(PROJECTED)]
    assert (
        "at 20000 replicas topology.conf may reach 620 KiB, past half of the 1024 KiB" in warning
    ), warning
    fewer = tuple(_nodeset(g, replicas=1000) for g in GROUPS)
    quiet = render_all(ClusterInputs(cluster, fewer, Endpoints.for_cluster(cluster, "ns")))
    assert not [w for w in quiet.warnings if w.startswith(PROJECTED)], quiet.warnings


def test_a_file_no_configmap_holds_is_refused_naming_it():
    """No input the models take renders one file this large today (Lua scripts stop at
    256 KiB, slurm.conf values at 4 KiB): the check is the guard for what comes."""
    files = {"slurm.conf": "#" * (LIMIT + 1), "gres.conf": ""}
    with pytest.raises(ConfigSizeError, match=r"^slurm.conf: 1024 KiB rendered, more than the "):
        check(files, (), None)
    assert issubclass(ConfigSizeError, ValueError)
    (warning,) = check({"slurm.conf": "#" * (WARN_AT + 1)}, (), None)
    assert warning == "slurm.conf: 512 KiB rendered, past half the 1024 KiB a ConfigMap holds"


def test_files_that_each_fit_but_not_together_in_one_configmap_are_refused():
    half = "#" * (WARN_AT + 1024)
    with pytest.raises(
        ConfigSizeError, match=r"gres\.conf, slurm\.conf: .* together in the .* config ConfigMap"
    ):
        check({"slurm.conf": half, "gres.conf": half}, [], None)
    # apart in their own objects, the same sizes fit (each warned about alone)
    warnings = check({"slurm.conf": half, "topology.conf": half}, [], None)
    assert [w.split(":")[0] for w in warnings] == ["slurm.conf", "topology.conf"]
    quarter = "#" * (WARN_AT // 2 + 1024)
    (together,) = check({"slurm.conf": quarter, "gres.conf": quarter}, [], None)
    assert together.startswith("gres.conf, slurm.conf: ") and "past half" in together
