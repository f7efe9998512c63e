"""The real kube-apiserver refuses hostile SlurmCluster and NodeSet objects where the CRD
can carry the guard's patterns: typed string fields, and the names of s6 services (a CEL rule,
since a structural schema has no propertyNames). Other map keys and free scalar values are
refused by the operator's renderer instead: a CEL rule over every config map's keys exceeds
the API server's cost budget 27 times over (keys have no length bound it can see)."""

from __future__ import annotations

import pytest

from sunk.devenv.controlplane import KubeAPIError
from tests.hostile import LINE_BREAKERS, LUA_BREAKERS, SPACE

PAYLOADS = {**LINE_BREAKERS, **SPACE}
CLUSTER_FIELDS = {
    "nodeSets": lambda p: {"compute": {"partitions": [{"name": "p", "nodeSets": [p]}]}},
    "external-host": lambda p: {"accounting": {"external": {"host": p}}},
    "external-user": lambda p: {"accounting": {"external": {"user": p}}},
    "database-name": lambda p: {"accounting": {"database": {"name": p}}},
    "plugstack": lambda p: {"compute": {"pyxis": {"plugstackOptions": [p]}}},
    "ldapUri": lambda p: {"directoryService": {"ldapUri": ["ldaps://ldap.example" + p]}},
}
NODESET_FIELDS = {
    "staticFeatures": lambda p: {"features": {"staticFeatures": [p]}},
    "dynamic-prefix": lambda p: {"features": {"dynamicFeatures": {"l": {"prefix": p}}}},
}


# s6 service names a hostile CR could use to reach a path outside the service directory or to
# break the services list the images read.
HOSTILE_KEYS = ["AuthType=auth/none", "a b", "x\noneshot", "../../etc/cron.d/x", "#x", ".x"]
CLUSTER_KEY_FIELDS = {
    "compute.s6": lambda k: {"compute": {"s6": {k: {"type": "oneshot", "script": "true"}}}},
    "login.s6": lambda k: {"login": {"s6": {k: {"type": "longrun", "script": "sleep 1"}}}},
}
NODESET_KEY_FIELDS = {
    "s6": lambda k: {"s6": {k: {"type": "oneshot", "script": "true"}}},
}


def _create(kube, namespace, plural, kind, spec):
    return kube.create(
        f"/apis/sunk.coreweave.com/v1alpha1/namespaces/{namespace}/{plural}",
        {
            "apiVersion": "sunk.coreweave.com/v1alpha1",
            "kind": kind,
            "metadata": {"generateName": "h-"},
            "spec": spec,
        },
    )


def test_clean_objects_are_accepted(crds, kube, namespace):
    _create(kube, namespace, "slurmclusters", "SlurmCluster", {"clusterName": "c"})
    _create(kube, namespace, "nodesets", "NodeSet", {"clusterName": "c"})


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_hostile_objects_are_refused(crds, kube, namespace, payload):
    text = PAYLOADS[payload]
    for field, build in CLUSTER_FIELDS.items():
        with pytest.raises(KubeAPIError) as caught:
            _create(
                kube,
                namespace,
                "slurmclusters",
                "SlurmCluster",
                {"clusterName": "c", **build(text)},
            )
        assert caught.value.status == 422, field
    for field, build in NODESET_FIELDS.items():
        with pytest.raises(KubeAPIError) as caught:
            _create(kube, namespace, "nodesets", "NodeSet", {"clusterName": "c", **build(text)})
        assert caught.value.status == 422, field


# A Lua script is a whole file: the CRD's pattern refuses the hidden characters except the bidi
# controls, which it cannot name (RE2 and Python share no escape for them): the renderer does.
LUA_REFUSED = {k: v for k, v in LUA_BREAKERS.items() if k != "bidi"}
LUA_FIELDS = ("jobSubmitLua", "cliFilterLua")


@pytest.mark.parametrize("key", HOSTILE_KEYS)
def test_hostile_map_keys_are_refused(crds, kube, namespace, key):
    for field, build in CLUSTER_KEY_FIELDS.items():
        with pytest.raises(KubeAPIError, match="s6 service names must match") as caught:
            _create(kube, namespace, "slurmclusters", "SlurmCluster",
                    {"clusterName": "c", **build(key)})  # fmt: skip
        assert caught.value.status == 422 and "s6 service names must match" in str(caught.value), (
            field
        )
    for field, build in NODESET_KEY_FIELDS.items():
        with pytest.raises(KubeAPIError) as caught:
            _create(kube, namespace, "nodesets", "NodeSet", {"clusterName": "c", **build(key)})
        assert caught.value.status == 422 and "s6 service names must match" in str(caught.value), (
            field
        )


def test_ordinary_map_keys_are_accepted(crds, kube, namespace):
    spec = {"clusterName": "c"}
    for build in CLUSTER_KEY_FIELDS.values():
        _deep_update(spec, build("Good_key1"))
    _create(kube, namespace, "slurmclusters", "SlurmCluster", spec)
    ns_spec = {"clusterName": "c"}
    for build in NODESET_KEY_FIELDS.values():
        ns_spec.update(build("setup.v2"))
    _create(kube, namespace, "nodesets", "NodeSet", ns_spec)


def _deep_update(into: dict, more: dict) -> None:
    for key, value in more.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _deep_update(into[key], value)
        else:
            into[key] = value


@pytest.mark.parametrize("payload", sorted(LUA_REFUSED))
def test_hostile_lua_scripts_are_refused(crds, kube, namespace, payload):
    for field in LUA_FIELDS:
        with pytest.raises(KubeAPIError) as caught:
            _create(
                kube,
                namespace,
                "slurmclusters",
                "SlurmCluster",
                {"clusterName": "c", "slurmConfig": {field: {"script": LUA_REFUSED[payload]}}},
            )
        assert caught.value.status == 422, field


def test_lua_scripts_and_references_are_accepted_but_not_both(crds, kube, namespace):
    script = "function f()\n\treturn '#\"\\\\' -- ünï\nend\n"
    _create(
        kube,
        namespace,
        "slurmclusters",
        "SlurmCluster",
        {
            "clusterName": "c",
            "slurmConfig": {
                "jobSubmitLua": {"script": script},
                "cliFilterLua": {"configMap": {"name": "site-lua", "key": "cli.lua"}},
            },
        },
    )
    both = {"script": script, "configMap": {"name": "site-lua"}}
    with pytest.raises(KubeAPIError) as caught:
        _create(
            kube,
            namespace,
            "slurmclusters",
            "SlurmCluster",
            {"clusterName": "c", "slurmConfig": {"jobSubmitLua": both}},
        )
    assert caught.value.status == 422
    assert "set either script or configMap, not both" in str(caught.value)


def test_an_incomplete_directory_is_refused_with_the_models_words(crds, kube, namespace):
    """The CEL rules say what the values model says: a CR written by hand gets the same
    refusal as a values file."""
    directory = {"enabled": True, "ldapUri": ["ldaps://ldap.example"], "searchBase": "dc=x"}
    _create(kube, namespace, "slurmclusters", "SlurmCluster",
            {"clusterName": "c", "directoryService": directory})  # fmt: skip
    for patch, message in (
        ({"ldapUri": []}, "ldapUri: at least one LDAP server is needed when enabled"),
        ({"searchBase": ""}, "searchBase: the base DN is needed when enabled"),
        ({"bindDn": "cn=reader,dc=x"}, "bindDn is set, but no Secret holds its password"),
    ):
        with pytest.raises(KubeAPIError) as caught:
            _create(kube, namespace, "slurmclusters", "SlurmCluster",
                    {"clusterName": "c", "directoryService": {**directory, **patch}})  # fmt: skip
        assert caught.value.status == 422 and message in str(caught.value), patch


@pytest.mark.parametrize("budget", ["abc", "150%", "010%", "10", -1, "10 %"])
def test_a_bad_rolling_update_budget_is_refused(crds, kube, namespace, budget):
    """maxUnavailable is int-or-string, which cannot carry a pattern: a CEL rule does."""
    for plural, kind, spec in (
        ("nodesets", "NodeSet", {"maxUnavailable": budget}),
        ("slurmclusters", "SlurmCluster", {"compute": {"maxUnavailable": budget}}),
    ):
        with pytest.raises(KubeAPIError) as caught:
            _create(kube, namespace, plural, kind, {"clusterName": "c", **spec})
        assert caught.value.status == 422, (kind, budget)
        assert "a percentage from '0%' to '100%'" in str(caught.value), (kind, budget)


@pytest.mark.parametrize("budget", ["0%", "10%", "100%", 0, 3])
def test_a_good_rolling_update_budget_is_accepted(crds, kube, namespace, budget):
    _create(kube, namespace, "nodesets", "NodeSet", {"clusterName": "c", "maxUnavailable": budget})


@pytest.mark.parametrize(
    ("peer", "message"),
    [
        ({}, "a peer needs an ipBlock, a namespaceSelector or a podSelector"),
        ({"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}, "takes no selector"),
        ({"ipBlock": {"cidr": "10.0.0.0/8 0.0.0.0/0"}}, "should match"),
    ],
)
def test_a_bad_network_peer_is_refused_with_the_models_words(crds, kube, namespace, peer, message):
    """networkPolicy peers: the CRD's CEL rules and patterns refuse what the model refuses."""
    with pytest.raises(KubeAPIError) as caught:
        _create(kube, namespace, "slurmclusters", "SlurmCluster",
                {"clusterName": "c", "networkPolicy": {"sshFrom": [peer]}})  # fmt: skip
    assert caught.value.status == 422 and message in str(caught.value), peer
