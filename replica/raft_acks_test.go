package replica

import (
	"slices"
	"testing"
	"time"
)

// TestISRAndCopies: the ISR is the leader and the voters caught up within
// the lag time and not fenced; an entry's copies are counted among the
// ISR only, so a replica that holds it but is out of the ISR (lagging
// before, fenced, a learner) does not count.
func TestISRAndCopies(t *testing.T) {
	now := time.Unix(1000, 0)
	lag := 10 * time.Second
	prog := []ReplicaProgress{
		{ID: 2, Match: 9, CaughtUp: now.Add(-time.Second)},
		{ID: 1, Match: 10, CaughtUp: now},
		{ID: 3, Match: 10, CaughtUp: now.Add(-time.Minute)}, // caught up long ago, holds 10 now
		{ID: 4, Match: 10, CaughtUp: now},                   // fenced below
		{ID: 5, Match: 10, Learner: true, CaughtUp: now},
	}
	isr := isrOf(prog, 1, now, lag, []uint64{4})
	if want := []uint64{1, 2}; !slices.Equal(isr, want) {
		t.Fatalf("isrOf = %v, want %v", isr, want)
	}
	for _, tc := range []struct {
		index uint64
		want  int
	}{{9, 2}, {10, 1}, {11, 0}} {
		if got := copies(prog, isr, tc.index); got != tc.want {
			t.Errorf("copies of index %d = %d, want %d", tc.index, got, tc.want)
		}
	}
	if isr := isrOf(prog, 7, now, lag, nil); isr != nil {
		t.Errorf("isrOf for a replica not in the progress = %v, want nil", isr)
	}
	// The leader is never left out of its own ISR.
	if isr := isrOf(prog, 1, now, lag, []uint64{1}); !slices.Equal(isr, []uint64{1, 2, 4}) {
		t.Errorf("isrOf with the leader fenced = %v", isr)
	}
}
