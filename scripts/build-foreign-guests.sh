#!/usr/bin/env bash
# Build the example jobs written in Python and JavaScript (examples/python,
# examples/javascript) as WebAssembly components, with pinned toolchains.
#
#   bash scripts/build-foreign-guests.sh           build what changed, list the components
#   bash scripts/build-foreign-guests.sh --print   ... and print each one's imports and exports
#
# Works from any directory; idempotent and incremental: a no-op run installs
# nothing, builds nothing and takes well under a second. scripts/build-guests.sh
# calls it at its end unless PADDOCK_NO_FOREIGN_GUESTS=1.
#
# Toolchains, installed into the repo's own target/toolchains (never globally),
# each skipped when already present at its pinned version:
#   target/toolchains/py   a venv with componentize-py==0.25.1 (pip)
#   target/toolchains/js   npm prefix with @bytecodealliance/componentize-js@0.23.0 (exact)
# Needs python3 (with venv/ensurepip) and node + npm (Node 18 or newer).
#
# Output (copied into target/guests/ beside the Rust guests):
#   target/guests/py_effector.wasm   from examples/python/effector/app.py
#   target/guests/js_effector.wasm   from examples/javascript/effector/app.js
#   target/guests/py_probe.wasm      from guests/py_probe/app.py (the tests' WASI probe)
# A component is rebuilt only when its sources, wit/, the toolchain version or
# the build flags changed (a sha256 stamp in target/guests-foreign/).
#
# Both components import WASI 0.2 interfaces besides paddock:job (the
# language runtimes need them): the host must link WASI, denying what a job
# has not been granted. The JavaScript one is built without wasi:http
# (`--disable http fetch-event`).
set -euo pipefail

# The pinned versions (keep the header above in step).
PY_TOOL_VERSION=0.25.1
JS_TOOL_VERSION=0.23.0

PRINT=0
for arg in "$@"; do
    case "$arg" in
        --print) PRINT=1 ;;
        -h|--help) sed -n '2,27p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-foreign-guests: unknown argument: $arg (try --help)" >&2; exit 2 ;;
    esac
done

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WIT_DIR=$ROOT/wit
TC_DIR=$ROOT/target/toolchains
PY_VENV=$TC_DIR/py
JS_PREFIX=$TC_DIR/js
CACHE_DIR=$ROOT/target/guests-foreign
OUT_DIR=$ROOT/target/guests

PY_TOOL=$PY_VENV/bin/componentize-py
JS_PKG=$JS_PREFIX/node_modules/@bytecodealliance/componentize-js
JS_TOOL=$JS_PKG/src/cli.js

say() { echo "build-foreign-guests: $*" >&2; }
die() { say "error: $*"; exit 1; }

# Seconds since the epoch with milliseconds, for the timings printed.
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }

mkdir -p "$CACHE_DIR" "$OUT_DIR" "$TC_DIR"
# One build at a time (parallel test runs may all call this script). Its own
# lock file: build-guests.sh holds target/guests/.lock while it calls us.
if command -v flock >/dev/null; then
    exec 8>"$CACHE_DIR/.lock"
    flock 8
fi

# ------------------------------------------------------------ toolchains --

# The stamp a finished install leaves: the pinned version it installed.
installed() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }

ensure_python_tool() {
    local stamp=$PY_VENV/.paddock-installed
    if installed "$stamp" "componentize-py==$PY_TOOL_VERSION" && [ -x "$PY_TOOL" ]; then
        return 0
    fi
    command -v python3 >/dev/null || die "python3 not found: install Python 3 (e.g. apt-get install python3 python3-venv), or set PADDOCK_NO_FOREIGN_GUESTS=1 to skip these guests"
    local t0; t0=$(now)
    say "installing componentize-py==$PY_TOOL_VERSION into ${PY_VENV#"$ROOT"/} ..."
    rm -rf "$PY_VENV"
    python3 -m venv "$PY_VENV" \
        || die "python3 -m venv failed: install the venv module and pip (e.g. apt-get install python3-venv python3-pip)"
    [ -x "$PY_VENV/bin/pip" ] \
        || die "the venv at $PY_VENV has no pip: install ensurepip (e.g. apt-get install python3-venv python3-pip)"
    "$PY_VENV/bin/pip" install --quiet --disable-pip-version-check "componentize-py==$PY_TOOL_VERSION" \
        || die "pip install componentize-py==$PY_TOOL_VERSION failed (see above)"
    [ -x "$PY_TOOL" ] || die "componentize-py was installed but $PY_TOOL is missing"
    echo "componentize-py==$PY_TOOL_VERSION" >"$stamp"
    say "componentize-py $("$PY_TOOL" --version 2>/dev/null | awk '{print $NF}') installed in $(elapsed "$t0")"
}

js_installed_version() {
    [ -f "$JS_PKG/package.json" ] || return 0
    sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$JS_PKG/package.json" | head -1
}

ensure_js_tool() {
    command -v node >/dev/null || die "node not found: install Node.js 18 or newer (e.g. apt-get install nodejs npm), or set PADDOCK_NO_FOREIGN_GUESTS=1 to skip these guests"
    local major
    major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
    [ "$major" -ge 18 ] || die "node $(node --version) is too old for componentize-js: install Node.js 18 or newer"
    if [ "$(js_installed_version)" = "$JS_TOOL_VERSION" ] && [ -f "$JS_TOOL" ]; then
        return 0
    fi
    command -v npm >/dev/null || die "npm not found: install npm (e.g. apt-get install npm), or set PADDOCK_NO_FOREIGN_GUESTS=1 to skip these guests"
    local t0; t0=$(now)
    say "installing @bytecodealliance/componentize-js@$JS_TOOL_VERSION into ${JS_PREFIX#"$ROOT"/} ..."
    mkdir -p "$JS_PREFIX"
    local log; log=$(mktemp)
    if ! npm install --prefix "$JS_PREFIX" --save-exact --no-audit --no-fund --loglevel=error \
        "@bytecodealliance/componentize-js@$JS_TOOL_VERSION" >"$log" 2>&1; then
        cat "$log" >&2; rm -f "$log"
        die "npm install @bytecodealliance/componentize-js@$JS_TOOL_VERSION failed (see above)"
    fi
    rm -f "$log"
    [ "$(js_installed_version)" = "$JS_TOOL_VERSION" ] \
        || die "npm installed componentize-js '$(js_installed_version)', expected $JS_TOOL_VERSION"
    [ -f "$JS_TOOL" ] || die "componentize-js was installed but $JS_TOOL is missing"
    say "componentize-js $JS_TOOL_VERSION installed in $(elapsed "$t0")"
}

# ------------------------------------------------------------ components --

# sha256 over the recipe (tool, version, flags) and every input file's path
# and content.
inputs_hash() {
    local recipe=$1; shift
    {
        echo "$recipe"
        local f
        for f in "$@"; do
            echo "== ${f#"$ROOT"/}"
            cat "$f"
        done
    } | sha256sum | cut -d' ' -f1
}

sorted_files() { # dir, name pattern
    find "$1" -type f -name "$2" -not -path '*/__pycache__/*' -not -path '*/node_modules/*' | LC_ALL=C sort
}

# build NAME RECIPE COMMAND... : run COMMAND (which writes $TMP_OUT) unless
# the stamp matches, then copy the component into target/guests.
build() {
    local name=$1 hash=$2; shift 2
    local cached=$CACHE_DIR/$name.wasm stamp=$CACHE_DIR/$name.stamp out=$OUT_DIR/$name.wasm state
    if [ -f "$cached" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$hash" ]; then
        state=up-to-date
    else
        local t0 log; t0=$(now); log=$(mktemp)
        TMP_OUT=$CACHE_DIR/$name.wasm.tmp
        rm -f "$TMP_OUT" "$stamp"
        if ! "$@" >"$log" 2>&1 || [ ! -s "$TMP_OUT" ]; then
            cat "$log" >&2; rm -f "$log" "$TMP_OUT"
            die "building $name failed (see above)"
        fi
        rm -f "$log"
        mv -f "$TMP_OUT" "$cached"
        echo "$hash" >"$stamp"
        state="built in $(elapsed "$t0")"
    fi
    # build-guests.sh may have removed or replaced the copy: restore it.
    if [ ! -f "$out" ] || ! cmp -s "$cached" "$out"; then
        cp -f "$cached" "$out.tmp" && mv -f "$out.tmp" "$out"
    fi
    printf '%-12s %9d bytes  %-16s %s\n' "$name" "$(wc -c <"$out")" "$state" "${out#"$ROOT"/}"
}

# --- Python: componentize-py. build_py NAME SRC_DIR
ensure_python_tool
build_py() {
    local name=$1 src=$2
    [ -f "$src/app.py" ] || die "missing $src/app.py"
    mapfile -t py_inputs < <(sorted_files "$src" '*.py'; sorted_files "$WIT_DIR" '*.wit')
    PY_WORK=$CACHE_DIR/$name-src
    PY_SRC=$src
    PY_ARGS=(-d "$WIT_DIR" -w job componentize -p "$PY_WORK" app)
    build "$name" "$(inputs_hash "componentize-py==$PY_TOOL_VERSION ${PY_ARGS[*]}" "${py_inputs[@]}")" py_build
}
py_build() {
    # Build from a copy: the embedded interpreter writes __pycache__ next to
    # the modules it imports (PYTHONDONTWRITEBYTECODE does not reach it).
    rm -rf "$PY_WORK" && mkdir -p "$PY_WORK"
    (cd "$PY_SRC" && find . -name '*.py' -not -path '*/__pycache__/*' -exec cp --parents {} "$PY_WORK" \;)
    (cd "$CACHE_DIR" && "$PY_TOOL" "${PY_ARGS[@]}" -o "$TMP_OUT")
}
build_py py_effector "$ROOT/examples/python/effector"
# The tests' WASI probe (what an ungranted / granted guest sees).
build_py py_probe "$ROOT/guests/py_probe"

# --- JavaScript: componentize-js, called directly (jco's wrapper fails on
# these machines, see shared/TOOLCHAIN.md), without wasi:http.
JS_SRC=$ROOT/examples/javascript/effector
[ -f "$JS_SRC/app.js" ] || die "missing $JS_SRC/app.js"
ensure_js_tool
mapfile -t js_inputs < <(sorted_files "$JS_SRC" '*.js'; sorted_files "$WIT_DIR" '*.wit')
JS_ARGS=(--wit "$WIT_DIR" --world-name job --disable http --disable fetch-event)
js_build() {
    (cd "$CACHE_DIR" && node "$JS_TOOL" "$JS_SRC/app.js" "${JS_ARGS[@]}" -o "$TMP_OUT")
}
build js_effector "$(inputs_hash "componentize-js@$JS_TOOL_VERSION ${JS_ARGS[*]}" "${js_inputs[@]}")" js_build

# ---------------------------------------------------------------- --print --

# Imports and exports, through `jco wit` (componentize-js depends on jco; its
# `componentize` wrapper is what fails here, not `wit`).
if [ "$PRINT" = 1 ]; then
    for name in py_effector py_probe js_effector; do
        echo "$name:"
        node "$JS_PREFIX/node_modules/.bin/jco" wit "$OUT_DIR/$name.wasm" \
            | sed -n 's/^ *\(import [^ ]*\);$/  \1/p; s/^ *export \([^:]*\):.*/  export \1/p'
    done
fi
