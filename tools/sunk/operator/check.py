"""`sunk-operator check`: the `sunk` chart's helm test — our CRDs are Established and the
operator Deployment has an available replica."""

from __future__ import annotations

import argparse
import asyncio
import time

from sunk.operator.client import Kube, path_for


async def _crd_established(kube: Kube, name: str) -> bool:
    crd = await kube.get(
        path_for("apiextensions.k8s.io/v1", "customresourcedefinitions", None, name)
    )
    conds = (crd or {}).get("status", {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conds)


async def _deployment_available(kube: Kube, ref: str) -> bool:
    namespace, name = ref.split("/", 1)
    deploy = await kube.get(path_for("apps/v1", "deployments", namespace, name))
    return bool(deploy) and (deploy.get("status") or {}).get("availableReplicas", 0) >= 1


async def run_check(args: argparse.Namespace) -> int:
    async with await Kube.connect(args.kubeconfig) as kube:
        deadline = time.monotonic() + args.timeout
        while True:
            failing = [
                f"CRD {c} not Established" for c in args.crd if not await _crd_established(kube, c)
            ]
            failing += [
                f"Deployment {d} has no available replica"
                for d in args.deployment
                if not await _deployment_available(kube, d)
            ]
            if not failing:
                print("ok: " + ", ".join([*args.crd, *args.deployment]))
                return 0
            if time.monotonic() > deadline:
                print("check failed: " + "; ".join(failing))
                return 1
            await asyncio.sleep(2)
