"""Bad specs applied straight to the API server (a GitOps tool or `kubectl patch`, no
`sunkctl validate` in between), on the in-memory API (``tests.fakes.kube.FakeKube``): the
operator refuses what validate refuses, says why in validate's words once, keeps the running
configuration, and waits for a spec change instead of retrying."""

from __future__ import annotations

from sunk.slurmconf.slurm_conf import free_text_problems
from tests.argocd import operator_status as op
from tests.fakes.kube import FakeKube


def ready(obj: dict) -> dict:
    return next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")


def events(kube: FakeKube, reason: str) -> list[dict]:
    return [e for e in kube.of_kind("Event") if e["reason"] == reason]


def slurm_conf(kube: FakeKube) -> str:
    maps = [m for m in kube.of_kind("ConfigMap") if "slurm.conf" in (m.get("data") or {})]
    assert len(maps) == 1, [m["metadata"]["name"] for m in maps]
    return maps[0]["data"]["slurm.conf"]


def running_cluster() -> FakeKube:
    kube = FakeKube()
    kube.put(op.slurm_cluster())
    op.reconcile(kube, "SlurmCluster", "slurm")
    return kube


def cluster_with_nodeset() -> FakeKube:
    """Two Nodes, a SlurmCluster and a NodeSet of two, none reconciled yet."""
    kube = op._with_cluster(*op.TWO_NODES)
    kube.put(op.nodeset(replicas=2))
    return kube


def test_bad_spec_extra_config_that_replaces_the_lock_prolog_is_refused_and_config_kept():
    """Slurm takes the last value of a key, so `Prolog=` after ours would silently replace
    the lock prolog. The operator refuses the text with ConfigInvalid naming the line, in
    validate's SUNK024 words, and slurm.conf stays as it runs."""
    kube = running_cluster()
    before = slurm_conf(kube)
    extra = "SchedulerParameters=bf_continue\nProlog=/tmp/evil.sh\nslurmctldparameters=x"
    op.bump(
        kube,
        "SlurmCluster",
        "slurm",
        lambda s: s.setdefault("slurmConfig", {}).update(extraConfig=extra),
    )
    cluster = op.reconcile(kube, "SlurmCluster", "slurm")
    cond = ready(cluster)
    assert cond["status"] == "False" and cond["reason"] == "ConfigInvalid"
    assert "slurmConfig.extraConfig" in cond["message"]
    assert "line 2: `Prolog` is managed by the operator" in cond["message"]
    assert "/tmp/evil.sh" not in slurm_conf(kube)
    assert slurm_conf(kube) == before
    # The words validate prints for the same text (SUNK024) are the renderer's own.
    assert free_text_problems(extra, frozenset())[0] in cond["message"]
    op.reconcile(kube, "SlurmCluster", "slurm")
    assert len(events(kube, "ConfigInvalid")) == 1


def test_bad_spec_include_and_owned_key_in_raw_partitions_are_refused():
    kube = running_cluster()
    raw = "PartitionName=extra Nodes=ALL\nInclude /etc/passwd\nPartitionName=x SlurmUser=root"
    op.bump(kube, "SlurmCluster", "slurm", lambda s: s.setdefault("compute", {}).update(
        rawPartitions=raw))  # fmt: skip
    cond = ready(op.reconcile(kube, "SlurmCluster", "slurm"))
    assert cond["reason"] == "ConfigInvalid"
    assert (
        "compute.rawPartitions: line 2: `Include` reads a file we do not render" in cond["message"]
    )
    assert "line 3: `SlurmUser` is managed by the operator" in cond["message"]
    assert "/etc/passwd" not in slurm_conf(kube)


def test_bad_spec_lists_each_field_in_validates_words_once_without_a_retry():
    """An injected line feed in a cgroup.conf key and value, a bad quantity: each field path
    on a line of its own, no pydantic dump (union branches, documentation links), one Event
    however many passes."""
    kube = running_cluster()

    def inject(spec: dict) -> None:
        spec["slurmConfig"] = {"cgroupConfig": {"Constrain\nX": "yes", "AllowedRAMSpace": "1\n2"}}
        spec.setdefault("compute", {})["sharedMemory"] = "lots"

    op.bump(kube, "SlurmCluster", "slurm", inject)
    cluster = op.reconcile(kube, "SlurmCluster", "slurm")  # raises nothing: no retry
    cond = ready(cluster)
    assert cond["reason"] == "InvalidSpec"
    lines = cond["message"].splitlines()
    assert lines[0].startswith("the spec is invalid (3 problems)")
    assert sorted(lines[1:]) == sorted(
        [
            "compute.sharedMemory: 'lots' is not a Kubernetes quantity (e.g. 500m, 4Gi, 8)",
            'slurmConfig.cgroupConfig: key "Constrain\\nX" is not a Slurm key (letters, digits and '
            "'_', starting with a letter; no space or '=')",
            'slurmConfig.cgroupConfig.AllowedRAMSpace: "1\\n2" is not a safe Slurm value: no line '
            "break (CR/LF), '#', '\"', '\\' or other control character, which would change the "
            "structure of the Slurm file",
        ]
    )
    assert "pydantic" not in cond["message"] and "validation error" not in cond["message"]
    assert "[type=" not in cond["message"]
    op.reconcile(kube, "SlurmCluster", "slurm")
    assert len(events(kube, "InvalidSpec")) == 1
    assert events(kube, "InvalidSpec")[0]["message"] == cond["message"]


def test_bad_spec_nodeset_of_an_invalid_cluster_waits_without_touching_its_pods():
    kube = cluster_with_nodeset()
    op.reconcile(kube, "SlurmCluster", "slurm")
    op.reconcile(kube, "NodeSet", "cpu")
    pods = sorted(p["metadata"]["name"] for p in kube.of_kind("Pod"))
    assert len(pods) == 2
    op.bump(kube, "SlurmCluster", "slurm", lambda s: s.update(slurmConfig={"MaxTime": "1\n2"}))
    nodeset = op.reconcile(kube, "NodeSet", "cpu")  # raises nothing
    cond = ready(nodeset)
    assert cond["reason"] == "ClusterInvalid" and "SlurmCluster slurm" in cond["message"]
    assert sorted(p["metadata"]["name"] for p in kube.of_kind("Pod")) == pods


def test_no_condition_message_is_empty():
    """Every condition the operator writes says something, on both kinds, healthy or not."""
    kube = cluster_with_nodeset()
    for _ in range(2):
        op.reconcile(kube, "SlurmCluster", "slurm")
        op.reconcile(kube, "NodeSet", "cpu")
        op.workloads_ready(kube)
        op.pods_ready(kube)
    for kind, name in (("SlurmCluster", "slurm"), ("NodeSet", "cpu")):
        conds = kube.read(kind, name, op.NS)["status"]["conditions"]
        assert conds and all(c["message"] for c in conds), (kind, conds)


def test_skew_slurmd_newer_than_the_controller_waits_without_touching_its_pods():
    """A NodeSet whose slurmd image names a newer Slurm than the controller's (the default,
    `0.1.0-slurm24.11`) would only give slurmds that cannot join: the NodeSet keeps its Pods
    and says why, once as an Event, until the controller goes first."""
    kube = op._with_cluster(*op.TWO_NODES)
    kube.put(op.nodeset(replicas=2, image="opensunk/slurmd:0.1.0-slurm24.11"))
    op.reconcile(kube, "SlurmCluster", "slurm")
    op.reconcile(kube, "NodeSet", "cpu")
    before = {
        p["metadata"]["name"]: p["spec"]["containers"][0]["image"] for p in kube.of_kind("Pod")
    }
    assert len(before) == 2 and set(before.values()) == {"opensunk/slurmd:0.1.0-slurm24.11"}

    def newer(spec: dict) -> None:
        spec["template"]["spec"]["containers"][0]["image"] = "opensunk/slurmd:0.2.0-slurm26.05"

    op.bump(kube, "NodeSet", "cpu", newer)
    cond = ready(op.reconcile(kube, "NodeSet", "cpu"))
    assert cond["status"] == "False" and cond["reason"] == "SlurmVersionSkew", cond
    assert "Slurm 26.05 and slurmctld 24.11: 26.05 is newer than 24.11" in cond["message"]
    after = {
        p["metadata"]["name"]: p["spec"]["containers"][0]["image"] for p in kube.of_kind("Pod")
    }
    assert after == before
    op.reconcile(kube, "NodeSet", "cpu")
    assert len(events(kube, "SlurmVersionSkew")) == 1
    # the same image with the controller upgraded first: the rollout goes ahead
    op.bump(kube, "SlurmCluster", "slurm", lambda s: s.update(
        controller={"image": {"repository": "opensunk/controller", "tag": "0.2.0-slurm26.05"}}
    ))  # fmt: skip
    op.reconcile(kube, "SlurmCluster", "slurm")
    assert ready(op.reconcile(kube, "NodeSet", "cpu"))["reason"] != "SlurmVersionSkew"
