"""kubecore: a Kubernetes-compatible cluster in one Python wheel."""

__version__ = "0.1.0"
