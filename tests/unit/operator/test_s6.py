"""s6 services on built objects: the ConfigMap the images read, its mount, the readiness probe
of the slurmd container, and the Pods rolling when a script changes."""

from __future__ import annotations

from sunk.models.values import S6Service
from sunk.operator import names, s6
from sunk.operator.cluster.controller import config_maps
from sunk.operator.cluster.objects import desired_objects
from sunk.operator.nodeset.pod import template_hash
from sunk.operator.nodeset.reconcile import pod_context
from tests.unit.operator.test_shared_volumes import (
    cluster,
    cluster_context,
    container,
    nodeset,
    slurmd_pod,
    workloads,
)

SETUP = {"type": "oneshot", "script": "#!/bin/bash\ntouch /run/ok\n", "timeoutUp": 30000}
EXPORTER = {"type": "longrun", "script": "exec sleep infinity", "timeoutDown": 2000}


def services(**entries) -> dict[str, S6Service]:
    return {name: S6Service.model_validate(e) for name, e in entries.items()}


def test_the_config_map_lists_services_in_name_order_beside_their_scripts():
    data = s6.config_map_data(services(zeta=EXPORTER, alpha=SETUP))
    assert data == {
        "alpha.script": SETUP["script"],
        "zeta.script": EXPORTER["script"],
        "services": "alpha oneshot 30000 0\nzeta longrun 0 2000\n",
    }


def test_a_group_service_replaces_the_cluster_service_of_the_same_name():
    mine = {**SETUP, "script": "true"}
    merged = s6.merged(services(setup=SETUP, exporter=EXPORTER), services(setup=mine))
    assert merged["setup"].script == "true" and merged["exporter"].type == "longrun"


def test_slurmd_pods_mount_the_nodesets_services_and_are_ready_only_after_the_oneshots():
    spec = cluster(compute={"s6": {"exporter": EXPORTER}})
    pod = slurmd_pod(spec, nodeset(s6={"setup": SETUP}))["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == s6.VOLUME)
    assert volume["configMap"]["name"] == names.nodeset_s6_map("cpu") == "cpu-nodeset-s6"
    slurmd = container(pod, "slurmd")
    assert {"name": s6.VOLUME, "mountPath": "/etc/sunk/s6", "readOnly": True} in slurmd[
        "volumeMounts"
    ]
    assert slurmd["readinessProbe"]["exec"]["command"] == ["/usr/local/bin/sunk-ready"]
    assert "readinessProbe" not in container(pod, "munge")


def test_a_template_probe_wins_and_pods_without_services_are_unchanged():
    own = {"tcpSocket": {"port": 6818}}
    ns = nodeset(s6={"setup": SETUP})
    ns.spec.template.spec["containers"][0]["readinessProbe"] = own
    assert container(slurmd_pod(cluster(), ns)["spec"], "slurmd")["readinessProbe"] == own
    plain = slurmd_pod(cluster(), nodeset())["spec"]
    assert s6.VOLUME not in {v["name"] for v in plain["volumes"]}
    assert "readinessProbe" not in container(plain, "slurmd")


def test_a_changed_script_rolls_the_slurmd_pods_and_nothing_else_does():
    ns = nodeset()
    base = cluster()
    before = template_hash(ns, pod_context("ns", "c", base, ns.spec))
    with_service = cluster(compute={"s6": {"setup": SETUP}})
    hashed = template_hash(ns, pod_context("ns", "c", with_service, ns.spec))
    changed = cluster(compute={"s6": {"setup": {**SETUP, "script": "exit 0"}}})
    assert len({before, hashed, template_hash(ns, pod_context("ns", "c", changed, ns.spec))}) == 3
    # the same cluster again: the same hash (no roll on every reconcile)
    assert hashed == template_hash(ns, pod_context("ns", "c", with_service, ns.spec))
    own = nodeset(s6={"setup": SETUP})
    assert template_hash(own, pod_context("ns", "c", base, own.spec)) != before


def test_login_pods_get_their_services_and_roll_when_a_script_changes():
    spec = cluster(login={"s6": {"motd": SETUP}})
    maps = {m["metadata"]["name"]: m for m in config_maps(cluster_context(spec))}
    assert maps["c-login-s6"]["data"]["services"] == "motd oneshot 30000 0\n"
    assert maps["c-login-s6"]["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    pod = workloads(spec)["c-login"]
    assert {"name": s6.VOLUME, "configMap": {"name": "c-login-s6"}} in pod["volumes"]
    sshd = container(pod, "sshd")
    assert sshd["readinessProbe"] == {"tcpSocket": {"port": 22}, "periodSeconds": 10}
    assert {"name": s6.VOLUME, "mountPath": s6.MOUNT, "readOnly": True} in sshd["volumeMounts"]

    def s6_hash(spec):
        objs = desired_objects(cluster_context(spec))
        login = next(
            o for o in objs if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "c-login"
        )
        return login["spec"]["template"]["metadata"]["annotations"].get(names.ANN_S6_HASH)

    changed = cluster(login={"s6": {"motd": {**SETUP, "script": "true"}}})
    assert s6_hash(spec) != s6_hash(changed) and s6_hash(spec) is not None
    assert s6_hash(cluster()) is None
    assert "c-login-s6" not in {
        m["metadata"]["name"] for m in config_maps(cluster_context(cluster()))
    }
