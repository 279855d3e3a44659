"""Writing a set of files into a volume directory so that a reader sees either the old set or the
new one, never a mix (upstream pkg/volume/util/atomic_writer.go), for configMap, secret,
downwardAPI and projected volumes.

Layout of a target directory after `write(target, payload)`:

    ..2026_01_02_03_04_05.123456/   the files of this version, with their modes
    ..data -> ..2026_01_02_03_04_05.123456
    key    -> ..data/key              one symlink per top-level name of the payload

Steps (the order is the guarantee): validate every path (relative, no `..` element, no leading
`..`); if the current version holds exactly the payload (same paths, bytes and modes), stop;
write the new version into a fresh timestamped directory; point `..data_tmp` at it and rename
it over `..data` (rename is atomic: this is the switch); add symlinks for new top-level names;
remove the previous version and the top-level names no longer in the payload.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

DATA_DIR = "..data"
DATA_TMP = "..data_tmp"


class PayloadError(ValueError):
    """A path in the payload may not be written (absolute, or leaving the directory)."""


@dataclass(frozen=True)
class FileProjection:
    data: bytes
    mode: int


def validate_path(path: str) -> None:
    if not path:
        raise PayloadError("invalid path: must not be empty")
    if len(path) > 4096:
        raise PayloadError(f"invalid path: must be less than or equal to 4096 characters: {path!r}")
    if os.path.isabs(path):
        raise PayloadError(f"invalid path: must be relative path: {path}")
    parts = path.split("/")
    if ".." in parts:
        raise PayloadError(f"invalid path: must not contain '..': {path}")
    if path.startswith(".."):
        raise PayloadError(f"invalid path: must not start with '..': {path}")


def _current(target: Path) -> Path | None:
    link = target / DATA_DIR
    if not link.is_symlink():
        return None
    version = target / os.readlink(link)
    return version if version.is_dir() else None


def _same(version: Path, payload: dict[str, FileProjection]) -> bool:
    found = {str(p.relative_to(version)) for p in version.rglob("*") if p.is_file() and not p.is_symlink()}
    if found != set(payload):
        return False
    for path, proj in payload.items():
        f = version / path
        if f.read_bytes() != proj.data or (f.stat().st_mode & 0o7777) != proj.mode:
            return False
    return True


def _write_version(target: Path, payload: dict[str, FileProjection]) -> Path:
    stamp = time.strftime("%Y_%m_%d_%H_%M_%S", time.gmtime())
    version = Path(tempfile.mkdtemp(prefix=f"..{stamp}.", dir=target))
    os.chmod(version, 0o755)
    for path, proj in payload.items():
        f = version / path
        f.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        f.write_bytes(proj.data)
        os.chmod(f, proj.mode)
    return version


def _top_level(payload: dict[str, FileProjection]) -> set[str]:
    return {p.split("/", 1)[0] for p in payload}


def write(target: str | Path, payload: dict[str, FileProjection]) -> bool:
    """Make `target` hold exactly `payload`; False when it already did (nothing written)."""
    target = Path(target)
    for path in payload:
        validate_path(path)
    target.mkdir(parents=True, exist_ok=True)
    old = _current(target)
    if old is not None and _same(old, payload):
        return False
    old_names = {p.name for p in old.iterdir()} if old is not None else set()
    version = _write_version(target, payload)
    tmp = target / DATA_TMP
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(version.name, tmp)
    os.rename(tmp, target / DATA_DIR)
    names = _top_level(payload)
    for name in names:
        link = target / name
        if not link.is_symlink():
            os.symlink(f"{DATA_DIR}/{name}", link)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    for name in old_names - names:
        stale = target / name
        if stale.is_symlink():
            stale.unlink()
    return True
