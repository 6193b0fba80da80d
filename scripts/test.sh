#!/usr/bin/env bash
# Sets up what is missing, builds Stoker with its C++ tests, and runs every test:
#   1. the C++ unit tests (ctest) of the build that the Python package uses;
#   2. the same C++ tests built with AddressSanitizer + UndefinedBehaviorSanitizer;
#   3. the same C++ tests built with ThreadSanitizer;
#   4. the Python tests (pytest).
# Set STOKER_SKIP_SANITIZERS=1 to skip 2 and 3 while iterating locally.
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"

ensure_apt_packages
ensure_venv build test
install_stoker build/dev cmake.define.STOKER_BUILD_TESTS=ON cmake.build-type=RelWithDebInfo

cd "$STOKER_ROOT"
export PATH="$VENV/bin:$PATH"
failed=()

run_ctest() {  # label build-dir
  step "C++ tests ($1)"
  ctest --test-dir "$2" --output-on-failure -j2 || failed+=("ctest ($1)")
}

build_sanitized() {  # build-dir sanitizers
  step "Building the C++ tests with -fsanitize=$2"
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSTOKER_BUILD_PYTHON=OFF \
    -DSTOKER_BUILD_TESTS=ON "-DSTOKER_SANITIZE=$2" >/dev/null \
    && cmake --build "$1" \
    || die "the -fsanitize=$2 build failed"
}

run_ctest "release" build/dev

if [ "${STOKER_SKIP_SANITIZERS:-0}" != "1" ]; then
  build_sanitized build/asan address,undefined
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    run_ctest "ASan+UBSan" build/asan
  build_sanitized build/tsan thread
  TSAN_OPTIONS=halt_on_error=1 run_ctest "TSan" build/tsan
fi

step "Python tests"
"$PY" -m pytest tests/python -q -p no:cacheprovider || failed+=("pytest")

# No output after this point on success: the runners' summaries end the log.
if [ ${#failed[@]} -ne 0 ]; then
  printf '\nFAILED: %s\n' "${failed[*]}" >&2
  exit 1
fi
