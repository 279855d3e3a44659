"""Client machinery for talking to a Kubernetes API server: REST client, informers, work queues,
leader election and event recording (issue 4)."""
