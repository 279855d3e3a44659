"""The stubs in python/kubecore/_native.pyi match the compiled module, and the package type-checks.

Runs, as CI does:
    python -m mypy.stubtest kubecore._native [--allowlist python/kubecore/stubtest-allowlist.txt]
    python -m mypy --strict python/kubecore
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "kubecore"
ALLOWLIST = PACKAGE / "stubtest-allowlist.txt"

pytest.importorskip("mypy", reason="mypy is a test dependency: pip install -e '.[test]'")


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )


def _explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f"$ {' '.join(proc.args)}\nexit status {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"


def test_stubs_match_the_compiled_module() -> None:
    args = ["mypy.stubtest", "kubecore._native", "--mypy-config-file", str(ROOT / "pyproject.toml")]
    if ALLOWLIST.exists():
        args += ["--allowlist", str(ALLOWLIST)]
    proc = _run(args)
    assert proc.returncode == 0, _explain(proc)


def test_package_passes_mypy_strict(tmp_path: Path) -> None:
    proc = _run(["mypy", "--strict", "--cache-dir", str(tmp_path / "mypy-cache"), "python/kubecore"])
    assert proc.returncode == 0, _explain(proc)
