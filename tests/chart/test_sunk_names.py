"""The sunk chart's names fit Kubernetes' limits for every release name helm accepts: suffixes
are added after the full name is cut, so a 53-character release (helm's maximum) or a
63-character fullnameOverride still gives valid, distinct names that keep their suffix, and
every label value stays a valid label value. (kubeconform checks no lengths.)"""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from tests.chart.test_sunk_chart import ALL_ON, API_VERSIONS

DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")  # Services: RFC 1035 label
# Most other objects: RFC 1123 subdomain, at most 253 characters.
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
SUFFIXES = {
    "Deployment": "-operator",
    "PodDisruptionBudget": "-operator",
    "NetworkPolicy": "-operator",
    "ServiceAccount": ("-operator", "-operator-test"),
    "ClusterRole": ("-operator", "-operator-test"),
    "ClusterRoleBinding": ("-operator", "-operator-test"),
    "Role": ("-operator-leader-election", "-operator-test", "-operator"),
    "RoleBinding": ("-operator-leader-election", "-operator-test", "-operator"),
    "Service": ("-operator-metrics", "-operator-hook"),
    "Pod": "-operator-test",
    "DaemonSet": "-nvidia-device-plugin",
    "PodMonitor": "-operator",
    "VMPodScrape": "-operator",
    "ConfigMap": "-slurm-dashboard",
    "PrometheusRule": "-slurm",
}
NAMES_ON = (
    *ALL_ON,
    "metrics.dashboard.enabled=true",
    "metrics.prometheusRule.enabled=true",
    "operator.watchNamespaces={tenant-a}",  # the operator's Role and binding there
)
APIS = (*API_VERSIONS, "monitoring.coreos.com/v1/PrometheusRule")

LONGEST = "r" * 53  # helm refuses longer release names
CASES = {
    "53-char release": (LONGEST, ()),
    "53-char release containing the chart name": ("sunk" + "s" * 49, ()),
    "release ending in a dash after the cut": ("a" * 50 + "-bc", ()),
    "63-char fullnameOverride": ("rel", ("fullnameOverride=" + "f" * 63,)),
    "63-char nameOverride": (LONGEST, ("nameOverride=" + "n" * 63,)),
}


def template(helm, repo, release, sets):
    cmd = [helm, "template", release, str(repo / "charts/sunk"), "-n", "sunk"]
    for item in (*NAMES_ON, *sets):
        cmd += ["--set", item]
    for api in APIS:
        cmd += ["--api-versions", api]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


@pytest.mark.parametrize(("release", "sets"), CASES.values(), ids=CASES.keys())
def test_names_fit_and_keep_their_suffix(helm, repo, release, sets):
    docs = template(helm, repo, release, sets)
    seen = {}
    for doc in docs:
        kind, name = doc["kind"], doc["metadata"]["name"]
        assert len(name) <= 253 and DNS_SUBDOMAIN.match(name), f"{kind}/{name}"
        for labels in _label_sets(doc):
            for key, value in labels.items():
                assert len(str(value)) <= 63, f"{kind}/{name} label {key}={value}"
                assert LABEL_VALUE.match(str(value)), f"{kind}/{name} label {key}={value}"
        if kind == "CustomResourceDefinition":
            continue
        # The chart's own names: DNS labels (what a Service needs), so each fits anywhere.
        assert len(name) <= 63, f"{kind}/{name}: {len(name)} characters"
        assert DNS_LABEL.match(name), f"{kind}/{name}: not a DNS label"
        suffix = SUFFIXES[kind]
        assert name.endswith(suffix if isinstance(suffix, str) else tuple(suffix)), name
        assert "--" not in name, f"{kind}/{name}"
        assert (kind, name) not in seen
        seen[(kind, name)] = doc
    assert set(SUFFIXES) <= {kind for kind, _ in seen}

    # The pieces still point at each other.
    (deploy,) = [d for (k, _), d in seen.items() if k == "Deployment"]
    (account,) = [n for (k, n) in seen if k == "ServiceAccount" and n.endswith("-operator")]
    (test_account,) = [n for (k, n) in seen if k == "ServiceAccount" and n != account]
    services = [d for (k, _), d in seen.items() if k == "Service"]
    assert len(services) == 2
    (test_pod,) = [d for (k, _), d in seen.items() if k == "Pod"]
    assert deploy["spec"]["template"]["spec"]["serviceAccountName"] == account
    assert test_pod["spec"]["serviceAccountName"] == test_account
    bindings = [d for (k, _), d in seen.items() if k.endswith("RoleBinding")]
    assert len(bindings) == 5
    for binding in bindings:
        role = binding["roleRef"]
        assert (role["kind"], role["name"]) in seen
        expected = test_account if role["name"].endswith("-operator-test") else account
        assert binding["subjects"][0]["name"] == expected
    pod_labels = deploy["spec"]["template"]["metadata"]["labels"]
    for service in services:
        assert service["spec"]["selector"].items() <= pod_labels.items()
    (hook,) = [d for d in services if d["metadata"]["name"].endswith("-operator-hook")]
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--hook-url=http://{hook['metadata']['name']}.sunk.svc:8082" in args
    assert (
        f"--deployment=sunk/{deploy['metadata']['name']}"
        in test_pod["spec"]["containers"][0]["args"]
    )


def test_a_53_character_release_gets_the_longest_valid_service_name(helm, repo):
    """The cut leaves room for the suffix: 63 characters, the most a Service name may have."""
    docs = template(helm, repo, LONGEST, ())
    (service,) = [d for d in docs if d["kind"] == "Service" and "metrics" in d["metadata"]["name"]]
    assert len(service["metadata"]["name"]) == 63
    assert service["metadata"]["name"] == ("r" * 53 + "-sunk")[:46] + "-operator-metrics"


def _label_sets(doc):
    """The object's labels, its Pod template's, and the label selectors it carries."""
    spec = doc.get("spec") or {}
    yield doc["metadata"].get("labels") or {}
    yield ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    selector = spec.get("selector") or {}
    yield selector.get("matchLabels", selector if doc["kind"] == "Service" else {})
