"""The operator chart: CRDs, operator, RBAC, optional components."""

from __future__ import annotations

import subprocess

import pytest

ALL_ON = (
    "nvidia-device-plugin.enabled=true",
    "moco.enabled=true",
    "operator.podMonitor.enabled=true",
    "operator.vmPodScrape.enabled=true",
)
# The scrape objects are rendered only where their APIs are served.
API_VERSIONS = (
    "monitoring.coreos.com/v1/PodMonitor",
    "operator.victoriametrics.com/v1beta1/VMPodScrape",
)


def kinds(docs):
    return sorted(f"{d['kind']}/{d['metadata']['name']}" for d in docs)


def test_lint_strict_defaults_and_all_switches(helm, repo):
    for sets in ((), ALL_ON):
        cmd = [helm, "lint", "--strict", str(repo / "charts/sunk")]
        for s in sets:
            cmd += ["--set", s]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_default_objects(objects):
    docs = objects("sunk")
    assert kinds(docs) == [
        "ClusterRole/rel-sunk-operator",
        "ClusterRole/rel-sunk-operator-test",  # the `helm test` Pod's: two CRDs
        "ClusterRoleBinding/rel-sunk-operator",
        "ClusterRoleBinding/rel-sunk-operator-test",
        "CustomResourceDefinition/nodesets.sunk.coreweave.com",
        "CustomResourceDefinition/slurmclusters.sunk.coreweave.com",
        "Deployment/rel-sunk-operator",
        "NetworkPolicy/rel-sunk-operator",
        "Pod/rel-sunk-operator-test",  # the `helm test` hook
        "PodDisruptionBudget/rel-sunk-operator",
        "Role/rel-sunk-operator-leader-election",  # the Lease, in the release namespace only
        "Role/rel-sunk-operator-test",  # and the operator Deployment
        "RoleBinding/rel-sunk-operator-leader-election",
        "RoleBinding/rel-sunk-operator-test",
        "Service/rel-sunk-operator-hook",  # the lock hook job prologs call
        "Service/rel-sunk-operator-metrics",
        "ServiceAccount/rel-sunk-operator",
        "ServiceAccount/rel-sunk-operator-test",
    ]


def test_switches_add_their_objects(objects):
    names = kinds(objects("sunk", sets=ALL_ON, api_versions=API_VERSIONS))
    assert "DaemonSet/rel-sunk-nvidia-device-plugin" in names
    assert "PodMonitor/rel-sunk-operator" in names
    assert "VMPodScrape/rel-sunk-operator" in names


@pytest.mark.parametrize("served", [(), API_VERSIONS[:1], API_VERSIONS[1:]])
def test_scrape_objects_only_where_their_api_is_served(objects, served):
    names = kinds(objects("sunk", sets=ALL_ON, api_versions=served))
    assert ("PodMonitor/rel-sunk-operator" in names) == (API_VERSIONS[0] in served)
    assert ("VMPodScrape/rel-sunk-operator" in names) == (API_VERSIONS[1] in served)


def test_notes_warn_when_a_scrape_api_is_missing(helm, repo):
    """helm install has no --api-versions: a client dry run serves neither scrape API."""
    cmd = [helm, "install", "rel", str(repo / "charts/sunk"), "--dry-run=client", "-n", "s"]
    for item in ALL_ON:
        cmd += ["--set", item]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    manifest, notes = proc.stdout.split("NOTES:", 1)
    assert "kind: PodMonitor" not in manifest and "kind: VMPodScrape" not in manifest
    assert "serve monitoring.coreos.com/v1 PodMonitor: none was created" in notes
    assert "serve operator.victoriametrics.com/v1beta1 VMPodScrape: none was created" in notes


def test_crds_can_be_left_out_and_are_kept_on_uninstall(objects):
    docs = objects("sunk", sets=("crds.enabled=false",))
    assert not [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    for crd in [d for d in objects("sunk") if d["kind"] == "CustomResourceDefinition"]:
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def operator_role(docs, kind="ClusterRole", namespace=None):
    (role,) = [
        d
        for d in docs
        if d["kind"] == kind
        and d["metadata"]["name"] == "rel-sunk-operator"
        and d["metadata"].get("namespace") == namespace
    ]
    return role


def grants(rules):
    return {
        (g, r, v) for x in rules for g in x["apiGroups"] for r in x["resources"] for v in x["verbs"]
    }


def test_cluster_role_has_no_wildcards_and_moco_is_opt_in(objects):
    def rules(sets=()):
        return operator_role(objects("sunk", sets=sets))["rules"]

    for doc in objects("sunk", sets=ALL_ON):
        for rule in doc.get("rules") or []:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], rule
    assert not any("moco.cybozu.com" in r["apiGroups"] for r in rules())
    moco = [r for r in rules(("moco.enabled=true",)) if "moco.cybozu.com" in r["apiGroups"]]
    assert any("mysqlclusters" in r["resources"] and "create" in r["verbs"] for r in moco)


def test_least_privilege_verbs(objects):
    """What the issue found: no Secret list/watch/update/delete, no Lease writes outside the
    release namespace, nothing the code never asks for. (The cluster tier checks every grant
    against the API server's audit log.)"""
    docs = objects("sunk", sets=ALL_ON)
    operator = grants(operator_role(docs)["rules"])
    assert {v for g, r, v in operator if r == "secrets"} == {"get", "create", "patch"}
    assert not {v for g, r, v in operator if v in ("update", "deletecollection", "*")} - {"update"}
    assert {r for g, r, v in operator if v == "update"} == {
        "slurmclusters/finalizers",
        "nodesets/finalizers",
    }
    assert not [x for x in operator if x[0] in ("coordination.k8s.io", "events.k8s.io")]
    assert not [x for x in operator if x[1] == "nodesets/scale"]
    # controller.ha's shared state claim: made and applied, never listed or deleted
    assert {v for g, r, v in operator if r == "persistentvolumeclaims"} == {
        "get",
        "create",
        "patch",
    }
    assert ("", "pods", "delete") in operator and ("", "secrets", "delete") not in operator
    (lease,) = [d for d in docs if d["metadata"]["name"] == "rel-sunk-operator-leader-election"
                and d["kind"] == "Role"]  # fmt: skip
    assert lease["metadata"]["namespace"] == "tenant-slurm"
    assert grants(lease["rules"]) == {
        ("coordination.k8s.io", "leases", v) for v in ("create", "get", "update")
    }
    assert all(
        r.get("resourceNames") == ["sunk-operator"] for r in lease["rules"] if "get" in r["verbs"]
    )


def test_watch_namespaces_get_roles_and_nodes_stay_cluster_wide(objects):
    docs = objects("sunk", sets=("operator.watchNamespaces={a,b,a}",))
    cluster = grants(operator_role(docs)["rules"])
    # Cluster-scoped: Nodes; and the lock hook, which evicts whatever runs on a locked Node.
    assert {r for g, r, v in cluster} == {
        "nodes",
        "nodes/status",
        "tokenreviews",
        "pods",
        "pods/eviction",
    }
    assert {v for g, r, v in cluster if r == "pods"} == {"list"}
    for ns in ("a", "b"):
        role = grants(operator_role(docs, "Role", ns)["rules"])
        assert ("sunk.coreweave.com", "nodesets", "watch") in role
        assert ("", "secrets", "get") in role
        (binding,) = [
            d for d in docs if d["kind"] == "RoleBinding" and d["metadata"].get("namespace") == ns
        ]
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "rel-sunk-operator",
        }
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "rel-sunk-operator", "namespace": "tenant-slurm"}
        ]
    # Same rights as watching everything, only narrower in scope.
    everywhere = grants(operator_role(objects("sunk"))["rules"])
    assert cluster | role == everywhere
    # No hook: no TokenReviews, no evictions, no Pods outside the watched namespaces.
    docs = objects("sunk", sets=("operator.watchNamespaces={a}", "operator.hookPort=0"))
    assert {r for g, r, v in grants(operator_role(docs)["rules"])} == {"nodes", "nodes/status"}


def test_helm_test_pod_has_its_own_minimal_account(objects):
    docs = objects("sunk")
    pod = one(docs, "Pod")
    assert pod["spec"]["serviceAccountName"] == "rel-sunk-operator-test"
    rules = [
        (d["kind"], r)
        for d in docs
        if d["metadata"]["name"] == "rel-sunk-operator-test" and d["kind"].endswith("Role")
        for r in d["rules"]
    ]
    assert rules == [
        (
            "ClusterRole",
            {
                "apiGroups": ["apiextensions.k8s.io"],
                "resources": ["customresourcedefinitions"],
                "resourceNames": [
                    "slurmclusters.sunk.coreweave.com",
                    "nodesets.sunk.coreweave.com",
                ],
                "verbs": ["get"],
            },
        ),
        (
            "Role",
            {
                "apiGroups": ["apps"],
                "resources": ["deployments"],
                "resourceNames": ["rel-sunk-operator"],
                "verbs": ["get"],
            },
        ),
    ]


def test_operator_pod_is_hardened_and_tolerates_the_lock(objects):
    (deploy,) = [d for d in objects("sunk") if d["kind"] == "Deployment"]
    pod = deploy["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    container = pod["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert {"key": "sunk.coreweave.com/lock", "operator": "Exists", "effect": "NoExecute"} in pod[
        "tolerations"
    ]
    assert deploy["spec"]["replicas"] == 2


def test_nodeset_crd_has_scale_status_and_columns(objects):
    (crd,) = [d for d in objects("sunk") if d["metadata"]["name"].startswith("nodesets.")]
    version = crd["spec"]["versions"][0]
    assert version["subresources"]["scale"]["specReplicasPath"] == ".spec.replicas"
    assert "status" in version["subresources"]
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "DESIRED",
        "FEASIBLE",
        "CURRENT",
        "READY",
        "DRAIN",
        "AGE",
    ]


def test_sunk_chart_snapshot(render, snapshot):
    proc = render("sunk", sets=ALL_ON, ns="sunk", api_versions=API_VERSIONS)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == snapshot


def one(docs, kind):
    (doc,) = [d for d in docs if d["kind"] == kind]
    return doc


def test_service_account_create_name_annotations(objects):
    docs = objects(
        "sunk", sets=("operator.serviceAccount.annotations.iam\\.example\\.com/role=ops",)
    )
    (account,) = [d for d in docs if d["metadata"]["name"] == "rel-sunk-operator"
                  and d["kind"] == "ServiceAccount"]  # fmt: skip
    assert account["metadata"]["annotations"] == {"iam.example.com/role": "ops"}
    assert one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == (
        "rel-sunk-operator"
    )

    docs = objects(
        "sunk", sets=("operator.serviceAccount.create=false", "operator.serviceAccount.name=mine")
    )
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount"] == [
        "rel-sunk-operator-test"  # the helm test Pod's, always
    ]
    assert one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "mine"
    bindings = [d for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")]
    operator_bindings = [b for b in bindings if "-test" not in b["metadata"]["name"]]
    assert len(operator_bindings) == 2  # the ClusterRole and the leader-election Role
    for binding in operator_bindings:
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "mine", "namespace": "tenant-slurm"}
        ]

    docs = objects("sunk", sets=("operator.serviceAccount.name=named",))
    accounts = [d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount"]
    assert sorted(accounts) == ["named", "rel-sunk-operator-test"]


def test_common_labels_reach_every_object_and_never_override_the_charts(objects):
    sets = ("commonLabels.team=hpc", "commonLabels.app\\.kubernetes\\.io/name=other")
    docs = objects("sunk", sets=(*sets, *ALL_ON), api_versions=API_VERSIONS)
    for doc in docs:
        labels = doc["metadata"]["labels"]
        assert labels["team"] == "hpc", doc["kind"]
        if doc["kind"] != "CustomResourceDefinition":
            assert labels["app.kubernetes.io/name"] == "sunk", doc["kind"]
    for kind in ("Deployment", "DaemonSet"):
        template = one(docs, kind)["spec"]["template"]["metadata"]["labels"]
        assert template["team"] == "hpc"
        assert "team" not in one(docs, kind)["spec"]["selector"]["matchLabels"]


def test_pod_annotations_labels_priority_class_extra_args_and_env(objects):
    docs = objects(
        "sunk",
        sets=(
            "operator.podAnnotations.example\\.com/note=hello",
            "operator.podLabels.team=hpc",
            "operator.podLabels.app\\.kubernetes\\.io/component=hijack",
            "operator.priorityClassName=system-cluster-critical",
            "operator.extraArgs={--verbose,--peering=x}",
            "operator.extraEnv[0].name=HTTPS_PROXY",
            "operator.extraEnv[0].value=http://proxy:3128",
        ),
    )
    deploy = one(docs, "Deployment")
    meta = deploy["spec"]["template"]["metadata"]
    assert meta["annotations"] == {"example.com/note": "hello"}
    assert meta["labels"]["team"] == "hpc"
    assert meta["labels"]["app.kubernetes.io/component"] == "operator"  # the selector holds
    pod = deploy["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    container = pod["containers"][0]
    assert container["args"][-2:] == ["--verbose", "--peering=x"]
    assert container["args"][0] == "--log-level=info"
    assert container["env"][-1] == {"name": "HTTPS_PROXY", "value": "http://proxy:3128"}
    assert [e["name"] for e in container["env"][:2]] == ["POD_NAME", "POD_NAMESPACE"]


def test_replicas_are_spread_and_protected_by_a_pdb(objects):
    docs = objects("sunk")
    deploy = one(docs, "Deployment")
    selector = deploy["spec"]["selector"]["matchLabels"]
    (spread,) = deploy["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert spread["whenUnsatisfiable"] == "ScheduleAnyway" and spread["maxSkew"] == 1
    assert spread["labelSelector"]["matchLabels"] == selector
    assert spread["matchLabelKeys"] == ["pod-template-hash"]
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": selector}}

    strict = objects(
        "sunk",
        sets=(
            "operator.topologySpread.whenUnsatisfiable=DoNotSchedule",
            "operator.topologySpread.topologyKey=topology.kubernetes.io/zone",
            "operator.podDisruptionBudget.maxUnavailable=50%",
        ),
    )
    (spread,) = one(strict, "Deployment")["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread["whenUnsatisfiable"] == "DoNotSchedule"
    assert spread["topologyKey"] == "topology.kubernetes.io/zone"
    assert one(strict, "PodDisruptionBudget")["spec"]["maxUnavailable"] == "50%"

    single = objects("sunk", sets=("operator.replicas=1",))
    assert not [d for d in single if d["kind"] == "PodDisruptionBudget"]
    assert "topologySpreadConstraints" not in one(single, "Deployment")["spec"]["template"]["spec"]
    off = objects(
        "sunk",
        sets=(
            "operator.podDisruptionBudget.enabled=false",
            "operator.topologySpread.enabled=false",
        ),
    )
    assert not [d for d in off if d["kind"] == "PodDisruptionBudget"]
    assert "topologySpreadConstraints" not in one(off, "Deployment")["spec"]["template"]["spec"]


def test_device_plugin_takes_its_pull_policy(objects):
    sets = ("nvidia-device-plugin.enabled=true", "nvidia-device-plugin.image.pullPolicy=Always")
    (daemonset,) = [d for d in objects("sunk", sets=sets) if d["kind"] == "DaemonSet"]
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    assert container["imagePullPolicy"] == "Always"


def _tolerations(docs, kind):
    return one(docs, kind)["spec"]["template"]["spec"]["tolerations"]


def test_a_tolerations_list_of_your_own_keeps_the_lock_toleration(objects):
    """The lock taint is NoExecute: an operator or device plugin Pod without it would be
    evicted from every Node a Slurm job locks."""
    lock = {"key": "sunk.coreweave.com/lock", "operator": "Exists", "effect": "NoExecute"}
    on = ("nvidia-device-plugin.enabled=true",)
    docs = objects("sunk", sets=on)
    assert _tolerations(docs, "Deployment") == [lock]  # the default list, no duplicate
    assert _tolerations(docs, "DaemonSet")[-1] == lock
    own = objects(
        "sunk",
        sets=(
            *on,
            "operator.tolerations[0].key=dedicated",
            "operator.tolerations[0].operator=Exists",
            "nvidia-device-plugin.tolerations=null",
        ),
    )
    assert _tolerations(own, "Deployment") == [{"key": "dedicated", "operator": "Exists"}, lock]
    assert _tolerations(own, "DaemonSet") == [lock]
    # A toleration that already covers it (every taint; the lock key without an effect) is
    # enough; one for another effect is not.
    for given, added in (
        ({"operator": "Exists"}, False),
        ({"key": "sunk.coreweave.com/lock", "operator": "Exists"}, False),
        ({"key": "sunk.coreweave.com/lock", "operator": "Exists", "effect": "NoSchedule"}, True),
    ):
        sets = [f"operator.tolerations[0].{k}={v}" for k, v in given.items()]
        tolerations = _tolerations(objects("sunk", sets=tuple(sets)), "Deployment")
        assert tolerations == ([given, lock] if added else [given])
