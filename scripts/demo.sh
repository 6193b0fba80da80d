#!/usr/bin/env bash
# Sets up what is missing, builds Stoker, and runs `stoker demo` on a dataset it
# generates in ./stoker-demo-data. Extra arguments go to `stoker demo`
# (see `.venv/bin/stoker demo --help`).
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"

ensure_apt_packages
ensure_venv build demo
install_stoker build/release
step "Running stoker demo"
cd "$STOKER_ROOT"
exec "$VENV/bin/stoker" demo "$@"
