#!/usr/bin/env bash
# Build Paddock's guest job components (guests/*) as WebAssembly components.
#
#   bash scripts/build-guests.sh           build what changed, list the components
#   bash scripts/build-guests.sh --print   ... and print each one's imports/exports
#
# Works from any directory; idempotent and incremental (a no-op run rebuilds
# nothing and takes about a second).
#
# Output: target/guests/<name>.wasm, one per cdylib crate under guests/, where
# <name> is the crate name with `-` replaced by `_` (cargo's artifact name;
# today every name is a single word: hello, noop, trap, spin, hog, effector,
# forbidden, gated).
#
# Everything lives under target/ of the repo root, in directories of its own:
#   target/guests-build  cargo target dir of the guest workspace (wasm32 core modules)
#   target/tools         cargo target dir of tools/componentize (native)
#   target/guests        the finished components
# The host's own target/debug, target/release are never touched.
#
# The compiler route, first that applies:
#  (a) the default toolchain has the wasm32-unknown-unknown std installed
#      (`rustup target add wasm32-unknown-unknown`): plain cargo build;
#  (b) Debian's rustc-web (/usr/bin/rustc) + rust-web-src: build std from
#      source (RUSTC_BOOTSTRAP=1 -Zbuild-std), linking with the rust-lld of the
#      rustup toolchain (see shared/TOOLCHAIN.md);
#  (c) (b)'s packages are missing and we are root with apt-get: install them,
#      then (b);
#  (d) otherwise stop and say what to install.
# Knobs: PADDOCK_GUEST_ROUTE=a|b forces a route; PADDOCK_GUEST_NO_APT=1 never
# runs apt-get (route c); PADDOCK_DEB_RUSTC overrides /usr/bin/rustc for (b).
set -euo pipefail

PRINT=0
for arg in "$@"; do
    case "$arg" in
        --print) PRINT=1 ;;
        -h|--help) sed -n '2,31p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-guests: unknown argument: $arg (try --help)" >&2; exit 2 ;;
    esac
done

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GUESTS_DIR=$ROOT/guests
TOOL_MANIFEST=$ROOT/tools/componentize/Cargo.toml
BUILD_DIR=$ROOT/target/guests-build
TOOLS_DIR=$ROOT/target/tools
OUT_DIR=$ROOT/target/guests
TARGET=wasm32-unknown-unknown
TOOL=$TOOLS_DIR/debug/componentize

say() { echo "build-guests: $*" >&2; }
die() { say "error: $*"; exit 1; }

# When run from a cargo build script or test, cargo's environment for the
# *host* build must not leak into these builds (host RUSTFLAGS, a wrapper such
# as clippy-driver, a forced target...).
unset RUSTFLAGS CARGO_ENCODED_RUSTFLAGS CARGO_BUILD_RUSTFLAGS CARGO_BUILD_TARGET \
      RUSTC RUSTC_WORKSPACE_WRAPPER CARGO_TARGET_DIR CARGO_BUILD_TARGET_DIR RUSTC_BOOTSTRAP

command -v cargo >/dev/null || die "cargo not found: install Rust with rustup (https://rustup.rs) first"

mkdir -p "$OUT_DIR"
# One build at a time (parallel test runs may all call this script).
if command -v flock >/dev/null; then
    exec 9>"$OUT_DIR/.lock"
    flock 9
fi

# ---------------------------------------------------------------- the route --

has_wasm_std() {
    if command -v rustup >/dev/null && (cd "$GUESTS_DIR" && rustup target list --installed 2>/dev/null) | grep -qx "$TARGET"; then
        return 0
    fi
    # A toolchain not managed by rustup may ship the target's std too.
    local libdir
    libdir=$(cd "$GUESTS_DIR" && rustc --print target-libdir --target "$TARGET" 2>/dev/null) || return 1
    compgen -G "$libdir/libstd-*.rlib" >/dev/null
}

DEB_RUSTC=${PADDOCK_DEB_RUSTC:-/usr/bin/rustc}
deb_ready() {
    [ -x "$DEB_RUSTC" ] || return 1
    local sysroot
    sysroot=$("$DEB_RUSTC" --print sysroot 2>/dev/null) || return 1
    [ -f "$sysroot/lib/rustlib/src/rust/library/Cargo.lock" ] || return 1
    # Debian's plain `rustc` package is far too old for -Zbuild-std here.
    local minor
    minor=$("$DEB_RUSTC" --version | sed -n 's/^rustc 1\.\([0-9]*\).*/\1/p')
    [ -n "$minor" ] && [ "$minor" -ge 85 ]
}

find_rust_lld() {
    local host sysroot
    if command -v rustc >/dev/null; then
        host=$(cd "$GUESTS_DIR" && rustc -vV 2>/dev/null | sed -n 's/^host: //p')
        sysroot=$(cd "$GUESTS_DIR" && rustc --print sysroot 2>/dev/null)
        if [ -n "$host" ] && [ -x "$sysroot/lib/rustlib/$host/bin/rust-lld" ]; then
            echo "$sysroot/lib/rustlib/$host/bin"; return 0
        fi
    fi
    local f
    f=$(find "${RUSTUP_HOME:-$HOME/.rustup}/toolchains" -name rust-lld -path '*/bin/rust-lld' 2>/dev/null | sort | head -1)
    if [ -n "$f" ]; then dirname "$f"; return 0; fi
    if command -v rust-lld >/dev/null; then dirname "$(command -v rust-lld)"; return 0; fi
    return 1
}

install_hint() {
    cat >&2 <<EOF
build-guests: cannot build wasm32 guests: no wasm32-unknown-unknown std.
Install ONE of:
  1. the prebuilt target (needs access to static.rust-lang.org):
       rustup target add $TARGET
  2. Debian's newer Rust and its std source (Debian 12 / bookworm), as root:
       apt-get update && apt-get install -y --no-install-recommends rustc-web rust-web-src
     and keep a rustup toolchain installed (its rust-lld links the guests).
EOF
}

apt_install() {
    local log
    log=$(mktemp)
    say "installing rustc-web rust-web-src with apt-get (a minute at most)..."
    export DEBIAN_FRONTEND=noninteractive
    # Wait for another apt/dpkg run holding the lock rather than failing.
    local lock=(-o DPkg::Lock::Timeout=600)
    if ! apt-get "${lock[@]}" update -q >"$log" 2>&1; then
        cat "$log" >&2; rm -f "$log"; die "apt-get update failed"
    fi
    if ! apt-get "${lock[@]}" install -y -q --no-install-recommends rustc-web rust-web-src >"$log" 2>&1; then
        cat "$log" >&2; rm -f "$log"; die "apt-get install rustc-web rust-web-src failed"
    fi
    grep -iE '^(E|W):' "$log" >&2 || true
    rm -f "$log"
}

ROUTE=${PADDOCK_GUEST_ROUTE:-}
if [ -z "$ROUTE" ]; then
    if has_wasm_std; then
        ROUTE=a
    elif deb_ready; then
        ROUTE=b
    elif [ -z "${PADDOCK_GUEST_NO_APT:-}" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt_install
        deb_ready || { install_hint; die "rustc-web/rust-web-src installed but unusable (see above)"; }
        ROUTE=b
    else
        install_hint
        exit 1
    fi
fi

CARGO_ARGS=(build --release --target "$TARGET" --target-dir "$BUILD_DIR" --manifest-path "$GUESTS_DIR/Cargo.toml")
case "$ROUTE" in
    a)
        say "route a: default toolchain's $TARGET std"
        (cd "$GUESTS_DIR" && cargo "${CARGO_ARGS[@]}")
        ;;
    b)
        deb_ready || { install_hint; die "route b needs rustc-web and rust-web-src"; }
        LLD_DIR=$(find_rust_lld) || { install_hint; die "route b needs rust-lld from a rustup toolchain; none found"; }
        say "route b: $("$DEB_RUSTC" --version | cut -d' ' -f1-2) with -Zbuild-std, rust-lld from $LLD_DIR"
        (cd "$GUESTS_DIR" && PATH="$LLD_DIR:$PATH" RUSTC="$DEB_RUSTC" RUSTC_BOOTSTRAP=1 \
            cargo "${CARGO_ARGS[@]}" -Zbuild-std=std,panic_abort)
        ;;
    *) die "PADDOCK_GUEST_ROUTE must be a or b, not '$ROUTE'" ;;
esac

# ----------------------------------------------------------- the encoder --

# Default toolchain, native, its own workspace and target dir. A no-op when
# nothing changed.
(cd "$ROOT/tools/componentize" && cargo build --quiet --manifest-path "$TOOL_MANIFEST" --target-dir "$TOOLS_DIR") \
    || die "building tools/componentize failed"

# ---------------------------------------------------------- the components --

CORE_DIR=$BUILD_DIR/$TARGET/release
names=()
for manifest in "$GUESTS_DIR"/*/Cargo.toml; do
    grep -q 'cdylib' "$manifest" || continue   # e.g. the minijson helper library
    crate=$(sed -n 's/^name *= *"\(.*\)"/\1/p' "$manifest" | head -1)
    names+=("${crate//-/_}")
done

for name in "${names[@]}"; do
    core=$CORE_DIR/$name.wasm
    out=$OUT_DIR/$name.wasm
    [ -f "$core" ] || die "expected core module $core was not built"
    if [ ! -f "$out" ] || [ "$core" -nt "$out" ] || [ "$TOOL" -nt "$out" ]; then
        "$TOOL" "$core" "$out" || die "encoding $name failed"
        state=encoded
    else
        state=up-to-date
    fi
    printf '%-10s %8d bytes  %-10s %s\n' "$name" "$(wc -c <"$out")" "$state" "${out#"$ROOT"/}"
done

# Hand-written core modules (guests/wat/*.wat: what Rust cannot emit).
for wat in "$GUESTS_DIR"/wat/*.wat; do
    [ -e "$wat" ] || continue
    name=$(basename "$wat" .wat)
    names+=("$name")
    out=$OUT_DIR/$name.wasm
    if [ ! -f "$out" ] || [ "$wat" -nt "$out" ] || [ "$TOOL" -nt "$out" ] \
        || [ -n "$(find "$ROOT/wit" -newer "$out" -name '*.wit' | head -1)" ]; then
        "$TOOL" --wat "$wat" "$ROOT/wit" job "$out" || die "encoding $name failed"
        state=encoded
    else
        state=up-to-date
    fi
    printf '%-10s %8d bytes  %-10s %s\n' "$name" "$(wc -c <"$out")" "$state" "${out#"$ROOT"/}"
done

# Drop components whose crate no longer exists.
for out in "$OUT_DIR"/*.wasm; do
    [ -e "$out" ] || continue
    base=$(basename "$out" .wasm)
    case "$base" in py_*|js_*) continue ;; esac   # scripts/build-foreign-guests.sh's
    keep=0
    for name in "${names[@]}"; do [ "$name" = "$base" ] && keep=1; done
    if [ "$keep" = 0 ]; then rm -f "$out"; say "removed stale $out"; fi
done

if [ "$PRINT" = 1 ]; then
    for name in "${names[@]}"; do "$TOOL" --print "$OUT_DIR/$name.wasm"; done
fi

# The Python and JavaScript example jobs (pinned toolchains under target/toolchains).
[ "${PADDOCK_NO_FOREIGN_GUESTS:-}" = 1 ] || bash "$ROOT/scripts/build-foreign-guests.sh" $([ "$PRINT" = 1 ] && echo --print)
