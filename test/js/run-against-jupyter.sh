#!/usr/bin/env bash
# Runs a client test file against Debian's real Jupyter Server, the reference implementation
# nbkube must be indistinguishable from. This proves a test is right before nbkube can pass it,
# and shows what Jupyter itself does when nbkube and a test disagree.
#
#   test/js/run-against-jupyter.sh kernels.test.mjs [more node --test arguments]
#
# The server gets a free port, a random token and a throw-away root, config, data, runtime and
# IPython directory, so neither the user's Jupyter setup nor earlier runs leak in. The test sees
# the same variables the Go e2e test sets for nbkube (NBKUBE_URL, NBKUBE_TOKEN);
# NBKUBE_WS_PROTOCOL is passed through untouched. Env: JUPYTER_PYTHON (default /usr/bin/python3,
# the one with jupyter_server and ipykernel), RUN_TIMEOUT (seconds for the whole test run,
# default 900, so a leaked handle that keeps node alive fails instead of hanging),
# JUPYTER_SERVER_ARGS (extra server options, split on spaces, e.g.
# --ServerApp.kernel_ws_protocol= to make the server refuse the v1 WebSocket subprotocol).
set -euo pipefail

if [[ $# -lt 1 ]]; then
	echo "usage: $0 TEST_FILE [node --test args...]" >&2
	exit 2
fi
test_file=$(realpath "$1")
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
py=${JUPYTER_PYTHON:-/usr/bin/python3}

tmp=$(mktemp -d)
server_pid=
cleanup() {
	if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
		kill -TERM "$server_pid" 2>/dev/null || true
		# Jupyter shuts its kernels down on SIGTERM; give it a bounded while, then insist.
		for _ in $(seq 150); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$server_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

mkdir -p "$tmp/root" "$tmp/config" "$tmp/data" "$tmp/runtime" "$tmp/ipython"
token=$("$py" -c 'import secrets; print(secrets.token_hex(24))')
# The port is found by binding port 0 and released just before Jupyter binds it; the race with
# another process grabbing it meanwhile is harmless: Jupyter would fail and so would this script.
port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

JUPYTER_CONFIG_DIR=$tmp/config JUPYTER_DATA_DIR=$tmp/data JUPYTER_RUNTIME_DIR=$tmp/runtime \
	IPYTHONDIR=$tmp/ipython \
	"$py" -m jupyter_server --no-browser --allow-root --ip=127.0.0.1 --port="$port" \
	--port-retries=0 --ServerApp.token="$token" --ServerApp.root_dir="$tmp/root" \
	${JUPYTER_SERVER_ARGS:-} \
	>"$tmp/server.log" 2>&1 &
server_pid=$!

url=http://127.0.0.1:$port
for i in $(seq 600); do
	if curl -fs -o /dev/null -H "Authorization: token $token" "$url/api/status"; then
		break
	fi
	if ! kill -0 "$server_pid" 2>/dev/null || [[ $i -eq 600 ]]; then
		echo "Jupyter Server did not come up on $url; its log:" >&2
		cat "$tmp/server.log" >&2
		exit 1
	fi
	sleep 0.1
done

status=0
(cd "$here" && NBKUBE_URL=$url NBKUBE_TOKEN=$token \
	timeout --kill-after=10 "${RUN_TIMEOUT:-900}" node --test "$@" "$test_file") || status=$?
if [[ $status -ne 0 ]]; then
	echo "--- Jupyter Server log ---" >&2
	cat "$tmp/server.log" >&2
fi
exit "$status"
