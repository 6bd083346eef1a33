#!/usr/bin/env bash
# A local three-broker Sluice cluster on 127.0.0.1, each node a combined
# broker and controller, and two optional broker-only nodes to move
# partitions onto:
#
#   node N (1..3)  PLAINTEXT://127.0.0.1:909(1+N)   clients (9092, 9093, 9094)
#                  CONTROLLER://127.0.0.1:919(1+N)  the controller quorum (9192, 9193, 9194)
#   node N (any)   http://127.0.0.1:964(3+N)        metrics.listen: /metrics, /healthz, /readyz and
#                                                   the web console at /ui/ (9644, 9645, ...)
#   node N (4, 5)  PLAINTEXT://127.0.0.1:909(1+N)   clients (9095, 9096); process.roles=broker,
#                                                   no controller listener: it registers with
#                                                   the quorum of nodes 1-3 and starts empty
#
# Usage:
#   tools/cluster.sh start [N]     build the binary, start nodes 1-3 (or node N, 1..5)
#   tools/cluster.sh stop [N]      SIGTERM, wait (bounded), then SIGKILL (every node, or node N)
#   tools/cluster.sh status        each node's pid and state; kcat -L if kcat is installed
#   tools/cluster.sh restart N     stop node N, rebuild, start it again
#   tools/cluster.sh kill N        SIGKILL node N (to try failover)
#   tools/cluster.sh logs N [-f]   the last 100 lines of node N's log (-f follows)
#   tools/cluster.sh flags N       print node N's `sluice serve` command line
#
# Nodes 4 and 5 exist only once started: stop and status without N cover
# them when they have a directory in $CLUSTER_DIR.
#
# Node N keeps its data in $CLUSTER_DIR/nodeN (log.dirs), its log in
# $CLUSTER_DIR/nodeN/sluice.log and its pid in $CLUSTER_DIR/nodeN/sluice.pid.
# Every node is configured by --set flags only (no config file).
#
# Environment:
#   CLUSTER_DIR   where the nodes live (default: cluster-data at the repository root)
#   SLUICE_BIN    a sluice binary to run instead of building one into $CLUSTER_DIR/sluice
#   STOP_TIMEOUT  seconds stop waits after SIGTERM before SIGKILL (default 20)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cluster_dir=${CLUSTER_DIR:-$root/cluster-data}
case $cluster_dir in
/*) ;;
*) cluster_dir=$PWD/$cluster_dir ;;
esac
stop_timeout=${STOP_TIMEOUT:-20}
case $stop_timeout in
'' | *[!0-9]*) echo "cluster.sh: STOP_TIMEOUT must be a number of seconds" >&2 && exit 2 ;;
esac
nodes=(1 2 3)     # the combined broker and controller nodes: what start with no N starts
broker_only=(4 5) # broker-only nodes, started by name
voters="1@127.0.0.1:9192,2@127.0.0.1:9193,3@127.0.0.1:9194"
bootstrap="127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"

usage() {
	echo "usage:" >&2
	sed -n 's/^#   \(tools\/cluster\.sh .*\)/  \1/p' "${BASH_SOURCE[0]}" >&2
	exit 2
}

die() {
	echo "cluster.sh: $*" >&2
	exit 1
}

client_port() { echo $((9091 + $1)); }
controller_port() { echo $((9191 + $1)); }
metrics_port() { echo $((9643 + $1)); }
node_dir() { echo "$cluster_dir/node$1"; }
pid_file() { echo "$(node_dir "$1")/sluice.pid"; }
log_file() { echo "$(node_dir "$1")/sluice.log"; }

check_node() {
	case ${1:-} in
	1 | 2 | 3 | 4 | 5) ;;
	*) die "node must be 1, 2, 3, 4 or 5, not '${1:-}'" ;;
	esac
}

# is_broker_only succeeds for the broker-only nodes (4, 5).
is_broker_only() {
	case $1 in
	4 | 5) return 0 ;;
	esac
	return 1
}

# ports prints node N's ports, one a line: clients, then the controller's
# (a broker-only node has none).
ports() {
	client_port "$1"
	is_broker_only "$1" || controller_port "$1"
}

# known_nodes prints nodes 1-3 and each broker-only node that has a
# directory (it was started at least once), one a line; with
# brokers-first, the broker-only nodes come first (stop takes them down
# while the controller quorum is still there for their controlled
# shutdown).
known_nodes() {
	local n
	[ "${1:-}" = brokers-first ] || printf '%s\n' "${nodes[@]}"
	for n in "${broker_only[@]}"; do
		[ -d "$(node_dir "$n")" ] && echo "$n"
	done
	[ "${1:-}" = brokers-first ] && printf '%s\n' "${nodes[@]}"
	return 0
}

# bin prints the binary to run.
bin() {
	if [ -n "${SLUICE_BIN:-}" ]; then
		echo "$SLUICE_BIN"
	else
		echo "$cluster_dir/sluice"
	fi
}

# build builds the binary once for this invocation (unless SLUICE_BIN is
# set). It builds next to the old binary and renames it into place, so
# nodes still running keep the one they started with.
built=
build() {
	if [ -n "${SLUICE_BIN:-}" ]; then
		[ -x "$SLUICE_BIN" ] || die "SLUICE_BIN=$SLUICE_BIN is not an executable file"
		return
	fi
	[ -n "$built" ] && return
	command -v go >/dev/null 2>&1 || die "Go is required to build sluice (or set SLUICE_BIN)"
	mkdir -p "$cluster_dir"
	echo "building $cluster_dir/sluice"
	# The commit, for sluice --version and the banner (a go.work build
	# records none by itself).
	rev=$(cd "$root" && git rev-parse HEAD 2>/dev/null && { git diff --quiet HEAD 2>/dev/null || echo -dirty; }) || rev=
	rev=$(printf '%s' "$rev" | tr -d '\n')
	(cd "$root" && go build -ldflags "-X github.com/sluicemq/sluice/server.buildRevision=$rev" -o "$cluster_dir/sluice.new" ./server/cmd/sluice)
	mv -f "$cluster_dir/sluice.new" "$cluster_dir/sluice"
	built=1
}

# flags prints node N's `sluice serve` arguments, one a line. A
# broker-only node has no CONTROLLER listener but still names it in
# controller.listener.names, as in Kafka: that is how it reaches the
# quorum of controller.quorum.voters.
flags() {
	local n=$1 roles=broker,controller listeners
	listeners="PLAINTEXT://127.0.0.1:$(client_port "$n")"
	if is_broker_only "$n"; then
		roles=broker
	else
		listeners+=",CONTROLLER://127.0.0.1:$(controller_port "$n")"
	fi
	printf '%s\n' serve \
		--set "node.id=$n" \
		--set "process.roles=$roles" \
		--set "listeners=$listeners" \
		--set "controller.listener.names=CONTROLLER" \
		--set "controller.quorum.voters=$voters" \
		--set "log.dirs=$(node_dir "$n")" \
		--set "metrics.listen=127.0.0.1:$(metrics_port "$n")" \
		--set "default.replication.factor=3" \
		--set "min.insync.replicas=2"
}

# alive succeeds if pid $1 is a process that has not exited (a zombie,
# not yet reaped, has).
alive() {
	local stat
	kill -0 "$1" 2>/dev/null || return 1
	stat=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	case $stat in
	Z*) return 1 ;;
	esac
}

# is_node succeeds if command line $2 is node $1's: a sluice serve with
# node N's log.dirs, which no other process has (the broker locks it).
is_node() {
	case $2 in
	*" serve "*"log.dirs=$(node_dir "$1") "* | *" serve "*"log.dirs=$(node_dir "$1")") ;;
	*) return 1 ;;
	esac
}

# live_pid prints node N's pid and succeeds if node N is running. The pid
# file is trusted only if it names a live process that is node N, so a
# stale one, even one whose pid was reused, is not taken for it. Without
# a valid pid file, a running node N (its pid file lost) is looked for
# among the processes and its pid file written again.
live_pid() {
	local n=$1 f pid args
	f=$(pid_file "$n")
	if [ -f "$f" ]; then
		pid=$(tr -cd '0-9' <"$f")
		if [ -n "$pid" ] && alive "$pid" && args=$(ps -ww -o args= -p "$pid" 2>/dev/null) && is_node "$n" "$args"; then
			echo "$pid"
			return 0
		fi
	fi
	while read -r pid args; do
		if is_node "$n" "$args" && alive "$pid"; then
			[ -d "$(node_dir "$n")" ] && echo "$pid" >"$f"
			echo "$pid"
			return 0
		fi
	done < <(ps -ww -eo pid=,args= 2>/dev/null)
	return 1
}

# shquote prints $1 quoted for a shell, only when it needs it.
shquote() {
	if [[ $1 =~ ^[A-Za-z0-9_./:=,@+-]+$ ]]; then
		printf '%s' "$1"
	else
		printf '%q' "$1"
	fi
}

# port_open succeeds if something accepts connections on 127.0.0.1:PORT.
port_open() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

start_node() {
	local n=$1 pid dir f port
	dir=$(node_dir "$n")
	f=$(pid_file "$n")
	if pid=$(live_pid "$n"); then
		echo "node $n: already running (pid $pid)"
		return 0
	fi
	if [ -f "$f" ]; then
		echo "node $n: removing stale pid file (pid $(cat "$f"))"
		rm -f "$f"
	fi
	for port in $(ports "$n"); do
		if port_open "$port"; then
			echo "node $n: 127.0.0.1:$port is already in use (by a node started without this script, or another program); not starting it" >&2
			return 1
		fi
	done
	mkdir -p "$dir"
	local args=() a
	while IFS= read -r a; do args+=("$a"); done < <(flags "$n")
	echo "== cluster.sh: starting node $n at $(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"$(log_file "$n")"
	nohup "$(bin)" "${args[@]}" >>"$(log_file "$n")" 2>&1 </dev/null &
	pid=$!
	echo "$pid" >"$f"
	# Wait (up to 10 s) until it listens or exits.
	local i
	for ((i = 0; i < 100; i++)); do
		if ! alive "$pid"; then
			rm -f "$f"
			echo "node $n: exited at start-up; the end of $(log_file "$n"):" >&2
			tail -n 15 "$(log_file "$n")" >&2
			return 1
		fi
		if port_open "$(client_port "$n")"; then
			echo "node $n: started (pid $pid), clients on 127.0.0.1:$(client_port "$n")"
			return 0
		fi
		sleep 0.1
	done
	echo "node $n: started (pid $pid) but not listening on 127.0.0.1:$(client_port "$n") yet; see $(log_file "$n")"
}

# wait_registered waits (up to 30 s) until the cluster has $1 brokers
# registered and none fenced, so that a topic created right after start
# gets its replication factor; it says so and returns 0 either way.
wait_registered() {
	local i out
	for ((i = 0; i < 300; i++)); do
		out=$("$(bin)" cluster describe --bootstrap-server "127.0.0.1:$(client_port 1),127.0.0.1:$(client_port 2),127.0.0.1:$(client_port 3)" --timeout 2s 2>/dev/null) || true
		if grep -q "^Brokers: $1\$" <<<"$out" && ! grep -q "^Fenced brokers: [1-9]" <<<"$out"; then
			echo "cluster: $1 brokers registered and unfenced"
			return 0
		fi
		sleep 0.1
	done
	echo "cluster: not every broker registered yet after 30 s; see tools/cluster.sh status and the nodes' logs"
}

# wait_gone waits up to $2 seconds for pid $1 to exit.
wait_gone() {
	local pid=$1 i
	for ((i = 0; i < $2 * 10; i++)); do
		alive "$pid" || return 0
		sleep 0.1
	done
	! alive "$pid"
}

stop_node() {
	local n=$1 pid f
	f=$(pid_file "$n")
	if ! pid=$(live_pid "$n"); then
		if [ -f "$f" ]; then
			echo "node $n: not running (removed stale pid file)"
			rm -f "$f"
		else
			echo "node $n: not running"
		fi
		return 0
	fi
	kill -TERM "$pid" 2>/dev/null || true
	if wait_gone "$pid" "$stop_timeout"; then
		echo "node $n: stopped (pid $pid)"
	else
		echo "node $n: still running ${stop_timeout}s after SIGTERM; sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
		wait_gone "$pid" 5 || die "node $n: pid $pid survived SIGKILL"
	fi
	rm -f "$f"
}

kill_node() {
	local n=$1 pid
	if ! pid=$(live_pid "$n"); then
		echo "node $n: not running"
		rm -f "$(pid_file "$n")"
		return 0
	fi
	kill -KILL "$pid" 2>/dev/null || true
	wait_gone "$pid" 5 || die "node $n: pid $pid survived SIGKILL"
	rm -f "$(pid_file "$n")"
	echo "node $n: killed (pid $pid, SIGKILL)"
}

status() {
	local n pid role any=
	for n in $(known_nodes); do
		if pid=$(live_pid "$n"); then
			any=1
			local state="not listening yet"
			port_open "$(client_port "$n")" && state="listening"
			role="controller 127.0.0.1:$(controller_port "$n")"
			is_broker_only "$n" && role="broker only"
			echo "node $n: running, pid $pid, $state on 127.0.0.1:$(client_port "$n") ($role), console http://127.0.0.1:$(metrics_port "$n")/ui/"
		elif [ -f "$(pid_file "$n")" ]; then
			echo "node $n: dead (stale pid file: pid $(cat "$(pid_file "$n")"))"
		else
			echo "node $n: stopped"
		fi
	done
	if [ -n "$any" ] && command -v kcat >/dev/null 2>&1; then
		echo
		echo "kcat -L -b $bootstrap:"
		if command -v timeout >/dev/null 2>&1; then
			timeout 15 kcat -L -b "$bootstrap" -m 5 || echo "(kcat -L failed)"
		else
			kcat -L -b "$bootstrap" -m 5 || echo "(kcat -L failed)"
		fi
	fi
}

logs() {
	local n=$1 f
	f=$(log_file "$n")
	[ -f "$f" ] || die "node $n has no log yet ($f)"
	if [ "${2:-}" = "-f" ]; then
		tail -n 100 -F "$f"
	else
		tail -n 100 "$f"
	fi
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
start)
	targets=("${nodes[@]}")
	if [ $# -gt 0 ]; then
		check_node "$1"
		targets=("$1")
	fi
	build
	failed=0
	for n in "${targets[@]}"; do
		start_node "$n" || failed=1
	done
	[ "$failed" = 0 ] && wait_registered "${#nodes[@]}"
	exit "$failed"
	;;
stop)
	targets=()
	while IFS= read -r n; do targets+=("$n"); done < <(known_nodes brokers-first)
	if [ $# -gt 0 ]; then
		check_node "$1"
		targets=("$1")
	fi
	for n in "${targets[@]}"; do
		stop_node "$n"
	done
	;;
status)
	status
	;;
restart)
	check_node "${1:-}"
	build
	stop_node "$1"
	start_node "$1"
	;;
kill)
	check_node "${1:-}"
	kill_node "$1"
	;;
logs)
	check_node "${1:-}"
	logs "$1" "${2:-}"
	;;
flags)
	check_node "${1:-}"
	line=$(shquote "$(bin)")
	while IFS= read -r a; do line+=" $(shquote "$a")"; done < <(flags "$1")
	echo "$line"
	;;
*)
	usage
	;;
esac
