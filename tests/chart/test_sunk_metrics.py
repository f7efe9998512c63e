"""The sunk chart's Slurm metrics objects: the Grafana dashboard ConfigMap and the PrometheusRule,
both off by default; the names they query are the ones sunk.syncer.slurm_metrics exports."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from sunk.syncer.slurm_metrics import METRICS
from tests.chart.conftest import write_values

DASHBOARD_ON = ("metrics.dashboard.enabled=true",)
RULE_ON = ("metrics.prometheusRule.enabled=true",)
RULE_API = ("monitoring.coreos.com/v1/PrometheusRule",)
METRIC_NAME = re.compile(r"\bslurm_[a-z0-9_]*[a-z0-9]\b")


def of_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def dashboard_of(docs):
    (configmap,) = of_kind(docs, "ConfigMap")
    return configmap, json.loads(configmap["data"]["slurm.json"])


def exprs(dashboard):
    found = []
    for panel in dashboard["panels"]:
        found += [t["expr"] for t in panel.get("targets", [])]
    found += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    return found


def test_off_by_default(objects):
    docs = objects("sunk", api_versions=RULE_API)
    assert not of_kind(docs, "ConfigMap") and not of_kind(docs, "PrometheusRule")


def test_lint_strict_with_both_on(helm, repo):
    cmd = [helm, "lint", "--strict", str(repo / "charts/sunk")]
    for item in (*DASHBOARD_ON, *RULE_ON):
        cmd += ["--set", item]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dashboard_configmap_carries_the_sidecar_label(objects):
    configmap, dashboard = dashboard_of(
        objects("sunk", sets=(*DASHBOARD_ON, "commonLabels.team=hpc"))
    )
    labels = configmap["metadata"]["labels"]
    assert labels["grafana_dashboard"] == "1"
    assert labels["team"] == "hpc" and labels["app.kubernetes.io/name"] == "sunk"
    assert configmap["metadata"]["name"] == "rel-sunk-slurm-dashboard"
    assert configmap["metadata"]["namespace"] == "tenant-slurm"  # the release's
    assert dashboard["uid"] == "sunk-slurm"


def test_dashboard_label_namespace_and_annotations_are_configurable(objects):
    sets = (
        *DASHBOARD_ON,
        "metrics.dashboard.labelKey=grafana.io/dashboard",
        "metrics.dashboard.labelValue=slurm",
        "metrics.dashboard.namespace=monitoring",
        "metrics.dashboard.annotations.grafana_folder=Slurm",
    )
    configmap, _ = dashboard_of(objects("sunk", sets=sets))
    assert configmap["metadata"]["labels"]["grafana.io/dashboard"] == "slurm"
    assert "grafana_dashboard" not in configmap["metadata"]["labels"]
    assert configmap["metadata"]["namespace"] == "monitoring"
    assert configmap["metadata"]["annotations"] == {"grafana_folder": "Slurm"}


def test_dashboard_queries_exactly_the_exported_metrics(objects):
    _, dashboard = dashboard_of(objects("sunk", sets=DASHBOARD_ON))
    queries = exprs(dashboard)
    assert queries and all(q.strip() for q in queries)
    used = {name for q in queries for name in METRIC_NAME.findall(q)}
    # every name anywhere in the dashboard (titles, descriptions too) is one the module exports
    everywhere = set(METRIC_NAME.findall(json.dumps(dashboard)))
    assert everywhere <= set(METRICS), sorted(everywhere - set(METRICS))
    assert used == set(METRICS), sorted(set(METRICS) - used)
    # each query is scoped by the dashboard's namespace and cluster variables
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert {"datasource", "namespace", "cluster"} <= variables
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            assert 'namespace=~"$namespace", cluster=~"$cluster"' in target["expr"]
            assert target["datasource"]["uid"] == "${datasource}"


def test_dashboard_panels_do_not_overlap(objects):
    _, dashboard = dashboard_of(objects("sunk", sets=DASHBOARD_ON))
    cells = set()
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24
        mine = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"])
                for y in range(pos["y"], pos["y"] + pos["h"])}  # fmt: skip
        assert not mine & cells, panel["title"]
        cells |= mine


def test_prometheus_rule_alerts(objects, tmp_path):
    # a fraction from a values file (helm's --set gives a string)
    ratio = write_values(tmp_path, "metrics: {prometheusRule: {nodesUnavailableRatio: 0.25}}\n")
    sets = (
        *RULE_ON,
        "metrics.prometheusRule.labels.release=kube-prometheus-stack",
        "metrics.prometheusRule.severity=critical",
        "metrics.prometheusRule.jobsPendingFor=2h",
        "commonLabels.team=hpc",
    )
    (rule,) = of_kind(objects("sunk", ratio, sets=sets, api_versions=RULE_API), "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    labels = rule["metadata"]["labels"]
    assert labels["release"] == "kube-prometheus-stack" and labels["team"] == "hpc"
    (group,) = rule["spec"]["groups"]
    alerts = {r["alert"]: r for r in group["rules"]}
    assert set(alerts) == {
        "SlurmMetricsDown", "SlurmMetricsStale", "SlurmNodesUnavailable", "SlurmJobsStuckPending",
        "SlurmPartitionHealthDrained",
    }  # fmt: skip
    for alert in alerts.values():
        assert alert["labels"] == {"severity": "critical"}
        assert set(METRIC_NAME.findall(alert["expr"])) <= set(METRICS)
        assert "by (namespace, cluster" in alert["expr"]
        assert "{{ $labels.cluster }}" in alert["annotations"]["summary"]
    assert alerts["SlurmNodesUnavailable"]["expr"].rstrip().endswith("> 0.25")
    assert {"slurm_nodes_down", "slurm_nodes_drain", "slurm_nodes_total"} <= set(
        METRIC_NAME.findall(alerts["SlurmNodesUnavailable"]["expr"])
    )
    health = alerts["SlurmPartitionHealthDrained"]["expr"]
    assert health.rstrip().endswith("> 0.1") and "by (namespace, cluster, partition)" in health
    assert {"slurm_partition_nodes_health_drained", "slurm_partition_nodes_total"} == set(
        METRIC_NAME.findall(health)
    )
    summary = alerts["SlurmPartitionHealthDrained"]["annotations"]["summary"]
    assert "{{ $labels.partition }}" in summary
    assert alerts["SlurmJobsStuckPending"]["for"] == "2h"
    assert "slurm_queue_pending" in alerts["SlurmJobsStuckPending"]["expr"]
    assert "slurm_metrics_up" in alerts["SlurmMetricsDown"]["expr"]


def test_prometheus_rule_labels_never_override_the_charts(objects):
    sets = (*RULE_ON, "metrics.prometheusRule.labels.app\\.kubernetes\\.io/name=other")
    (rule,) = of_kind(objects("sunk", sets=sets, api_versions=RULE_API), "PrometheusRule")
    assert rule["metadata"]["labels"]["app.kubernetes.io/name"] == "sunk"


def test_prometheus_rule_only_where_its_api_is_served(objects, helm, repo):
    assert not of_kind(objects("sunk", sets=RULE_ON), "PrometheusRule")
    cmd = [helm, "install", "rel", str(repo / "charts/sunk"), "--dry-run=client", "-n", "s"]
    for item in (*RULE_ON, *DASHBOARD_ON):
        cmd += ["--set", item]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    manifest, notes = proc.stdout.split("NOTES:", 1)
    assert "kind: PrometheusRule" not in manifest and "kind: ConfigMap" in manifest
    assert "serve monitoring.coreos.com/v1 PrometheusRule: none was created" in notes
    assert "configmap/rel-sunk-slurm-dashboard in s, label grafana_dashboard=1" in notes


@pytest.mark.parametrize(
    "bad",
    [
        "metrics.prometheusRule.nodesUnavailableRatio=2",
        "metrics.prometheusRule.jobsPendingFor=soon",
        "metrics.dashboard.namespace=Not_A_Namespace",
        "metrics.dashboard.labelKey=",
    ],
)
def test_schema_refuses_bad_values(render, bad):
    proc = render("sunk", sets=(*RULE_ON, *DASHBOARD_ON, bad))
    assert proc.returncode != 0
    assert "values don't meet the specifications of the schema" in proc.stderr


def test_scrape_objects_keep_the_series_own_namespace_label(objects):
    sets = ("operator.podMonitor.enabled=true", "operator.vmPodScrape.enabled=true")
    served = (
        "monitoring.coreos.com/v1/PodMonitor",
        "operator.victoriametrics.com/v1beta1/VMPodScrape",
    )
    docs = objects("sunk", sets=sets, api_versions=served)
    for kind in ("PodMonitor", "VMPodScrape"):
        (scrape,) = of_kind(docs, kind)
        assert scrape["spec"]["podMetricsEndpoints"][0]["honorLabels"] is True
