{{/*
The operator's permissions: exactly the requests its code makes (tools/sunk/operator,
tools/sunk/syncer, kopf's watches). The cluster tier checks this against the API server's audit
log: every request allowed, every grant used or listed with its reason in
tests/cluster/rbac_unused.yaml.
*/}}

{{/* Rules on namespaced resources: in a ClusterRole, or in a Role per watched namespace. */}}
{{- define "sunk.operatorRules.namespaced" -}}
# SlurmClusters and NodeSets: read and watched; the NodeSet safe-removal finalizer (patch).
- apiGroups: [sunk.coreweave.com]
  resources: [slurmclusters]
  verbs: [get, list, watch]
- apiGroups: [sunk.coreweave.com]
  resources: [nodesets]
  verbs: [get, list, watch, patch]
# Their status: conditions and counters.
- apiGroups: [sunk.coreweave.com]
  resources: [slurmclusters/status, nodesets/status]
  verbs: [patch]
# The objects made for them carry blockOwnerDeletion owner references, which the
# OwnerReferencesPermissionEnforcement admission plugin allows only with this.
- apiGroups: [sunk.coreweave.com]
  resources: [slurmclusters/finalizers, nodesets/finalizers]
  verbs: [update]
# slurmd Pods: created, annotated (removal, lock state), deleted, watched; the hook reads the
# Pod a token was issued to. The Pod Scheduler lists the Pods that name it, annotates them
# with their job, adds the lock toleration, and deletes those whose job Slurm ended. A
# control-plane Pod that is stuck on an older StatefulSet revision is listed and deleted
# (forced rollback).
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, patch, delete]
# The Syncer's SlurmDrain condition on slurmd Pods; the Pod Scheduler's PodScheduled
# condition on the Pods it places.
- apiGroups: [""]
  resources: [pods/status]
  verbs: [patch]
# The Pod Scheduler binds a Pod where Slurm ran its placeholder job.
- apiGroups: [""]
  resources: [pods/binding]
  verbs: [create]
# Control-plane objects, by server-side apply (a PATCH that creates what is missing). Key
# Secrets are created once and never listed, changed or deleted.
- apiGroups: [""]
  resources: [services, configmaps, secrets]
  verbs: [get, create, patch]
- apiGroups: [apps]
  resources: [statefulsets, deployments]
  verbs: [get, list, watch, create, patch]
# slurmctld's shared state claim (controller.ha), by server-side apply; never deleted (it is
# garbage-collected with its SlurmCluster, or kept by controller.keepStateOnDelete).
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [get, create, patch]
# Each component's own ServiceAccount (no token, bound to nothing), by server-side apply.
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [get, create, patch]
# PodDisruptionBudgets of the controller and login (controller.podDisruptionBudget,
# login.podDisruptionBudget), by server-side apply; deleted when switched off.
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, create, patch, delete]
# Each cluster's NetworkPolicies (networkPolicy), by server-side apply; deleted when
# switched off or when their component goes.
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, create, patch, delete]
# Events on SlurmClusters, NodeSets and slurmd Pods (written on changes, never updated).
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- if .Values.moco.enabled }}
# MOCO accounting databases, by server-side apply.
- apiGroups: [moco.cybozu.com]
  resources: [mysqlclusters]
  verbs: [get, create, patch]
{{- end }}
{{- end -}}

{{/* Rules on cluster-scoped resources, and what the lock hook does in every namespace. */}}
{{- define "sunk.operatorRules.cluster" -}}
# Nodes: feasibility (labels, taints, allocatable), claims by label, the lock taint and
# annotations, the Syncer's drain annotation.
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list, watch, patch]
# The Syncer's SlurmCordon condition.
- apiGroups: [""]
  resources: [nodes/status]
  verbs: [patch]
{{- if .Values.operator.hookPort }}
# The lock hook proves a slurmd Pod's token, then evicts the Pods on its Node that do not
# tolerate the lock, whatever their namespace (the Eviction API honours PodDisruptionBudgets).
- apiGroups: [authentication.k8s.io]
  resources: [tokenreviews]
  verbs: [create]
- apiGroups: [""]
  resources: [pods/eviction]
  verbs: [create]
{{- if .Values.operator.watchNamespaces }}
- apiGroups: [""]
  resources: [pods]
  verbs: [list]
{{- end }}
{{- end }}
{{- if .Values.moco.enabled }}
# Whether MOCO is installed.
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  resourceNames: [mysqlclusters.moco.cybozu.com]
  verbs: [get]
{{- end }}
{{- end -}}
