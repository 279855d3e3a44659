"""kubecore.api — the resource model: registry, Status errors, selectors, metadata rules.

Pure Python (msgspec only); the API server (kubecore.apiserver) is built on it. See INTERFACE.md.
"""
