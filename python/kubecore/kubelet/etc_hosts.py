"""The /etc/hosts the kubelet manages for a pod's containers (upstream kubelet_pods.go
makeHostsMount, managedHostsFileContent, nodeHostsFileContent).

The file is `<root>/pods/<uid>/etc-hosts`, mounted at /etc/hosts into every container that does
not mount something there itself, once the pod has IPs:
- a pod network pod: a header, localhost and the IPv6 names, then one line per pod IP,
  `<ip>\\t<hostname>` or, with spec.subdomain, `<ip>\\t<hostname>.<subdomain>.<ns>.svc.cluster.local\\t<hostname>`;
- a hostNetwork pod: the node's own /etc/hosts under a "(host network)" header;
- both: spec.hostAliases appended after "# Entries added by HostAliases.", one `ip\\tname\\tname` line each.
The file is rewritten (write to a temporary name, rename) whenever a container is configured.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kubecore.kubelet import podutil

Obj = dict[str, Any]
HEADER = "# Kubernetes-managed hosts file.\n"
HEADER_HOST_NETWORK = "# Kubernetes-managed hosts file (host network).\n"
CLUSTER_DOMAIN = "cluster.local"
NODE_HOSTS = "/etc/hosts"
FIXED = ("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\n"
         "fe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")


def hostname_and_domain(pod: Obj) -> tuple[str, str]:
    """GeneratePodHostNameAndDomain: spec.hostname or the pod name (63 characters at most), and
    `<subdomain>.<namespace>.svc.cluster.local` when spec.subdomain is set."""
    m, spec = podutil.meta(pod), podutil.spec(pod)
    hostname = str(spec.get("hostname") or m.get("name") or "")[:63].rstrip("-.")
    subdomain = str(spec.get("subdomain") or "")
    domain = f"{subdomain}.{m.get('namespace')}.svc.{CLUSTER_DOMAIN}" if subdomain else ""
    return hostname, domain


def _aliases(pod: Obj) -> str:
    aliases = podutil.spec(pod).get("hostAliases") or []
    if not aliases:
        return ""
    lines = [f"{a.get('ip')}\t{chr(9).join(str(h) for h in a.get('hostnames') or [])}\n" for a in aliases]
    return "\n# Entries added by HostAliases.\n" + "".join(lines)


def content(pod: Obj, pod_ips: list[str], *, node_hosts: str = NODE_HOSTS) -> str:
    if podutil.is_host_network(pod):
        try:
            base = Path(node_hosts).read_text()
        except OSError:
            base = ""
        return HEADER_HOST_NETWORK + base + _aliases(pod)
    hostname, domain = hostname_and_domain(pod)
    names = f"{hostname}.{domain}\t{hostname}" if domain else hostname
    return HEADER + FIXED + "".join(f"{ip}\t{names}\n" for ip in pod_ips) + _aliases(pod)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
