#!/bin/sh
# Smoke test of the one-folder bundle (`make bundle` runs it), or of any
# installed `mcp-tray` launcher (a wheel installed in a venv, pipx, uv tool).
#
#   sh packaging/smoke_test.sh [LAUNCHER] [CONFIG]
#
# The launcher prints its version; on Linux install-desktop writes and removes
# its files (under a temporary XDG home); `run --headless` on the demo config answers
# `status --json` with every server ready (the demo servers are Python scripts
# that the bundle's launcher runs itself, see packaging/entry.py) and a tool
# call; it is stopped the way its OS stops an app, with exit 0 and no server
# process left: SIGTERM on Linux and macOS (logout, launchd, systemd), and
# `mcp-tray quit` on Windows, where Git Bash's `kill -TERM` is TerminateProcess,
# a hard kill that skips the stop contract.
set -eu

BUNDLE=${1:-dist/mcp-tray/mcp-tray}
CONFIG=${2:-resources/demo/config.json}
TIMEOUT=${SMOKE_TIMEOUT:-60}

case "$(uname -s)" in
    MINGW* | MSYS* | CYGWIN*) windows=1 ;;
    *) windows=0 ;;
esac

# Whether a server process (a pid as the tray reports it: a Windows pid there,
# which Git Bash's kill does not know) still runs.
alive() {
    if [ "$windows" = 1 ]; then
        tasklist //NH //FI "PID eq $1" 2>/dev/null | grep -qw "$1"
    else
        kill -0 "$1" 2>/dev/null
    fi
}

work=$(mktemp -d "${TMPDIR:-/tmp}/mcp-tray-smoke.XXXXXX")
pid=""
cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
fail() {
    echo "smoke test FAILED: $*" >&2
    [ -f "$work/run.log" ] && sed 's/^/  run: /' "$work/run.log" >&2
    exit 1
}

export MCP_TRAY_HOME="$work/home"

echo "== $BUNDLE --version"
"$BUNDLE" --version

if [ "$(uname -s)" = Linux ]; then
    # macOS's LaunchAgent and Windows' Run value would touch the real login items.
    echo "== install-desktop --autostart, then --uninstall (XDG dirs in $work)"
    XDG_DATA_HOME="$work/data" XDG_CONFIG_HOME="$work/config" "$BUNDLE" install-desktop --autostart
    grep "^Exec=" "$work/data/applications/mcp-tray.desktop" | grep -qF "$(cd "$(dirname "$BUNDLE")" && pwd)/mcp-tray" \
        || fail "the desktop entry's Exec is not $BUNDLE"
    XDG_DATA_HOME="$work/data" XDG_CONFIG_HOME="$work/config" "$BUNDLE" install-desktop --uninstall
fi

echo "== run --headless --config $CONFIG"
"$BUNDLE" run --headless --config "$CONFIG" >"$work/run.log" 2>&1 &
pid=$!
started=$(date +%s)
while :; do
    kill -0 "$pid" 2>/dev/null || fail "mcp-tray exited before it was ready"
    if "$BUNDLE" status --json >"$work/status.json" 2>/dev/null; then
        servers=$(grep -c '"name":' "$work/status.json" || true)
        ready=$(grep -c '"state": "ready"' "$work/status.json" || true)
        if [ "$servers" -gt 0 ] && [ "$servers" -eq "$ready" ]; then break; fi
    fi
    [ $(($(date +%s) - started)) -lt "$TIMEOUT" ] || {
        cat "$work/status.json" >&2 2>/dev/null || true
        fail "not every server was ready after ${TIMEOUT}s"
    }
    sleep 0.5
done
echo "ready after $(($(date +%s) - started))s:"
"$BUNDLE" status

echo "== call demo-clock now"
"$BUNDLE" call demo-clock now >/dev/null || fail "the call to demo-clock failed"
echo "ok"

children=$(sed -n 's/.*"pid": \([0-9][0-9]*\).*/\1/p' "$work/status.json")
if [ "$windows" = 1 ]; then
    echo "== mcp-tray quit"
    how="mcp-tray quit"
    "$BUNDLE" quit || fail "mcp-tray quit failed"
else
    echo "== SIGTERM"
    how="SIGTERM"
    kill -TERM "$pid"
fi
code=0
wait "$pid" || code=$?
pid=""
[ "$code" -eq 0 ] || fail "mcp-tray exited $code on $how"
for child in $children; do
    if alive "$child"; then fail "server process $child is still alive"; fi
done
echo "stopped with exit 0, no server process left"
echo "smoke test passed"
