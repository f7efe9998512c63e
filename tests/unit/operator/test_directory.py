"""directoryService: sssd.conf from the one renderer, and the sssd sidecar the operator adds to
the controller, login and slurmd Pods (and to no other)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sunk.models.crds import NodeSetSpec, SlurmClusterSpec
from sunk.models.values import DirectoryService
from sunk.operator import directory, names
from sunk.operator.cluster.base import ClusterContext
from sunk.operator.cluster.objects import desired_objects
from sunk.operator.nodeset.pod import build_pod, template_hash
from sunk.operator.nodeset.reconcile import pod_context
from sunk.operator.shared_volumes import VolumeConfigError
from sunk.slurmconf import ClusterInputs, Endpoints, RenderError, render_all
from sunk.slurmconf.inputs import NodeSetInput
from sunk.slurmconf.sssd import render_sssd_conf

OWNER = {"metadata": {"name": "cpu", "uid": "ns-uid"}}
DIRECTORY = {
    "enabled": True,
    "ldapUri": ["ldap://ldap", "ldaps://ldap2.example.org:636"],
    "searchBase": "dc=example,dc=org",
    "bindDn": "cn=reader,dc=example,dc=org",
    "bindPasswordSecret": {"name": "ldap-bind"},
}


def spec(**directory_service) -> SlurmClusterSpec:
    return SlurmClusterSpec.model_validate(
        {"clusterName": "c", "directoryService": {**DIRECTORY, **directory_service}}
    )


def context(cluster: SlurmClusterSpec) -> ClusterContext:
    rendered = render_all(
        ClusterInputs(cluster, (), Endpoints.for_cluster(cluster, "ns"), db_password="pw")
    )
    return ClusterContext("c", "ns", "uid-1", cluster, rendered, "c-munge", "c-jwt", None)


def workload(objects: list[dict], component: str) -> dict:
    return next(
        o["spec"]["template"]["spec"]
        for o in objects
        if o["kind"] in ("StatefulSet", "Deployment")
        and o["metadata"]["labels"][names.LABEL_COMPONENT] == component
    )


def slurmd_pod(cluster: SlurmClusterSpec) -> dict:
    nodeset = NodeSetInput("cpu", NodeSetSpec(clusterName="c"))
    ctx = pod_context("ns", "c", cluster, nodeset.spec, "")
    return build_pod(nodeset, OWNER, ctx, "n0", "cpu-001-002", {})["spec"]


def by_name(items: list[dict]) -> dict[str, dict]:
    return {i["name"]: i for i in items}


def test_sssd_conf_names_the_directory_and_holds_no_password():
    text = render_sssd_conf(spec().directoryService)
    assert "ldap_uri = ldap://ldap, ldaps://ldap2.example.org:636" in text
    assert "ldap_search_base = dc=example,dc=org" in text
    assert "ldap_default_bind_dn = cn=reader,dc=example,dc=org" in text
    assert "auth_provider = none" in text and "access_provider = permit" in text
    assert "authtok" not in text
    # the sidecar appends the password: the domain section must be the last one
    assert text.rstrip().splitlines()[-1].startswith("ldap_default_bind_dn")
    assert [line for line in text.splitlines() if line.startswith("[")][-1] == "[domain/directory]"


def test_sssd_conf_options():
    text = render_sssd_conf(
        spec(
            allowGroups=["hpc", "admins"],
            homeDirectory="/home/%u",
            startTls=True,
            caSecret={"name": "ldap-ca"},
            cacheTimeout=900,
        ).directoryService
    )
    assert "access_provider = simple\nsimple_allow_groups = hpc, admins" in text
    assert "override_homedir = /home/%u" in text
    assert "ldap_id_use_start_tls = true" in text
    assert "ldap_tls_cacert = /etc/sunk/sssd-ca/ca.crt" in text
    assert "entry_cache_timeout = 900" in text
    assert "memcache_timeout = 300" in text  # the clients' cache never outlives SSSD's own


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("searchBase", "dc=x\nldap_default_authtok = stolen"),
        ("bindDn", "cn=a#b"),
        ("defaultShell", "/bin/sh\r"),
        ("homeDirectory", '/home/"%u"'),
        ("ldapUri", ["ldap://a,ldap://evil"]),
        ("ldapUri", ["ldap://a ldap://evil"]),
    ],
)
def test_the_guard_refuses_what_would_add_a_line(field, value):
    # the schema refuses these first; the renderer's guard is the second line (a CR
    # written around the schema)
    with pytest.raises(ValidationError):
        DirectoryService.model_validate({**DIRECTORY, field: value})
    cluster = spec()
    hostile = cluster.directoryService.model_copy(update={field: value})
    with pytest.raises(RenderError, match=rf"sssd.conf: directoryService.{field}\b"):
        render_all(
            ClusterInputs(
                cluster.model_copy(update={"directoryService": hostile}),
                (),
                Endpoints.for_cluster(cluster, "ns"),
                db_password="pw",
            )
        )


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"ldapUri": []}, "ldapUri"),
        ({"searchBase": ""}, "searchBase"),
        ({"bindPasswordSecret": None}, "bindPasswordSecret"),
        ({"ldapUri": ["ldap://a ldap://b"]}, "ldapUri"),
        ({"ldapUri": ["http://a"]}, "ldapUri"),
    ],
)
def test_incomplete_or_bad_settings_are_refused(patch, message):
    with pytest.raises(ValidationError, match=message):
        DirectoryService.model_validate({**DIRECTORY, **patch})


def test_off_by_default_nothing_is_added():
    cluster = SlurmClusterSpec.model_validate({"clusterName": "c"})
    objects = desired_objects(context(cluster))
    assert not any(o["metadata"]["name"] == "c-sssd" for o in objects)
    for component in ("controller", "login", "accounting", "rest"):
        pod = workload(objects, component)
        assert "sssd" not in by_name(pod["containers"])
    assert "sssd" not in by_name(slurmd_pod(cluster)["containers"])


def test_the_sidecar_runs_beside_slurmctld_sshd_and_slurmd_only():
    cluster = spec()
    objects = desired_objects(context(cluster))
    config = next(o for o in objects if o["metadata"]["name"] == "c-sssd")
    assert set(config["data"]) == {"sssd.conf"}
    main = next(o for o in objects if o["metadata"]["name"] == "c-slurm-config")
    assert "sssd.conf" not in main["data"]
    pods = {c: workload(objects, c) for c in ("controller", "login", "accounting", "rest")}
    pods["slurmd"] = slurmd_pod(cluster)
    clients = {"controller": "slurmctld", "login": "sshd", "slurmd": "slurmd"}
    for component, pod in pods.items():
        containers = by_name(pod["containers"])
        if component not in clients:
            assert "sssd" not in containers, component
            continue
        sidecar = containers["sssd"]
        assert sidecar["args"] == ["sssd"]
        assert sidecar["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        mounts = {m["mountPath"] for m in containers[clients[component]]["volumeMounts"]}
        assert {"/var/lib/sss/pipes", "/var/lib/sss/mc"} <= mounts, component
        volumes = by_name(pod["volumes"])
        # the bind password reaches the sidecar alone
        assert volumes["sssd-bind"]["secret"] == {
            "secretName": "ldap-bind",
            "items": [{"key": "password", "path": "password", "mode": 0o400}],
        }
        for name, container in containers.items():
            bound = {m["name"] for m in container.get("volumeMounts", [])}
            assert ("sssd-bind" in bound) == (name == "sssd"), (component, name)
    sshd = by_name(pods["login"]["containers"])["sshd"]
    assert directory.LOGIN_ENV in sshd["env"]


def test_sshd_runs_with_the_smallest_capability_set_unless_the_user_sets_one():
    objects = desired_objects(context(SlurmClusterSpec.model_validate({"clusterName": "c"})))
    sshd = by_name(workload(objects, "login")["containers"])["sshd"]
    assert sshd["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert "SYS_ADMIN" not in sshd["securityContext"]["capabilities"]["add"]
    own = {"capabilities": {"add": ["ALL"]}}
    cluster = SlurmClusterSpec.model_validate(
        {"clusterName": "c", "login": {"securityContext": own}}
    )
    sshd = by_name(workload(desired_objects(context(cluster)), "login")["containers"])["sshd"]
    assert sshd["securityContext"] == own


def test_turning_the_directory_on_replaces_the_slurmd_pods():
    nodeset = NodeSetInput("cpu", NodeSetSpec(clusterName="c"))
    plain = SlurmClusterSpec.model_validate({"clusterName": "c"})
    before = template_hash(nodeset, pod_context("ns", "c", plain, nodeset.spec, ""))
    after = template_hash(nodeset, pod_context("ns", "c", spec(), nodeset.spec, ""))
    other = template_hash(
        nodeset, pod_context("ns", "c", spec(bindPasswordSecret={"name": "x"}), nodeset.spec, "")
    )
    assert len({before, after, other}) == 3


def test_a_user_volume_may_not_take_the_sidecars_names():
    cluster = SlurmClusterSpec.model_validate(
        {
            "clusterName": "c",
            "directoryService": DIRECTORY,
            "global": {
                "volumes": [{"name": "sssd-pipes", "emptyDir": {}}],
                "volumeMounts": [{"name": "sssd-pipes", "mountPath": "/data"}],
            },
        }
    )
    with pytest.raises(VolumeConfigError, match="sssd-pipes"):
        slurmd_pod(cluster)


def test_no_slurm_pod_mounts_an_api_token_unless_its_template_asks():
    cluster = SlurmClusterSpec.model_validate({"clusterName": "c"})
    objects = desired_objects(context(cluster))
    for component in ("controller", "login", "accounting", "rest", "database"):
        assert workload(objects, component)["automountServiceAccountToken"] is False, component
    assert slurmd_pod(cluster)["automountServiceAccountToken"] is False
    nodeset = NodeSetInput(
        "cpu",
        NodeSetSpec(clusterName="c", template={"spec": {"automountServiceAccountToken": True}}),
    )
    ctx = pod_context("ns", "c", cluster, nodeset.spec, "")
    pod = build_pod(nodeset, OWNER, ctx, "n0", "cpu-001-002", {})
    assert pod["spec"]["automountServiceAccountToken"] is True


def test_every_munge_sidecar_keeps_only_what_installing_the_key_needs():
    """The control plane's start as munge with no capability (their Pods' fsGroup lets them
    read the key); the login and slurmd Pods' start as root with the five capabilities that
    copy the key, give it to munge and drop to it."""
    cluster = SlurmClusterSpec.model_validate({"clusterName": "c"})
    objects = desired_objects(context(cluster))
    for component in ("controller", "accounting", "rest"):
        munge = by_name(workload(objects, component)["containers"])["munge"]
        assert munge["securityContext"]["capabilities"] == {"drop": ["ALL"]}, component
        assert munge["securityContext"]["runAsUser"] == 402, component
        assert workload(objects, component)["securityContext"]["fsGroup"], component
    for pod in [workload(objects, "login"), slurmd_pod(cluster)]:
        munge = by_name(pod["containers"])["munge"]
        assert munge["securityContext"]["capabilities"]["drop"] == ["ALL"]
        assert set(munge["securityContext"]["capabilities"]["add"]) == {
            "CHOWN", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID",
        }  # fmt: skip
        assert "fsGroup" not in pod["securityContext"]


def test_slurmctld_resolves_the_login_pods_host_names():
    """srun gives slurmctld its host's name, a login Pod's: the controller Pod searches the
    login Pods' subdomain (their headless Service)."""
    objects = desired_objects(context(SlurmClusterSpec.model_validate({"clusterName": "c"})))
    controller = workload(objects, "controller")
    assert controller["dnsConfig"] == {"searches": ["c-login-pods.ns.svc.cluster.local"]}
    login = next(
        o for o in objects if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "c-login"
    )
    assert login["spec"]["serviceName"] == "c-login-pods"
    assert any(o["kind"] == "Service" and o["metadata"]["name"] == "c-login-pods" for o in objects)
    off = SlurmClusterSpec.model_validate({"clusterName": "c", "login": {"enabled": False}})
    assert "dnsConfig" not in workload(desired_objects(context(off)), "controller")
