"""The Kubernetes API server: an aiohttp application over kubecore.store."""
