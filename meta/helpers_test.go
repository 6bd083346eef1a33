package meta

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testOptions are quiet options; seed > 0 makes topic IDs deterministic.
func testOptions(seed uint64) Options {
	o := Options{Logger: quietLogger()}
	if seed > 0 {
		var s [32]byte
		s[0] = byte(seed)
		o.Rand = rand.NewChaCha8(s)
	}
	return o
}

func mustOpen(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// openTemp opens a store in a fresh temporary folder, closed at cleanup.
func openTemp(t testing.TB) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s := mustOpen(t, dir, testOptions(0))
	t.Cleanup(func() { s.Close() })
	return s, dir
}

// reopen closes s and opens dir again with the same options.
func reopen(t testing.TB, s *Store, dir string) *Store {
	t.Helper()
	opts := s.opts
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s2 := mustOpen(t, dir, opts)
	t.Cleanup(func() { s2.Close() })
	return s2
}

// dumpState returns every state key and value in Pebble, in key order,
// one "key = value" line each (the log and format keys excluded).
func dumpState(t testing.TB, s *Store) string {
	t.Helper()
	var buf bytes.Buffer
	for _, p := range statePrefixes {
		err := scan(s.db, p, func(k, v []byte) error {
			fmt.Fprintf(&buf, "%q = %x\n", k, v)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return buf.String()
}

// memState describes the in-memory state, sorted, for comparisons.
func memState(s *Store) string {
	var buf bytes.Buffer
	for _, tp := range s.Topics() {
		fmt.Fprintf(&buf, "%s leaders=%v%s\n", tp.record(), tp.Leaders, formatMoves(tp.Moves))
	}
	for _, b := range s.Brokers() {
		fmt.Fprintf(&buf, "%v fenced=%v decommissioning=%v\n", b.registration(), b.Fenced, b.Decommissioning)
	}
	s.mu.RLock()
	fmt.Fprintf(&buf, "producer next %d\nbroker %s\n", s.st.producerNext, formatMap(s.st.broker))
	fmt.Fprint(&buf, formatNodeConfigs(s.st.nodeConfigs))
	s.mu.RUnlock()
	return buf.String()
}

// checkConsistent verifies the three views of the state agree: memory,
// the stored keys (loaded afresh) and a replay of the log.
func checkConsistent(t testing.TB, s *Store) {
	t.Helper()
	loaded, err := loadState(s.db)
	if err != nil {
		t.Fatalf("loadState: %v", err)
	}
	replayed, err := replay(s.db, s.Offset())
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	s.mu.RLock()
	mem := describeState(s.st)
	s.mu.RUnlock()
	if got := describeState(loaded); got != mem {
		t.Fatalf("stored state differs from memory:\nstored:\n%s\nmemory:\n%s", got, mem)
	}
	if got := describeState(replayed); got != mem {
		t.Fatalf("replayed log differs from memory:\nreplayed:\n%s\nmemory:\n%s", got, mem)
	}
}

func describeState(st *state) string {
	var lines []string
	for _, tp := range st.topics {
		lines = append(lines, fmt.Sprintf("%v leaders=%v%s", tp.record(), tp.Leaders, formatMoves(tp.Moves)))
	}
	for _, b := range st.brokers {
		lines = append(lines, fmt.Sprintf("%v fenced=%v decommissioning=%v", b.registration(), b.Fenced, b.Decommissioning))
	}
	for n, id := range st.names {
		lines = append(lines, fmt.Sprintf("name %s -> %s", n, FormatTopicID(id)))
	}
	for k, n := range st.collide {
		lines = append(lines, fmt.Sprintf("collide %s -> %s", k, n))
	}
	slices.Sort(lines)
	lines = append(lines, fmt.Sprintf("producer next %d", st.producerNext),
		"broker "+formatMap(st.broker), formatNodeConfigs(st.nodeConfigs))
	var buf bytes.Buffer
	for _, l := range lines {
		buf.WriteString(l + "\n")
	}
	return buf.String()
}

// rawSet writes a key directly, bypassing the log (to damage the state).
func rawSet(t testing.TB, s *Store, k, v []byte) {
	t.Helper()
	if err := s.db.Set(k, v, pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

func rawDelete(t testing.TB, s *Store, k []byte) {
	t.Helper()
	if err := s.db.Delete(k, pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

// formatMoves prints a topic's moves by partition: " moves={0:{[1 2] [3] [1]}}",
// or nothing when there are none.
func formatMoves(m map[int32]PartitionMove) string {
	if m == nil {
		return ""
	}
	parts := slices.Sorted(maps.Keys(m))
	var sb strings.Builder
	sb.WriteString(" moves={")
	for i, p := range parts {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, "%d:{initial=%v adding=%v removing=%v}", p, m[p].Initial, m[p].Adding, m[p].Removing)
	}
	sb.WriteByte('}')
	return sb.String()
}

// formatNodeConfigs prints the per-broker configs, one line per node id.
func formatNodeConfigs(m map[int32]map[string]string) string {
	var sb strings.Builder
	for _, id := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&sb, "node %d %s\n", id, formatMap(m[id]))
	}
	return sb.String()
}
