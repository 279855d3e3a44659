"""The `kubecore` command."""
