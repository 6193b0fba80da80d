# Shared set-up for scripts/demo.sh and scripts/test.sh. Sourced, not run.
#
# Installs what is missing and nothing else, so running it twice is cheap:
#   1. Debian packages (compilers, image libraries, simdjson, GoogleTest) via apt-get;
#   2. a project-local virtual environment in .venv with the Python packages listed in
#      requirements/*.txt (re-installed only when those files change).
# Every step stops the script with a message naming what failed.
set -euo pipefail

STOKER_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$STOKER_ROOT/.venv"
PY="$VENV/bin/python"

step() { printf '\n==> %s\n' "$*"; }
die() { printf '\nerror: %s\n' "$*" >&2; exit 1; }

# Debian package names. libjpeg62-turbo-dev is libjpeg-turbo with the libjpeg API;
# libonig-dev is the regex engine of Hugging Face tokenizers, libutf8proc-dev does NFC.
APT_PACKAGES=(
  build-essential pkg-config ccache
  python3 python3-venv python3-dev
  libjpeg62-turbo-dev libpng-dev libwebp-dev libsimdjson-dev libxxhash-dev libgtest-dev
  libhwy-dev libonig-dev libutf8proc-dev libcurl4-openssl-dev libssl-dev
)

ensure_apt_packages() {
  local missing=() pkg
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
      || missing+=("$pkg")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "Debian packages: all present"
    return
  fi
  step "Installing Debian packages: ${missing[*]}"
  command -v apt-get >/dev/null || die "apt-get not found: this set-up expects Debian 12. Install the equivalents of: ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || die "need root (or sudo) to install: ${missing[*]}"
    sudo="sudo"
  fi
  $sudo apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    || die "apt-get install failed for: ${missing[*]}"
}

# Creates .venv if needed and installs requirements/<name>.txt for each name given.
ensure_venv() {
  local python="${STOKER_PYTHON:-python3}"
  command -v "$python" >/dev/null || die "$python not found (Python >= 3.10 is required)"
  if ! "$PY" -c 'import sys' 2>/dev/null; then
    step "Creating the virtual environment in .venv"
    rm -rf "$VENV"
    "$python" -m venv "$VENV" || die "could not create .venv (on Debian: apt-get install python3-venv)"
    "$PY" -m pip install -q --upgrade pip || die "could not upgrade pip in .venv"
  fi
  local name stamp want
  for name in "$@"; do
    stamp="$VENV/.stoker-requirements-$name"
    want="$(sha256sum "$STOKER_ROOT/requirements/$name.txt" | cut -d' ' -f1)"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
      echo "Python packages ($name): up to date"
      continue
    fi
    step "Installing Python packages from requirements/$name.txt"
    "$PY" -m pip install -q -r "$STOKER_ROOT/requirements/$name.txt" \
      || die "pip install -r requirements/$name.txt failed"
    echo "$want" > "$stamp"
  done
}

# Builds the extension and installs the package into .venv (editable), reusing the
# CMake tree in build/<name>. Extra arguments are scikit-build-core settings, e.g.
# cmake.define.STOKER_BUILD_TESTS=ON.
install_stoker() {
  local build_dir="$1"; shift
  step "Building and installing stoker (build tree: $build_dir)"
  local args=(--no-build-isolation --no-deps -q -e "$STOKER_ROOT" "-Cbuild-dir=$build_dir")
  local setting
  for setting in "$@"; do args+=("-C$setting"); done
  (cd "$STOKER_ROOT" && PATH="$VENV/bin:$PATH" "$PY" -m pip install "${args[@]}") \
    || die "building stoker failed (see the compiler output above)"
}
