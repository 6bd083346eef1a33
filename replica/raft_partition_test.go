package replica

import (
	"context"
	"errors"
	"testing"
	"time"
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
