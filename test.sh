#!/usr/bin/env bash
# Runs every check and test of every Sluice module. Installs what the tests
# need when it is missing (on Debian, with apt-get). Usage: ./test.sh
# Set SLUICE_TEST_SHORT=1 to run the random crash tests with fewer workloads
# (go test -short).
set -euo pipefail
cd "$(dirname "$0")"

need_go() {
	if ! command -v go >/dev/null 2>&1; then
		echo "test.sh: Go is required (https://go.dev/dl/); it is not on PATH" >&2
		exit 1
	fi
}

# Debian packages the tests use; installed only when missing.
apt_install() {
	local missing=()
	for pkg in "$@"; do
		dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	local sudo=""
	[ "$(id -u)" -ne 0 ] && sudo="sudo"
	echo "test.sh: installing ${missing[*]}"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

need_go
# Real Kafka clients the broker tests drive: kcat (librdkafka),
# kafka-python and confluent-kafka-python (for Debian's /usr/bin/python3);
# Chromium, which the web console's browser test drives (chromedp).
apt_install kcat python3-kafka python3-confluent-kafka chromium
export SLUICE_REQUIRE_CLIENTS=1

modules=$(sed -n 's/^\t\.\/\(.*\)$/\1/p' go.work)

echo "== gofmt"
unformatted=$(gofmt -l $modules)
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet, and each module builds alone (GOWORK=off)"
for m in $modules; do
	(cd "$m" && go vet ./... && GOWORK=off go build ./...)
done

echo "== go mod tidy -diff (each module alone, GOWORK=off)"
for m in $modules; do
	if ! (cd "$m" && GOWORK=off go mod tidy -diff); then
		echo "test.sh: go mod tidy would change $m/go.mod or $m/go.sum (run it there with GOWORK=off)" >&2
		exit 1
	fi
done

# staticcheck, pinned: built once from the module proxy into a temporary
# folder (go install ...@version ignores go.work and the modules' go.mod),
# then run in each module (checks configured in staticcheck.conf).
staticcheck_version=v0.8.2
echo "== staticcheck $staticcheck_version"
staticcheck_bin=$(mktemp -d)
trap 'rm -rf "$staticcheck_bin"' EXIT
GOBIN="$staticcheck_bin" go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version"
for m in $modules; do
	(cd "$m" && "$staticcheck_bin/staticcheck" ./...)
done

# gotest runs go test with its arguments, its output also kept in a file:
# when it fails, the failures and, after a timeout, the tests that were
# still running are printed again at the end (a CI log's tail would show
# only the goroutine dump).
gotest() {
	local log
	log=$(mktemp)
	if go test "$@" 2>&1 | tee "$log"; then
		rm -f "$log"
		return 0
	fi
	echo "== go test failed in $(pwd): $*"
	grep -E -- '^(--- FAIL|FAIL|panic:|    [a-z_]+_test\.go:[0-9]+:)' "$log" | head -100 || true
	sed -n '/running tests:/,/^$/p' "$log"
	rm -f "$log"
	return 1
}

echo "== go test"
for m in $modules; do
	if [ "$m" = tools ]; then
		# tools' multi-process tests (clustertest's scenarios, the chaos
		# runner's schedules) each start a cluster of broker processes:
		# one package at a time. Within each, the runs and scenarios
		# mostly wait (on held faults, elections, timeouts), so several
		# run at once (t.Parallel): the chaos package's four two at a
		# time (-parallel is GOMAXPROCS; together they used about 1.2
		# cores), clustertest's scenarios, about a third of a core
		# each, four at a time (their part of the package took 98 s
		# two at a time, 62 s four at a time; the whole package then
		# used 100 s of CPU in 96 s).
		# They and the alert rules' evaluator (Prometheus's rule
		# engine, a large build) run without -race: the race detector
		# would watch only their harness, not the brokers (separate
		# processes, built without it); the rest of tools runs with it.
		(cd "$m" && gotest -race -count=1 -timeout 20m -p 1 ${SLUICE_TEST_SHORT:+-short} $(go list ./... | grep -v -E '/tools/(alerts|chaos|clustertest)(/|$)'))
		(cd "$m" && gotest -count=1 -timeout 20m -p 1 ${SLUICE_TEST_SHORT:+-short} ./alerts/... ./chaos/...)
		(cd "$m" && gotest -count=1 -timeout 20m -parallel 4 ${SLUICE_TEST_SHORT:+-short} ./clustertest/...)
		continue
	fi
	if [ "$m" = segment ]; then
		# segment's random and every-operation crash tests replay
		# workloads against the in-memory FS: the race detector makes
		# them about 6 times slower (TestRaftCrash: 23 s a seed with it,
		# 3.5 s without) and watches nothing they exercise that the
		# concurrent tests (TestCleanConcurrentWithLogChanges, the file
		# cache's), which keep it, do not. They run without it.
		crash='^Test(CrashRecovery|RaftCrash|CleanCrashRandom|CleanCrashEveryOp|CleanRaftLogCrashEveryOp|InstallSnapshotCrashEveryOp|SyncSurvivesCrash)$'
		(cd "$m" && gotest -race -count=1 -timeout 20m ${SLUICE_TEST_SHORT:+-short} -skip "$crash" ./...)
		(cd "$m" && gotest -count=1 -timeout 20m ${SLUICE_TEST_SHORT:+-short} -run "$crash" .)
		continue
	fi
	if [ "$m" = server ]; then
		# server's parallel tests mostly wait (elections, sessions,
		# heartbeats, throttles: the package used about 0.7 of the two
		# cores), so six run at once, not GOMAXPROCS. On a loaded
		# 2-core machine the parallel part of the server package took
		# 235 s with -parallel 4, 188 s with 6, 165 s with 8; 6 leaves
		# the tests that bound a wait (KIP-848 spread, throttled moves)
		# some headroom.
		(cd "$m" && gotest -race -count=1 -timeout 20m -parallel 6 ${SLUICE_TEST_SHORT:+-short} ./...)
		continue
	fi
	(cd "$m" && gotest -race -count=1 -timeout 20m ${SLUICE_TEST_SHORT:+-short} ./...)
done

echo "== benchmarks compile and run once"
(cd bench && SLUICE_BENCH_MOVE_BYTES=$((16 << 20)) go test -count=1 -run '^$' -bench . -benchtime 1x ./... >/dev/null) # the move benchmark moves 16 MiB, not 1 GiB
echo "test.sh: all checks passed"
