#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what it needs, then runs cargo test and pytest.
#   bash tests/run.sh            (as root, or with sudo available, for the system packages)
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

need_apt=()
command -v etcd >/dev/null 2>&1 || need_apt+=(etcd-server)
command -v containerd >/dev/null 2>&1 || need_apt+=(containerd)
command -v runc >/dev/null 2>&1 || need_apt+=(runc)
[ -x /usr/lib/cni/bridge ] || need_apt+=(containernetworking-plugins)
dpkg -s busybox-static >/dev/null 2>&1 || need_apt+=(busybox-static)  # the image builder needs the static busybox
if [ ${#need_apt[@]} -gt 0 ]; then
  step "installing system packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  if ! { $SUDO apt-get install -y -q "${need_apt[@]}" || { $SUDO apt-get update -q && $SUDO apt-get install -y -q "${need_apt[@]}"; }; }; then
    echo "could not install ${need_apt[*]}: install them by hand (Debian: apt-get install ${need_apt[*]}) and rerun" >&2
    exit 1
  fi
fi

step "building kubecore (release) and installing the test dependencies"
python3 -m pip install -q -e ".[test]"

step "cargo test (rust/store, rust/raft, rust/watchcache, rust/fieldpath)"
cargo test -q --workspace --exclude kubecore-py

step "pytest"
python3 -m pytest -q "$@"
