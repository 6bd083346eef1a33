package segment

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

func TestCleanerCleansRegisteredLogs(t *testing.T) {
	cfg := testConfig()
	cfg.CleanupPolicy = PolicyCompact
	cfg.SegmentBytes = 300
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
