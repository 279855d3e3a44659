"""Pod admission plugins that need no store (kubecore.apiserver.admission_pods)."""

from __future__ import annotations

from typing import Any

import pytest

from kubecore.apiserver.admission_pods import NOT_READY, UNREACHABLE, PodAdmission

ADDED = {NOT_READY: {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
         UNREACHABLE: {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}}


@pytest.mark.parametrize(("given", "added"), [
    ([], [NOT_READY, UNREACHABLE]),
    ([{"operator": "Exists"}], []),  # tolerates every taint
    ([{"operator": "Exists", "effect": "NoExecute"}], []),
    # upstream looks at key and effect only: an empty key with another effect tolerates neither
    ([{"operator": "Exists", "effect": "NoSchedule"}], [NOT_READY, UNREACHABLE]),
    ([{"key": NOT_READY, "operator": "Exists"}], [UNREACHABLE]),
    ([{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}], [NOT_READY]),
    ([{"key": NOT_READY, "operator": "Exists", "effect": "NoSchedule"}], [NOT_READY, UNREACHABLE]),
    ([{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}], [NOT_READY, UNREACHABLE]),
])
def test_default_toleration_seconds_adds_what_upstream_adds(given: list[dict[str, Any]], added: list[str]) -> None:
    spec: dict[str, Any] = {"tolerations": [dict(t) for t in given]} if given else {}
    PodAdmission.default_toleration_seconds(spec)
    assert spec["tolerations"] == given + [ADDED[k] for k in added]
