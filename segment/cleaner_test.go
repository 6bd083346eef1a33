package segment

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

func TestCleanerCleansRegisteredLogs(t *testing.T) {
	cfg := smallCompactConfig()
	mem := vfs.NewMem()
	var logs []*Log
	for i := 0; i < 3; i++ {
		l, err := Open(mem, fmt.Sprintf("/c/t-%d", i), cfg, Options{Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		for j := 0; j < 40; j++ {
			rec := batch.Record{Timestamp: 1, Key: []byte(fmt.Sprintf("k%d", j%3)), Value: []byte(fmt.Sprintf("v%d", j))}
			mustAppend(t, l, batch.Build(batch.NewBuildOptions(), []batch.Record{rec}))
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		logs = append(logs, l)
	}
	c := NewCleaner(2, 5*time.Millisecond, quietLogger())
	hw := func() int64 { return 30 }
	for _, l := range logs[:2] {
		c.Add(l, hw)
	}
	c.Start()
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for _, l := range logs[:2] {
		for {
			if _, needed := l.CleanableRatio(30); !needed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not cleaned", l.Dir())
			}
			time.Sleep(time.Millisecond)
		}
		c.Remove(l)
		// Below the high watermark each key has one record; the rest is
		// untouched.
		seen := map[string]bool{}
		for _, h := range readAll(t, l, 0) {
			if h.LastOffset() >= 30 || h.NumRecords == 0 {
				continue
			}
			data, _, err := l.ReadBytes(nil, h.BaseOffset, 1, NoUpperBound)
			if err != nil {
				t.Fatal(err)
			}
			_, recs, _ := batch.Records(data[:h.Size()])
			for _, r := range recs {
				if l.firstDirty > r.Offset && seen[string(r.Key)] {
					t.Fatalf("%s: key %s twice below the cleaner offset", l.Dir(), r.Key)
				}
				seen[string(r.Key)] = true
			}
		}
	}
	if _, needed := logs[2].CleanableRatio(NoUpperBound); !needed {
		t.Fatal("an unregistered log was cleaned")
	}
}

// A log whose clean keeps failing (a damaged batch) is marked uncleanable
// and skipped, so it does not starve the others; it is retried after a
// growing backoff and cleaned once the damage is gone.
func TestCleanerSkipsUncleanableLog(t *testing.T) {
	cfg := smallCompactConfig()
	mem := vfs.NewMem()
	var logs []*Log
	for i, n := range []int{60, 40} { // log 0 is the filthiest
		l, err := Open(mem, fmt.Sprintf("/c/t-%d", i), cfg, Options{Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		keys := 3
		if i == 1 {
			keys = 20
		}
		fillKeyed(t, l, n, keys, "v")
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		if i == 1 { // cleaned before, with new dirty data since
			if _, err := l.Clean(NoUpperBound); err != nil {
				t.Fatal(err)
			}
			fillKeyed(t, l, 40, keys, "w")
			l.Roll()
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		logs = append(logs, l)
	}
	r0, _ := logs[0].CleanableRatio(NoUpperBound)
	r1, _ := logs[1].CleanableRatio(NoUpperBound)
	if r0 <= r1 {
		t.Fatalf("log 0 must be the filthiest: ratios %.2f, %.2f", r0, r1)
	}
	// Bit rot in a value byte of log 0's first batch.
	flip := func() { flipByte(t, mem, "/c/t-0/"+MakeFileName(0, KindLog), 70) }
	flip()
	clock := newClock()
	c := NewCleaner(1, time.Second, quietLogger())
	c.now = clock.Now
	for _, l := range logs {
		c.Add(l, nil)
	}
	for i := 0; i < 5; i++ {
		c.CleanOnce()
	}
	if _, needed := logs[1].CleanableRatio(NoUpperBound); needed {
		t.Fatal("log 1 never cleaned: the failing log 0 is picked every pass")
	}
	backoff := func() time.Duration {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.uncleanable[logs[0]].backoff
	}
	if b := backoff(); b != 10*time.Second {
		t.Fatalf("first uncleanable backoff %v, want 10 × log.cleaner.backoff.ms", b)
	}
	// Retried after the backoff: it fails again and the backoff doubles.
	clock.Add(10 * time.Second)
	if c.CleanOnce() {
		t.Fatal("the damaged log was cleaned")
	}
	if b := backoff(); b != 20*time.Second {
		t.Fatalf("backoff after a second failure %v, want 20s", b)
	}
	// Repaired: once the backoff passes, it is cleaned again.
	flip()
	if c.CleanOnce() {
		t.Fatal("an uncleanable log was retried before its backoff")
	}
	clock.Add(20 * time.Second)
	if !c.CleanOnce() {
		t.Fatal("the repaired log was not retried")
	}
	if _, needed := logs[0].CleanableRatio(NoUpperBound); needed {
		t.Fatal("log 0 still needs cleaning")
	}
	c.mu.Lock()
	_, still := c.uncleanable[logs[0]]
	c.mu.Unlock()
	if still {
		t.Fatal("log 0 still marked uncleanable after a clean")
	}
}
