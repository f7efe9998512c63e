"""The CRDs' CEL rules evaluated offline (sunk.validate.cel_step) on custom resources as the
chart renders them: what the API server would refuse is refused, with the rule's message."""

from __future__ import annotations

from sunk.schema.crd import nodeset_crd, slurmcluster_crd
from sunk.validate import cel_step

API = "sunk.coreweave.com/v1alpha1"


def cluster(**spec) -> dict:
    return {"apiVersion": API, "kind": "SlurmCluster", "metadata": {"name": "c"},
            "spec": {"clusterName": "c", **spec}}  # fmt: skip


def nodeset(**spec) -> dict:
    return {"apiVersion": API, "kind": "NodeSet", "metadata": {"name": "cpu"},
            "spec": {"clusterName": "c", **spec}}  # fmt: skip


def messages(*objects: dict) -> list[str]:
    return [f.message for f in cel_step.check_objects(list(objects), "values.yaml")]


def test_clean_resources_pass():
    directory = {"enabled": True, "ldapUri": ["ldaps://l"], "searchBase": "dc=x"}
    s6 = {"setup": {"type": "oneshot", "script": "true"}}
    assert messages(cluster(directoryService=directory, compute={"s6": s6}), nodeset(s6=s6)) == []


def test_each_broken_rule_is_a_finding_at_its_key_with_the_rules_message():
    incomplete = {"enabled": True, "searchBase": "dc=x", "bindDn": "cn=r"}
    found = cel_step.check_objects(
        [cluster(directoryService=incomplete), nodeset(s6={"../x": {"type": "oneshot"}})], "v"
    )
    by_key = {(f.resource["kind"], f.key_path): f.message for f in found}
    assert set(by_key) == {("SlurmCluster", "spec.directoryService"), ("NodeSet", "spec.s6")}
    directory = [f.message for f in found if f.resource["kind"] == "SlurmCluster"]
    assert any("ldapUri: at least one LDAP server is needed" in m for m in directory)
    assert any("bindDn is set, but no Secret holds its password" in m for m in directory)
    assert "s6 service names must match" in by_key[("NodeSet", "spec.s6")]
    assert all("the API server would refuse it" in f.message for f in found)
    assert {str(f.severity) for f in found} == {"error"}


def test_rules_inside_lists_and_maps_are_reached():
    lua = {"script": "x", "configMap": {"name": "m"}}  # both: refused by a rule one level down
    assert any("not both" in m for m in messages(cluster(slurmConfig={"jobSubmitLua": lua})))


def _rules(node) -> list[str]:
    if isinstance(node, dict):
        own = [r["rule"] for r in node.get("x-kubernetes-validations") or []]
        return own + [r for value in node.values() for r in _rules(value)]
    if isinstance(node, list):
        return [r for value in node for r in _rules(value)]
    return []


def test_transition_rules_are_left_to_the_api_server():
    schema = nodeset_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert "self == oldSelf" in _rules(schema)  # clusterName is immutable
    assert messages(nodeset(clusterName="other")) == []  # no stored object to compare with


def test_an_error_inside_a_rule_is_reported_not_raised():
    outcome = cel_step.evaluate("self.missing > 1", {})
    assert isinstance(outcome, str) and outcome
    assert cel_step.evaluate("size(self) == 0", {}) is True


def test_the_rules_read_from_the_charts_crds_are_the_models_rules():
    """The evaluator reads the sunk chart's generated CRD templates, not the models."""
    schemas = cel_step._schemas()
    for crd in (slurmcluster_crd(), nodeset_crd()):
        (version,) = crd["spec"]["versions"]
        key = (f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"])
        assert schemas[key] == version["schema"]["openAPIV3Schema"]
