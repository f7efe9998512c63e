"""A real LDAP directory for the e2e tier: Debian's slapd (``images/ldap``) as a Pod and Service
beside the Slurm cluster, with users that carry POSIX attributes and SSH public keys, and an
``ssh`` client run from a node's network namespace, as a user on the cluster network would."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from sunk.devenv.images import DEV_IMAGE_TAG
from sunk.devenv.nodes import NodeCluster, in_netns
from sunk.models.values import IMAGE_PREFIX
from sunk.operator import names

SUFFIX = "dc=example,dc=org"
ADMIN_DN = f"cn=admin,{SUFFIX}"
SERVICE = "ldap"
SECRET = "ldap-admin"
GROUP_GID = 5000


def values(home_dir: str) -> str:
    """The slurm chart's `directoryService` for this directory, and a shared /home."""
    return f"""
directoryService:
  enabled: true
  ldapUri: [ldap://{SERVICE}]
  searchBase: {SUFFIX}
  bindDn: {ADMIN_DN}
  bindPasswordSecret: {{name: {SECRET}}}
login:
  volumes: [{{name: home, hostPath: {{path: {home_dir}, type: DirectoryOrCreate}}}}]
  volumeMounts: [{{name: home, mountPath: /home}}]
compute:
  nodes:
    cpu:
      volumes: [{{name: home, hostPath: {{path: {home_dir}, type: DirectoryOrCreate}}}}]
      volumeMounts: [{{name: home, mountPath: /home}}]
"""


def user_ldif(name: str, uid: int, public_key: str) -> str:
    return f"""dn: uid={name},ou=people,{SUFFIX}
objectClass: inetOrgPerson
objectClass: posixAccount
objectClass: ldapPublicKey
uid: {name}
cn: {name}
sn: {name}
uidNumber: {uid}
gidNumber: {GROUP_GID}
homeDirectory: /home/{name}
loginShell: /bin/bash
sshPublicKey: {public_key}
"""


def seed_ldif(members: list[str]) -> str:
    member_lines = "".join(f"memberUid: {m}\n" for m in members)
    return f"""dn: {SUFFIX}
objectClass: dcObject
objectClass: organization
o: example
dc: example

dn: ou=people,{SUFFIX}
objectClass: organizationalUnit
ou: people

dn: ou=groups,{SUFFIX}
objectClass: organizationalUnit
ou: groups

dn: cn=researchers,ou=groups,{SUFFIX}
objectClass: posixGroup
cn: researchers
gidNumber: {GROUP_GID}
{member_lines}"""


def objects(namespace: str, password: str, seed: str) -> list[dict]:
    labels = {"app.kubernetes.io/name": "ldap"}
    pod_spec = {
        "containers": [
            {
                "name": "slapd",
                "image": f"{IMAGE_PREFIX}/ldap:{DEV_IMAGE_TAG}",
                "imagePullPolicy": "Never",
                "env": [
                    {"name": "LDAP_SUFFIX", "value": SUFFIX},
                    {
                        "name": "LDAP_ADMIN_PASSWORD",
                        "valueFrom": {"secretKeyRef": {"name": SECRET, "key": "password"}},
                    },
                ],
                "ports": [{"containerPort": 389}],
                "readinessProbe": {"tcpSocket": {"port": 389}, "periodSeconds": 2},
                "volumeMounts": [{"name": "seed", "mountPath": "/etc/ldap/seed"}],
            }
        ],
        "volumes": [{"name": "seed", "configMap": {"name": "ldap-seed"}}],
        # jobs lock their Nodes: the directory must stay through the lock tests
        "tolerations": [names.LOCK_TOLERATION],
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": SECRET, "namespace": namespace},
            "stringData": {"password": password},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "ldap-seed", "namespace": namespace},
            "data": {"10-base.ldif": seed},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": SERVICE, "namespace": namespace, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": pod_spec},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, "namespace": namespace},
            "spec": {"selector": labels, "ports": [{"port": 389, "targetPort": 389}]},
        },
    ]


@dataclass
class Directory:
    """The directory of one e2e run: its objects, and users added through slapd itself."""

    cluster: NodeCluster
    namespace: str
    password: str

    def deploy(self, seed: str) -> None:
        self.cluster.kubectl("create", "namespace", self.namespace)
        manifest = yaml.safe_dump_all(objects(self.namespace, self.password, seed))
        self.cluster.kubectl("apply", "-f", "-", input=manifest.encode())
        self.cluster.kubectl(
            "rollout", "status", f"deployment/{SERVICE}", "-n", self.namespace, "--timeout=180s",
            timeout=200,
        )  # fmt: skip

    def add(self, ldif: str) -> None:
        """``ldapadd`` as the directory's administrator, in the slapd Pod."""
        self.cluster.kubectl(
            "exec", "-i", "-n", self.namespace, f"deployment/{SERVICE}", "--",
            "ldapadd", "-x", "-H", "ldap://127.0.0.1", "-D", ADMIN_DN, "-w", self.password,
            input=ldif.encode(),
        )  # fmt: skip


@dataclass
class SshClient:
    """OpenSSH's client in a node's network namespace (where kube-proxy routes Service
    addresses), with its own known_hosts: host keys must match across login Pod restarts."""

    netns: str
    known_hosts: Path

    def run(
        self, key: Path, user: str, host: str, command: str, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        argv = [
            "ssh", "-i", str(key), "-F", "/dev/null",
            "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "ConnectTimeout=10",
            "-o", f"UserKnownHostsFile={self.known_hosts}",
            "-o", "StrictHostKeyChecking=accept-new" if not self.known_hosts.exists()
            else "StrictHostKeyChecking=yes",
            f"{user}@{host}", command,
        ]  # fmt: skip
        return subprocess.run(
            in_netns(self.netns, argv), capture_output=True, text=True, timeout=timeout
        )


def keypair(directory: Path, name: str) -> tuple[Path, str]:
    """A new ed25519 key: (private key file, public key line)."""
    path = directory / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)], check=True
    )
    return path, path.with_suffix(".pub").read_text().strip()
