import pytest

from kubecore.api.registry import Registry, ResourceType, builtin_registry, subresource_kind, version_priority_key

R = builtin_registry()


@pytest.mark.parametrize("group,version,resource,kind,namespaced,short", [
    ("", "v1", "pods", "Pod", True, ("po",)),
    ("", "v1", "namespaces", "Namespace", False, ("ns",)),
    ("", "v1", "nodes", "Node", False, ("no",)),
    ("", "v1", "services", "Service", True, ("svc",)),
    ("", "v1", "resourcequotas", "ResourceQuota", True, ("quota",)),
    ("", "v1", "limitranges", "LimitRange", True, ("limits",)),
    ("", "v1", "endpoints", "Endpoints", True, ("ep",)),
    ("apps", "v1", "deployments", "Deployment", True, ("deploy",)),
    ("apps", "v1", "statefulsets", "StatefulSet", True, ("sts",)),
    ("batch", "v1", "cronjobs", "CronJob", True, ("cj",)),
    ("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True, ("hpa",)),
    ("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True, ("netpol",)),
    ("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False, ("crd", "crds")),
    ("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, ("pc",)),
    ("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, ("sc",)),
    ("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",)),
    ("events.k8s.io", "v1", "events", "Event", True, ("ev",)),
    ("coordination.k8s.io", "v1", "leases", "Lease", True, ()),
    ("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True, ()),
    ("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, ()),
])
def test_lookup(group, version, resource, kind, namespaced, short):
    rt = R.get(group, version, resource)
    assert rt is not None and rt.kind == kind and rt.namespaced is namespaced and rt.short_names == short
    assert R.by_kind(group, version, kind) is rt
    assert rt.list_kind == kind + "List"


def test_counts_and_order():
    assert len(R) == 38
    assert R.groups() == ["", "apps", "events.k8s.io", "autoscaling", "batch", "networking.k8s.io", "policy",
                          "rbac.authorization.k8s.io", "storage.k8s.io", "apiextensions.k8s.io",
                          "scheduling.k8s.io", "coordination.k8s.io", "discovery.k8s.io"]
    assert R.group_versions()[0] == ("", "v1")
    names = [rt.resource for rt in R.resources("", "v1")]
    assert names == sorted(names) and names[0] == "bindings"
    assert R.preferred_version("autoscaling") == "v2"


def test_keys_and_api_version():
    pods, deploy, nodes = R.get("", "v1", "pods"), R.get("apps", "v1", "deployments"), R.get("", "v1", "nodes")
    assert pods.key("default", "x") == b"/registry/pods/default/x"
    assert deploy.key("ns", "d") == b"/registry/apps/deployments/ns/d"
    assert nodes.key(None, "n1") == b"/registry/nodes/n1"
    assert deploy.api_version == "apps/v1" and pods.api_version == "v1"
    assert pods.list_prefix("a") == b"/registry/pods/a/" and pods.list_prefix(None) == b"/registry/pods/"


def test_verbs_categories_subresources():
    assert R.get("", "v1", "bindings").verbs == ("create",)
    assert "deletecollection" not in R.get("", "v1", "namespaces").verbs
    assert R.get("", "v1", "pods").subresources == ("attach", "binding", "eviction", "exec", "log", "portforward",
                                                    "status")
    assert R.get("apps", "v1", "deployments").subresources == ("scale", "status")
    alls = {rt.resource for rt in R.all() if "all" in rt.categories}
    assert alls == {"pods", "services", "replicationcontrollers", "daemonsets", "deployments", "replicasets",
                    "statefulsets", "horizontalpodautoscalers", "cronjobs", "jobs"}
    assert subresource_kind(R.get("apps", "v1", "deployments"), "scale") == ("autoscaling", "v1", "Scale")


def test_add_remove_crd():
    reg = builtin_registry()
    ct = ResourceType("stable.example.com", "v1", "crontabs", "CronTab", True, "crontab", short_names=("ct",))
    reg.add(ct)
    reg.add(ResourceType("stable.example.com", "v1beta1", "crontabs", "CronTab", True, "crontab"))
    assert reg.groups()[-1] == "stable.example.com"
    assert reg.versions("stable.example.com") == ["v1", "v1beta1"]
    assert reg.by_name("ct")[0] is ct
    reg.remove("stable.example.com", "v1", "crontabs")
    assert reg.get("stable.example.com", "v1", "crontabs") is None
    assert reg.by_kind("stable.example.com", "v1", "CronTab") is None
    assert reg.preferred_version("stable.example.com") == "v1beta1"


def test_version_priority():
    vs = ["v1alpha1", "foo", "v2", "v1beta2", "v1", "v10", "v1beta1", "v11alpha2"]
    assert sorted(vs, key=version_priority_key) == ["v10", "v2", "v1", "v1beta2", "v1beta1", "v11alpha2",
                                                    "v1alpha1", "foo"]


def test_empty_registry():
    reg = Registry()
    with pytest.raises(KeyError):
        reg.preferred_version("apps")
