"""The NetworkPolicies of a Slurm cluster: who may reach which component, and what the spec
turns off. The API server's acceptance and their removal are in tests/cluster; the e2e tier
enforces them on real nodes."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sunk.models.crds import SlurmClusterSpec
from sunk.operator import names
from sunk.operator.cluster.network import network_policies, operator_peer, policy_names
from tests.unit.operator.test_cluster_objects import context

OPERATOR = operator_peer("sunk")


def by_name(policies):
    return {p["metadata"]["name"]: p["spec"] for p in policies}


def test_default_policies_isolate_each_component():
    ctx = context()
    policies = by_name(network_policies(ctx, OPERATOR))
    assert sorted(policies) == sorted(policy_names("c"))
    for spec in policies.values():
        assert spec["policyTypes"] == ["Ingress"]  # egress (DNS, LDAP, the lock hook) stays open

    slurm = policies["c-slurm"]
    assert slurm["podSelector"] == {
        "matchLabels": {names.LABEL_CLUSTER: "c"},
        "matchExpressions": [
            {"key": names.LABEL_COMPONENT, "operator": "NotIn", "values": ["database"]}
        ],
    }
    assert slurm["ingress"] == [
        {"from": [{"podSelector": {"matchLabels": {names.LABEL_CLUSTER: "c"}}}]}
    ]

    ssh = policies["c-login-ssh"]
    assert ssh["ingress"] == [{"ports": [{"protocol": "TCP", "port": 22}]}]  # from anywhere
    assert ssh["podSelector"]["matchLabels"][names.LABEL_COMPONENT] == "login"

    rest = policies["c-rest"]
    assert rest["ingress"][0]["from"] == [OPERATOR]
    assert rest["ingress"][0]["ports"] == [{"protocol": "TCP", "port": 6820}]

    database = policies["c-database"]
    assert database["podSelector"]["matchLabels"][names.LABEL_COMPONENT] == "database"
    (rule,) = database["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 3306}]
    assert rule["from"] == [
        {
            "podSelector": {
                "matchLabels": {names.LABEL_CLUSTER: "c", names.LABEL_COMPONENT: "accounting"}
            }
        }
    ]


def test_peers_from_the_spec_are_added_and_components_that_are_off_get_none():
    ctx = context(
        login={"enabled": False},
        accounting={"enabled": False},
        networkPolicy={
            "restFrom": [{"namespaceSelector": {"matchLabels": {"team": "ml"}}}],
            "slurmFrom": [{"ipBlock": {"cidr": "10.250.0.0/24", "except": ["10.250.0.1/32"]}}],
        },
    )
    policies = by_name(network_policies(ctx, None))
    assert sorted(policies) == ["c-rest", "c-slurm"]
    assert policies["c-rest"]["ingress"][0]["from"] == [
        {"namespaceSelector": {"matchLabels": {"team": "ml"}}}
    ]
    assert policies["c-slurm"]["ingress"][0]["from"][1] == {
        "ipBlock": {"cidr": "10.250.0.0/24", "except": ["10.250.0.1/32"]}
    }


def test_no_operator_peer_and_no_rest_from_leaves_slurmrestd_to_the_cluster():
    policies = by_name(network_policies(context(), None))
    assert "c-rest" not in policies


def test_an_external_database_gets_no_policy_and_off_means_none():
    external = context(accounting={"external": {"enabled": True, "host": "db.example"}})
    assert "c-database" not in by_name(network_policies(external, OPERATOR))
    assert network_policies(context(networkPolicy={"enabled": False}), OPERATOR) == []


@pytest.mark.parametrize(
    ("peer", "message"),
    [
        ({}, "a peer needs an ipBlock"),
        ({"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}, "takes no selector"),
        ({"ipBlock": {"cidr": "10.0.0.0/8 "}}, "should match pattern"),
        ({"ipBlock": {"cidr": "0.0.0.0/0"}, "ports": [22]}, "Extra inputs"),
    ],
)
def test_bad_peers_are_refused(peer, message):
    with pytest.raises(ValidationError, match=message):
        SlurmClusterSpec.model_validate({"clusterName": "c", "networkPolicy": {"sshFrom": [peer]}})
