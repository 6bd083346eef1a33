package segment

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// testClock is a settable clock for Options.Now.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *testClock { return &testClock{t: time.UnixMilli(1_700_000_000_000)} }

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *testClock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// mkBatch builds an uncompressed batch of n records with values of
// valueSize bytes, timestamps ts, ts+1, ...; values encode the record's
// index so reads can be checked.
func mkBatch(n int, ts int64, valueSize int, tag string) []byte {
	recs := make([]batch.Record, n)
	for i := range recs {
		v := []byte(fmt.Sprintf("%s-%d-", tag, i))
		for len(v) < valueSize {
			v = append(v, 'x')
		}
		recs[i] = batch.Record{Timestamp: ts + int64(i), Key: []byte(fmt.Sprintf("k%d", i)), Value: v}
	}
	return batch.Build(batch.NewBuildOptions(), recs)
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	return cfg
}

func openTest(t testing.TB, fs vfs.FS, cfg Config, clock *testClock) *Log {
	t.Helper()
	if clock == nil {
		clock = newClock()
	}
	l, err := Open(fs, "/p/topic-0", cfg, Options{Now: clock.Now, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l
}

func mustAppend(t testing.TB, l *Log, b []byte) int64 {
	t.Helper()
	off, err := l.Append(b)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return off
}

// readAll reads every batch from offset to the log end offset and returns
// their headers, checking each batch's CRC.
func readAll(t testing.TB, l *Log, offset int64) []batch.Header {
	t.Helper()
	var out []batch.Header
	for {
		data, res, err := l.ReadBytes(nil, offset, 64<<10, NoUpperBound)
		if err != nil {
			t.Fatalf("read at %d: %v", offset, err)
		}
		if res.Bytes == 0 {
			return out
		}
		for len(data) > 0 {
			h, err := batch.ParseHeader(data)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if _, err := batch.ValidateHeader(data[:h.Size()]); err != nil {
				t.Fatalf("batch at offset %d: %v", h.BaseOffset, err)
			}
			out = append(out, h)
			data = data[h.Size():]
		}
		offset = res.NextOffset
	}
}

// headersOf parses the batch headers in data.
func headersOf(t testing.TB, data []byte) []batch.Header {
	t.Helper()
	var out []batch.Header
	for len(data) > 0 {
		h, err := batch.ParseHeader(data)
		if err != nil {
			t.Fatalf("parse: %v", err)
		}
		out = append(out, h)
		data = data[h.Size():]
	}
	return out
}
