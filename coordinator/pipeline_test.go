package coordinator

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// heldLog is an AsyncLog whose commits the test releases one by one, in
// append order: a quorum round trip that takes as long as the test wants.
type heldLog struct {
	memLog
	mu      sync.Mutex
	pending []chan struct{} // one per AppendAsync not yet committed, in order
	added   chan struct{}   // kicked on every AppendAsync
	synced  chan struct{}   // kicked on every Append
}

func newHeldLog() *heldLog {
	return &heldLog{added: make(chan struct{}, 64), synced: make(chan struct{}, 64)}
}

// Append (the coordinator's writes that are not pipelined) commits at
// once and kicks synced.
func (l *heldLog) Append(ctx context.Context, recs []Record) error {
	err := l.memLog.Append(ctx, recs)
	l.synced <- struct{}{}
	return err
}

func (l *heldLog) AppendAsync(recs []Record) (func(context.Context) error, error) {
	if err := l.memLog.Append(context.Background(), recs); err != nil {
		return nil, err
	}
	ch := make(chan struct{})
	l.mu.Lock()
	l.pending = append(l.pending, ch)
	l.mu.Unlock()
	l.added <- struct{}{}
	return func(ctx context.Context) error {
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, nil
}

// commitOne commits the oldest pending batch.
func (l *heldLog) commitOne(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) == 0 {
		t.Fatal("no batch pending")
	}
	close(l.pending[0])
	l.pending = l.pending[1:]
}

func waitAdded(t *testing.T, l *heldLog, what string) {
	t.Helper()
	select {
	case <-l.added:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not appended within 5 s", what)
	}
}

// Offset commits to one shard overlap: the second is appended while the
// first still waits for its commit (the shard's write mutex is not held
// across a commit), the applies follow the log order, and a group change
// (DeleteGroups) waits until both are applied before it checks.
func TestOffsetCommitsPipelined(t *testing.T) {
	log := newHeldLog()
	clk := newManualClock()
	c := New(testConfig(1, testTopics, clk))
	if err := c.Load(0, log); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	codes := make(chan int16, 2)
	go func() { codes <- commit(c, "g", -1, "", "t", 0, 10) }()
	waitAdded(t, log, "the first commit")
	go func() { codes <- commit(c, "g", -1, "", "t", 1, 20) }()
	waitAdded(t, log, "the second commit, while the first is not committed")
	if got := fetch(c, "g"); len(got) != 0 {
		t.Fatalf("offsets visible before their commit: %v", got)
	}
	deleted := make(chan *kmsg.DeleteGroupsResponse, 1)
	go func() {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{"g"}
		deleted <- c.DeleteGroups(context.Background(), req)
	}()
	select {
	case <-log.synced:
		t.Fatal("DeleteGroups appended before the offset commits ahead of it were applied")
	case <-time.After(100 * time.Millisecond):
	}
	log.commitOne(t)
	log.commitOne(t)
	for range 2 {
		if code := <-codes; code != 0 {
			t.Fatalf("commit: code %d", code)
		}
	}
	// DeleteGroups saw both offsets and wrote their tombstones: memory
	// and a replay agree that the group is gone.
	select {
	case resp := <-deleted:
		if code := resp.Groups[0].ErrorCode; code != 0 {
			t.Fatalf("DeleteGroups: code %d", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("DeleteGroups did not finish")
	}
	if got := fetch(c, "g"); len(got) != 0 {
		t.Fatalf("offsets after DeleteGroups: %v", got)
	}
	c2 := New(testConfig(1, testTopics, clk))
	t.Cleanup(c2.Close)
	if err := c2.Load(0, &log.memLog); err != nil {
		t.Fatal(err)
	}
	if got := fetch(c2, "g"); len(got) != 0 {
		t.Fatalf("offsets after a replay: %v", got)
	}
}
