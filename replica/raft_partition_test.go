package replica

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// A produce waiting for a commit that cannot come (no quorum) fails with a
// retriable NOT_LEADER_OR_FOLLOWER when the partition closes, instead of
// hanging until the request times out.
func TestCloseFailsPendingProduce(t *testing.T) {
	c := newPCluster(t, 3, 1, 1)
	c.startAll()
	g := c.groups[0]
	if err := c.nodes[1].host.Campaign(g); err != nil {
		t.Fatal(err)
	}
	c.waitFor(1)
	p := c.nodes[1].parts[g]
	c.stop(2)
	c.stop(3)
	pd, err := p.ProduceWith(valueBatch("x"), ProduceOptions{Acks: AcksAll})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = pd.Wait(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("without a quorum the produce completed: %v", err)
	}
	c.stop(1)
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := pd.Wait(ctx); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("after Close: %v, want ErrNotLeader", err)
	}
}

// A follower refuses produce with the leader's id and epoch (the KIP-951
// hint); during an election there is no leader to name.
func TestFollowerProduceNamesLeader(t *testing.T) {
	c := newPCluster(t, 3, 1, 1)
	c.startAll()
	g := c.groups[0]
	if _, err := c.nodes[2].parts[g].ProduceWith(valueBatch("x"), ProduceOptions{Acks: AcksAll}); !errors.Is(err, ErrLeaderNotAvailable) {
		t.Fatalf("before any election: %v, want ErrLeaderNotAvailable", err)
	}
	if err := c.nodes[1].host.Campaign(g); err != nil {
		t.Fatal(err)
	}
	c.waitFor(1)
	_, err := c.nodes[2].parts[g].ProduceWith(valueBatch("x"), ProduceOptions{Acks: AcksAll})
	var nl *NotLeaderError
	if !errors.As(err, &nl) || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("produce to a follower: %v", err)
	}
	if nl.Leader != 1 || nl.Epoch != c.nodes[1].parts[g].LeaderEpoch() || nl.Epoch <= 0 {
		t.Fatalf("hint: leader %d epoch %d, want leader 1 epoch %d", nl.Leader, nl.Epoch, c.nodes[1].parts[g].LeaderEpoch())
	}
}

// message.timestamp.type=LogAppendTime: the leader stamps its clock once
// before proposing, every replica stores the same bytes, and the produce
// answer carries the time.
func TestRaftLogAppendTime(t *testing.T) {
	c := newPCluster(t, 3, 1, 1)
	c.cfg.LogAppendTime = true
	c.startAll()
	g := c.groups[0]
	if err := c.nodes[1].host.Campaign(g); err != nil {
		t.Fatal(err)
	}
	c.waitFor(1)
	before := time.Now().UnixMilli()
	res, err := c.produceWait(c.nodes[1].parts[g], valueBatch("x"), AcksAll)
	if err != nil {
		t.Fatal(err)
	}
	if res.LogAppendTime < before || res.LogAppendTime > time.Now().UnixMilli() {
		t.Fatalf("LogAppendTime %d, want the leader's clock (from %d)", res.LogAppendTime, before)
	}
	c.settle()
	for _, n := range c.up() {
		data, rr, err := n.parts[g].ReadBytes(nil, 0, 1<<20)
		rr.Release()
		if err != nil {
			t.Fatal(err)
		}
		h, err := batch.ParseHeader(data)
		if err != nil || !h.LogAppendTime() || h.MaxTimestamp != res.LogAppendTime {
			t.Fatalf("node %d stores max timestamp %d (log append time %v), want %d: %v", n.id, h.MaxTimestamp, h.LogAppendTime(), res.LogAppendTime, err)
		}
	}
}

// A leader whose log fails to sync leaves the host: it stops claiming
// leadership and its waiting produces fail (retriable) instead of
// hanging.
func TestStorageFailureFailsProduces(t *testing.T) {
	c := newPCluster(t, 3, 1, 1)
	var armed atomic.Bool
	c.nodes[1].inject = vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if armed.Load() && op == vfs.OpSync && strings.HasSuffix(path, ".log") {
			return errors.New("injected sync failure")
		}
		return nil
	})
	c.startAll()
	g := c.groups[0]
	if err := c.nodes[1].host.Campaign(g); err != nil {
		t.Fatal(err)
	}
	c.waitFor(1)
	p := c.nodes[1].parts[g]
	armed.Store(true)
	pd, err := p.ProduceWith(valueBatch("x"), ProduceOptions{Acks: AcksAll})
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = pd.Wait(ctx)
	}
	if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrLeaderNotAvailable) {
		t.Fatalf("produce on a leader whose log fails: %v", err)
	}
	if _, _, ok := p.Leader(); ok && p.IsLeader() {
		t.Fatal("the failed replica still claims leadership")
	}
}

// A leader sends its entries before its own write is durable (the raft
// thesis, 10.2.1): followers append while the leader's fsync is still
// running.
func TestLeaderSendsBeforeItsWrite(t *testing.T) {
	c := newPCluster(t, 3, 1, 1)
	var armed atomic.Bool
	release := make(chan struct{})
	c.nodes[1].inject = vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if armed.Load() && op == vfs.OpSync && strings.HasSuffix(path, ".log") {
			<-release
		}
		return nil
	})
	c.startAll()
	g := c.groups[0]
	if err := c.nodes[1].host.Campaign(g); err != nil {
		t.Fatal(err)
	}
	c.waitFor(1)
	c.settle()
	armed.Store(true)
	if _, err := c.nodes[1].parts[g].ProduceWith(valueBatch("x"), ProduceOptions{Acks: AcksLeader}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.nodes[2].parts[g].LogEndOffset() != 1 || c.nodes[3].parts[g].LogEndOffset() != 1 {
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("the followers did not append while the leader's fsync was held (log end offsets %d, %d)", c.nodes[2].parts[g].LogEndOffset(), c.nodes[3].parts[g].LogEndOffset())
		}
		time.Sleep(time.Millisecond)
	}
	armed.Store(false)
	close(release)
}

// A raft leader refuses a produced batch the log would refuse (a bad CRC)
// before proposing it: it never becomes an entry, and the leader keeps
// leading.
func TestCorruptProduceNotProposed(t *testing.T) {
	c := newPCluster(t, 3, 1, 1)
	c.startAll()
	g := c.groups[0]
	if err := c.nodes[1].host.Campaign(g); err != nil {
		t.Fatal(err)
	}
	c.waitFor(1)
	p := c.nodes[1].parts[g]
	b := valueBatch("x")
	b[len(b)-1] ^= 1
	if _, err := p.ProduceWith(b, ProduceOptions{Acks: AcksAll}); !errors.Is(err, segment.ErrCorrupt) {
		t.Fatalf("produce of a batch with a bad CRC: %v, want segment.ErrCorrupt", err)
	}
	pd, err := p.ProduceWith(valueBatch("y"), ProduceOptions{Acks: AcksAll})
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = pd.Wait(ctx)
	}
	if err != nil || !p.IsLeader() {
		t.Fatalf("produce after the corrupt batch: %v (leader %v)", err, p.IsLeader())
	}
}
