#!/usr/bin/env bash
# ssmcheck as a user gets it (issue 43; ctests install.*, tests/install.cmake):
#   install_test.sh setup|gate|new_c|new_python|deb|cli_profile|cleanup
# setup installs this build into $WORK/staging with `cmake --install`, then moves it to
# $WORK/prefix (so nothing may depend on the path it was installed to) and checks the layout;
# cli_profile configures CMakePresets.json's cli profile into a temporary directory;
# gate, new_c and new_python use that prefix from directories of their own; deb makes the Debian
# package with CPack and runs it unpacked (dpkg-deb -x, never installed); cleanup removes $WORK.
# Every temporary directory is under $WORK (in the build tree) and removed.
# Environment: SSMCHECK_SOURCE, SSMCHECK_BUILD, WORK, CMAKE, CPACK (tests/install.cmake sets them).
set -euo pipefail
step=$1
prefix=$WORK/prefix
fails=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
check() {  # check WHAT COMMAND...: the command's status decides
  local what=$1; shift
  if "$@"; then ok "$what"; else fail "$what"; fi
}
# run WANT_RC OUT_FILE COMMAND...: runs it, its output to OUT_FILE and to the log
run() {
  local want=$1 out=$2; shift 2
  local rc=0
  "$@" >"$out" 2>&1 || rc=$?
  sed 's/^/  | /' "$out" | tail -n 40
  if [ "$rc" = "$want" ]; then ok "exit $rc: $*"; else fail "exit $rc (expected $want): $*"; fi
}
contains() { grep -qF -- "$2" "$1"; }
scratch() { mkdir -p "$WORK"; mktemp -d "$WORK/$1.XXXXXX"; }
finish() { if ((fails)); then echo "$fails check(s) failed"; exit 1; fi; echo "all checks passed"; }
need_prefix() { [ -x "$prefix/bin/ssmcheck" ] || { echo "FAIL no installed ssmcheck at $prefix (ctest install.setup)"; exit 1; }; }
# the C skeleton: generated, configured against PREFIX with -Werror, built, loaded, checked
skeleton_c() {
  local ssmcheck=$1 cmake_prefix=$2 dir=$3
  run 0 "$dir/new.out" "$ssmcheck" new c "$dir/mykernel"
  check "ssmcheck new c wrote mykernel.c and CMakeLists.txt" test -f "$dir/mykernel/mykernel.c" -a -f "$dir/mykernel/CMakeLists.txt"
  check "ssmcheck new c says what to fill in" contains "$dir/new.out" "Fill in the ops marked TODO"
  run 0 "$dir/configure.out" "$CMAKE" -S "$dir/mykernel" -B "$dir/mykernel/build" -DCMAKE_PREFIX_PATH="$cmake_prefix" \
    -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  check "find_package(ssmcheck) found the one in $cmake_prefix" \
    grep -q "^ssmcheck_DIR:PATH=$cmake_prefix/" "$dir/mykernel/build/CMakeCache.txt"
  run 0 "$dir/build.out" "$CMAKE" --build "$dir/mykernel/build"
  plugin=$dir/mykernel/build/libmykernel.so
  run 0 "$dir/backends.out" "$ssmcheck" backends "plugin:$plugin"
  check "backends loads it and prints its name" contains "$dir/backends.out" "mykernel (skeleton from ssmcheck new c)"
}

case "$step" in
setup)
  rm -rf "$WORK"
  mkdir -p "$WORK"
  run 0 "$WORK/install.out" "$CMAKE" --install "$SSMCHECK_BUILD" --prefix "$WORK/staging"
  mv "$WORK/staging" "$prefix"  # relocated: nothing may depend on where it was installed
  for f in bin/ssmcheck bin/ssmcheck-plugin-host include/ssmcheck/ssmcheck_plugin.h include/ssmcheck/ssmcheck_capture.h \
           share/ssmcheck/traces/faulty share/ssmcheck/configs share/ssmcheck/python/pyproject.toml \
           share/ssmcheck/python/ssmcheck/__init__.py share/doc/ssmcheck/README.md share/doc/ssmcheck/docs/plugins.md \
           share/doc/ssmcheck/docs/ci.md; do
    check "installed: $f" test -e "$prefix/$f"
  done
  check "the golden and faulty traces are all installed" \
    test "$(cd "$SSMCHECK_SOURCE/fixtures/traces" && find . -name '*.h5' | sort)" = "$(cd "$prefix/share/ssmcheck/traces" && find . -name '*.h5' | sort)"
  libdir=$(dirname "$(find "$prefix" -name 'libssmcheck_capture.so.1.*' | head -n 1)")
  check "the capture library is under lib: $libdir" test -d "$libdir"
  real=$(cd "$libdir" && ls libssmcheck_capture.so.1.*)
  soname=$(objdump -p "$libdir/$real" | awk '/SONAME/ {print $2}')
  check "its SONAME $soname and its file name $real agree (libssmcheck_capture.so.1.N)" \
    test "$soname" = libssmcheck_capture.so.1 -a "${real%.*}" = "$soname"
  check "libssmcheck_capture.so.1 and .so link to it" test "$(readlink "$libdir/libssmcheck_capture.so.1")" = "$real" \
    -a "$(readlink "$libdir/libssmcheck_capture.so")" = libssmcheck_capture.so.1
  check "the reference plug-in is in lib/ssmcheck" test -f "$libdir/ssmcheck/libssmcheck_reference_plugin.so"
  check "the CMake package and ssmcheck.pc are installed" test -f "$libdir/cmake/ssmcheck/ssmcheckConfig.cmake" \
    -a -f "$libdir/cmake/ssmcheck/ssmcheckTargets.cmake" -a -f "$libdir/pkgconfig/ssmcheck.pc"
  # relocatable: no text file names the staging prefix, the build tree or the source tree
  if grep -rIl -e "$WORK/staging" -e "$SSMCHECK_BUILD" -e "$SSMCHECK_SOURCE" "$prefix/lib" "$prefix/share/ssmcheck" >"$WORK/paths.out"; then
    fail "installed text files name the build machine's paths: $(tr '\n' ' ' <"$WORK/paths.out")"
  else
    ok "no installed text file names the staging prefix, the build tree or the source tree"
  fi
  cflags=$(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --cflags ssmcheck | xargs)
  check "pkg-config's include directory is the prefix's ($cflags)" \
    test "$(realpath "${cflags#-I}")" = "$(realpath "$prefix/include")"
  run 0 "$WORK/help.out" "$prefix/bin/ssmcheck" --help
  check "ssmcheck --help ends with the check-your-kernel steps, from 'new c' to 'gate'" \
    test "$(grep -c -e 'ssmcheck new c mykernel' -e 'ssmcheck gate  --backend plugin:mykernel' "$WORK/help.out")" = 2 -a \
    -n "$(tail -n 1 "$WORK/help.out" | grep 'ssmcheck gate  --backend plugin:mykernel')"
  run 0 "$WORK/version.out" "$prefix/bin/ssmcheck" --version
  check "the installed ssmcheck --version names the project version" contains "$WORK/version.out" \
    "ssmcheck $(sed -n 's/^project(ssmcheck VERSION \([0-9.]*\).*/\1/p' "$SSMCHECK_SOURCE/CMakeLists.txt")"
  finish
  ;;
gate)
  need_prefix
  dir=$(scratch gate); trap 'rm -rf "$dir"' EXIT
  cd "$dir"
  run 0 "$dir/gate.out" "$prefix/bin/ssmcheck" gate --cases 30 --no-coverage --backend reference --junit gate.xml
  check "the gate's default traces are the installed ones" contains "$dir/gate.out" "traces $prefix/share/ssmcheck/traces"
  check "the gate replayed golden traces and pinpointed faulty ones" grep -q "faulty" "$dir/gate.out"
  check "its JUnit file has tests and no failure" /usr/bin/python3 -c '
import sys, xml.etree.ElementTree as E
r = E.parse(sys.argv[1]).getroot()
s = [r] if r.tag == "testsuite" else list(r)
sys.exit(0 if sum(int(x.get("tests", 0)) for x in s) > 0 and sum(int(x.get("failures", 0)) + int(x.get("errors", 0)) for x in s) == 0 else 1)' gate.xml
  # the installed reference plug-in runs in the plug-in host beside the installed ssmcheck (not the
  # build tree's, the fallback): in a copy of the prefix (hard links) whose host says it was started
  cp -al "$prefix" "$dir/copy"
  rm "$dir/copy/bin/ssmcheck-plugin-host"
  printf '#!/bin/sh\necho started >>"%s"\nexec "%s" "$@"\n' "$dir/host-started" "$prefix/bin/ssmcheck-plugin-host" \
    >"$dir/copy/bin/ssmcheck-plugin-host"
  chmod +x "$dir/copy/bin/ssmcheck-plugin-host"
  libdir=$(dirname "$(find "$dir/copy" -name 'libssmcheck_capture.so.1.*' | head -n 1)")
  run 0 "$dir/plugin.out" env -u SSMCHECK_PLUGIN_HOST "$dir/copy/bin/ssmcheck" check \
    --backend "plugin:$libdir/ssmcheck/libssmcheck_reference_plugin.so" --ops 'alloc; prefill 3; checkpoint; verify 3; commit 2 3; decode'
  check "the reference plug-in agrees with the reference" contains "$dir/plugin.out" "agree"
  check "it ran in the plug-in host beside the installed ssmcheck" test -s "$dir/host-started"
  finish
  ;;
new_c)
  need_prefix
  dir=$(scratch new_c); trap 'rm -rf "$dir"' EXIT
  cd "$dir"
  skeleton_c "$prefix/bin/ssmcheck" "$prefix" "$dir"
  ssm=$prefix/bin/ssmcheck
  run 0 "$dir/check0.out" "$ssm" check --backend "plugin:$plugin" --h-mode f32 --ops alloc
  run 1 "$dir/check1.out" "$ssm" check --backend "plugin:$plugin" --h-mode f32 --ops 'alloc; prefill 3'
  check "check names the op to fill in" contains "$dir/check1.out" "not implemented: prefill (fill in mykernel_prefill in mykernel.c)"
  run 2 "$dir/again.out" "$ssm" new c "$dir/mykernel"
  check "ssmcheck new overwrites nothing" contains "$dir/again.out" "exists: ssmcheck new overwrites nothing"
  run 2 "$dir/badname.out" "$ssm" new c "$dir/other" --name "my-kernel"
  # the same skeleton compiled with pkg-config's flags alone
  cflags=$(PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name ssmcheck.pc)") pkg-config --cflags ssmcheck)
  run 0 "$dir/cc.out" cc -shared -fPIC -Wall -Wextra -Werror $cflags "$dir/mykernel/mykernel.c" -o "$dir/libpc.so"
  run 0 "$dir/pc-backends.out" "$ssm" backends "plugin:$dir/libpc.so"
  # an engine linking ssmcheck::capture: the installed header and library agree
  run 0 "$dir/cu-configure.out" "$CMAKE" -S "$SSMCHECK_SOURCE/tests/install/capture_user" -B "$dir/capture_user" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  run 0 "$dir/cu-build.out" "$CMAKE" --build "$dir/capture_user"
  run 0 "$dir/cu-run.out" "$dir/capture_user/capture_user"
  check "it loaded the installed library" test "$(ldd "$dir/capture_user/capture_user" | awk '/libssmcheck_capture/ {print $3}' | xargs realpath)" \
    = "$(realpath "$(find "$prefix" -name 'libssmcheck_capture.so.1.*' | head -n 1)")"
  finish
  ;;
new_python)
  need_prefix
  dir=$(scratch new_python); trap 'rm -rf "$dir"' EXIT
  cd "$dir"
  run 0 "$dir/new.out" "$prefix/bin/ssmcheck" new python "$dir/pykernel"
  check "ssmcheck new python wrote pykernel.py" test -f "$dir/pykernel/pykernel.py"
  # the installed package's sources, the installed ssmcheck on PATH (not the build's)
  env=(env -u SSMCHECK -u SSMCHECK_CAPTURE_LIB PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$prefix/share/ssmcheck/python"
       PATH="$prefix/bin:/usr/bin:/bin")
  run 0 "$dir/run0.out" "${env[@]}" /usr/bin/python3 "$dir/pykernel/pykernel.py"
  check "as generated it passes its first check (check --ops alloc)" contains "$dir/run0.out" "python:pykernel: agree"
  run 1 "$dir/run1.out" "${env[@]}" /usr/bin/python3 "$dir/pykernel/pykernel.py" check --h-mode f32 --ops 'alloc; prefill 3'
  check "check names the method to fill in" contains "$dir/run1.out" "prefill: fill in Pykernel.prefill in pykernel.py"
  run 0 "$dir/where.out" "${env[@]}" /usr/bin/python3 -c 'import ssmcheck; from ssmcheck import locate; print(ssmcheck.__file__); print(locate.find_ssmcheck()); print(locate.find_capture_library())'
  check "the package, the executable and the capture library all come from the prefix" \
    test "$(grep -c "^$prefix/" "$dir/where.out")" = 3
  # the same under the package pip-installed from the prefix into a fresh venv (offline: Debian's
  # setuptools, wheel and numpy through --system-site-packages); a copy, so the prefix stays clean
  run 0 "$dir/venv.out" /usr/bin/python3 -m venv --system-site-packages "$dir/venv"
  cp -r "$prefix/share/ssmcheck/python" "$dir/python-src"
  run 0 "$dir/pip.out" env PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 "$dir/venv/bin/python" -m pip install \
    --no-build-isolation --no-index --no-cache-dir --quiet "$dir/python-src"
  venv_env=(env -u SSMCHECK -u SSMCHECK_CAPTURE_LIB -u PYTHONPATH PYTHONDONTWRITEBYTECODE=1 PATH="$prefix/bin:/usr/bin:/bin")
  run 0 "$dir/venv-run.out" "${venv_env[@]}" "$dir/venv/bin/python" "$dir/pykernel/pykernel.py"
  check "the skeleton passes its first check under the venv's package" contains "$dir/venv-run.out" "python:pykernel: agree"
  run 0 "$dir/venv-where.out" "${venv_env[@]}" "$dir/venv/bin/python" -c 'import ssmcheck; print(ssmcheck.__file__)'
  check "the venv's python imports ssmcheck from the venv" grep -q "^$dir/venv/" "$dir/venv-where.out"
  finish
  ;;
deb)
  dir=$(scratch deb); trap 'rm -rf "$dir"' EXIT
  run 0 "$dir/cpack.out" "$CPACK" -G DEB -B "$dir/out" --config "$SSMCHECK_BUILD/CPackConfig.cmake"
  deb=$(ls "$dir"/out/ssmcheck_*.deb 2>/dev/null | head -n 1)
  check "cpack made ssmcheck_<version>_<arch>.deb" test -f "$deb"
  depends=$(dpkg-deb -f "$deb" Depends)
  echo "  | Depends: $depends"
  for lib in libc6 libstdc++6 libgomp1 libhdf5 libfmt; do
    check "it depends on $lib" grep -q "$lib" <<<"$depends"
  done
  for p in $(sed 's/([^)]*)//g; s/|[^,]*//g; s/,/ /g' <<<"$depends"); do
    check "its dependency $p is a Debian package installed here" dpkg-query -W "$p"
  done
  dpkg-deb -x "$deb" "$dir/root"
  usr=$dir/root/usr
  mkdir "$dir/run" && cd "$dir/run"
  run 0 "$dir/gate.out" "$usr/bin/ssmcheck" gate --cases 30 --no-coverage --backend reference
  check "the unpacked gate's default traces are the package's" contains "$dir/gate.out" "traces $usr/share/ssmcheck/traces"
  skeleton_c "$usr/bin/ssmcheck" "$usr" "$dir"
  run 0 "$dir/check0.out" "$usr/bin/ssmcheck" check --backend "plugin:$plugin" --h-mode f32 --ops alloc
  finish
  ;;
cli_profile)
  # CMakePresets.json's cli profile configures without CUDA, without tests and without GoogleTest
  dir=$(scratch cli_profile); trap 'rm -rf "$dir"' EXIT
  cd "$SSMCHECK_SOURCE"  # where CMakePresets.json is; the build directory is the temporary one
  run 0 "$dir/configure.out" "$CMAKE" --preset cli -B "$dir/build"
  check "the cli profile builds no CUDA implementation" contains "$dir/configure.out" "ssmcheck: CUDA implementation OFF"
  check "it does not look for GoogleTest" test "$(grep -c '^GTest_DIR' "$dir/build/CMakeCache.txt")" = 0
  check "SSMCHECK_TESTS is OFF" grep -q '^SSMCHECK_TESTS:BOOL=OFF' "$dir/build/CMakeCache.txt"
  check "it is a Release build" grep -q '^CMAKE_BUILD_TYPE:STRING=Release' "$dir/build/CMakeCache.txt"
  run 0 "$dir/ctest.out" "$(dirname "$CMAKE")/ctest" --test-dir "$dir/build" -N
  check "it declares no test" contains "$dir/ctest.out" "Total Tests: 0"
  check "its install rules are there" grep -q 'ssmcheck-plugin-host' "$dir/build/cmake_install.cmake"
  finish
  ;;
cleanup)
  rm -rf "$WORK"
  check "the install test's directory is removed" test ! -e "$WORK"
  finish
  ;;
*)
  echo "usage: install_test.sh setup|gate|new_c|new_python|deb|cli_profile|cleanup" >&2
  exit 2
  ;;
esac
