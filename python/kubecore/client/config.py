"""Where the API server is and how to authenticate to it: `ClientConfig` (client-go's rest.Config)
and loading one from a kubeconfig file (clientcmd) or from inside a pod (InClusterConfig).

What a kubeconfig may say and what is honoured: the `current-context` (or a `context=` override),
that context's cluster (`server`, `certificate-authority`, `certificate-authority-data`,
`insecure-skip-tls-verify`, `tls-server-name`) and user (`client-certificate(-data)`,
`client-key(-data)`, `token`, `tokenFile`, `username`/`password`) and the context's `namespace`.
Relative file paths are relative to the kubeconfig's directory, as clientcmd resolves them.
Exec/auth-provider plugins are not supported and say so.

Rate limiting and retries are part of the config, not hidden constants: `qps` (<= 0: unlimited)
and `burst` feed the client's token bucket; `max_retries` bounds retries of 429/5xx answers.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ConfigError(ValueError):
    """The kubeconfig is missing, malformed, or asks for something this client cannot do."""


@dataclass
class ClientConfig:
    """Everything the REST client needs to reach one API server."""

    server: str
    ca_file: str | None = None
    ca_data: bytes | None = None
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: bytes | None = None
    key_data: bytes | None = None
    token: str | None = None
    token_file: str | None = None
    username: str | None = None
    password: str | None = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    namespace: str = "default"
    user_agent: str = "kubecore-client/0.1"
    qps: float = 50.0
    """Sustained requests per second the client allows itself; <= 0 means no limit."""
    burst: int = 100
    """Requests that may go out at once before `qps` applies."""
    max_retries: int = 10
    """How many times one request is retried after a 429/5xx or a dropped connection."""
    timeout: float | None = None
    """Per-request timeout in seconds for non-watch requests (None: none)."""
    extra_headers: dict[str, str] = field(default_factory=dict)

    def ssl_context(self) -> ssl.SSLContext | bool:
        """The TLS settings for aiohttp: False for plain http or insecure, else a context."""
        if not self.server.startswith("https://"):
            return False
        if self.insecure_skip_tls_verify:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif self.ca_data is not None:
            ctx = ssl.create_default_context(cadata=self.ca_data.decode())
        else:
            ctx = ssl.create_default_context(cafile=self.ca_file)
        if self.cert_file or self.cert_data:
            _load_client_cert(ctx, self)
        return ctx

    def auth_headers(self) -> dict[str, str]:
        """Authorization header for bearer tokens (re-read from `token_file` each call) or basic auth."""
        token = self.token
        if self.token_file:
            try:
                token = Path(self.token_file).read_text().strip()
            except OSError as e:
                raise ConfigError(f"cannot read token file {self.token_file}: {e}") from e
        if token:
            return {"Authorization": f"Bearer {token}"}
        if self.username is not None and self.password is not None:
            raw = f"{self.username}:{self.password}".encode()
            return {"Authorization": "Basic " + base64.b64encode(raw).decode()}
        return {}


def _load_client_cert(ctx: ssl.SSLContext, cfg: ClientConfig) -> None:
    """ssl only loads certificates from files: inline data goes through private temp files."""
    if cfg.cert_file and cfg.key_file:
        ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
        return
    with tempfile.TemporaryDirectory(prefix="kubecore-cert-") as d:
        cert = Path(cfg.cert_file) if cfg.cert_file else Path(d) / "cert.pem"
        key = Path(cfg.key_file) if cfg.key_file else Path(d) / "key.pem"
        if cfg.cert_data is not None:
            cert.write_bytes(cfg.cert_data)
        if cfg.key_data is not None:
            key.write_bytes(cfg.key_data)
        os.chmod(d, 0o700)
        ctx.load_cert_chain(str(cert), str(key))


def _named(entries: Any, name: str, what: str) -> dict[str, Any]:
    for entry in entries or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(what)
            return body if isinstance(body, dict) else {}
    raise ConfigError(f"kubeconfig has no {what} named {name!r}")


def _data(value: Any, what: str) -> bytes | None:
    if value is None:
        return None
    try:
        return base64.b64decode(value)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{what} is not valid base64") from e


def _path(value: Any, base: Path) -> str | None:
    if not value:
        return None
    p = Path(str(value)).expanduser()
    return str(p if p.is_absolute() else base / p)


def config_from_dict(doc: dict[str, Any], *, base_dir: Path, context: str | None = None) -> ClientConfig:
    """A ClientConfig from a decoded kubeconfig document (paths resolved against `base_dir`)."""
    ctx_name = context or doc.get("current-context")
    if not ctx_name:
        raise ConfigError("kubeconfig has no current-context and none was given")
    ctx = _named(doc.get("contexts"), str(ctx_name), "context")
    cluster = _named(doc.get("clusters"), str(ctx.get("cluster", "")), "cluster")
    user: dict[str, Any] = _named(doc.get("users"), str(ctx["user"]), "user") if ctx.get("user") else {}
    if "exec" in user or "auth-provider" in user:
        raise ConfigError("kubeconfig users with exec or auth-provider plugins are not supported")
    server = cluster.get("server")
    if not server:
        raise ConfigError(f"cluster {ctx.get('cluster')!r} has no server")
    return ClientConfig(
        server=str(server).rstrip("/"),
        ca_file=_path(cluster.get("certificate-authority"), base_dir),
        ca_data=_data(cluster.get("certificate-authority-data"), "certificate-authority-data"),
        insecure_skip_tls_verify=bool(cluster.get("insecure-skip-tls-verify", False)),
        tls_server_name=cluster.get("tls-server-name"),
        cert_file=_path(user.get("client-certificate"), base_dir),
        key_file=_path(user.get("client-key"), base_dir),
        cert_data=_data(user.get("client-certificate-data"), "client-certificate-data"),
        key_data=_data(user.get("client-key-data"), "client-key-data"),
        token=user.get("token"),
        token_file=_path(user.get("tokenFile"), base_dir),
        username=user.get("username"),
        password=user.get("password"),
        namespace=str(ctx.get("namespace") or "default"),
    )


def load_kubeconfig(path: str | os.PathLike[str] | None = None, *, context: str | None = None) -> ClientConfig:
    """Load `path`, else the first file of $KUBECONFIG, else ~/.kube/config."""
    if path is None:
        env = os.environ.get("KUBECONFIG", "")
        first = next((p for p in env.split(os.pathsep) if p), None)
        path = first or Path.home() / ".kube" / "config"
    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text())
    except OSError as e:
        raise ConfigError(f"cannot read kubeconfig {p}: {e}") from e
    except yaml.YAMLError as e:
        raise ConfigError(f"kubeconfig {p} is not valid YAML: {e}") from e
    if not isinstance(doc, dict):
        raise ConfigError(f"kubeconfig {p} is not a mapping")
    return config_from_dict(doc, base_dir=p.resolve().parent, context=context)


def in_cluster_config(*, sa_dir: Path = SERVICE_ACCOUNT_DIR) -> ClientConfig:
    """The pod's service account: KUBERNETES_SERVICE_HOST/PORT, its token file and CA."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ConfigError("not running in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set")
    if ":" in host:
        host = f"[{host}]"
    ns_file = sa_dir / "namespace"
    namespace = ns_file.read_text().strip() if ns_file.exists() else "default"
    return ClientConfig(server=f"https://{host}:{port}", ca_file=str(sa_dir / "ca.crt"),
                        token_file=str(sa_dir / "token"), namespace=namespace)
