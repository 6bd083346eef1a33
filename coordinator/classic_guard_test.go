package coordinator

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// lateClock is a manualClock whose timers cannot be stopped: stop reports
// false, as a real timer's does once it fired and its callback waits for
// Coordinator.mu. Every callback the coordinator thought it cancelled runs
// when the clock passes it.
type lateClock struct{ *manualClock }

func (c lateClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.manualClock.AfterFunc(d, f)
	return func() bool { return false }
}

// panicClock is a manualClock whose AfterFunc panics while armed is set: a
// panic in the middle of a handler holding Coordinator.mu.
type panicClock struct {
	*manualClock
	armed atomic.Bool
}

func (c *panicClock) AfterFunc(d time.Duration, f func()) func() bool {
	if c.armed.Load() {
		panic("injected clock panic")
	}
	return c.manualClock.AfterFunc(d, f)
}

func classicJoinReq(version int16, memberID string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version, req.Group, req.MemberID, req.ProtocolType = version, "g", memberID, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 20000
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0}}}
	return req
}

func classicSyncReq(jr *kmsg.JoinGroupResponse) *kmsg.SyncGroupRequest {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version, req.Group, req.Generation, req.MemberID = 3, "g", jr.Generation, jr.MemberID
	if jr.LeaderID == jr.MemberID {
		for _, m := range jr.Members {
			req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m.MemberID, MemberAssignment: []byte{0, 0}})
		}
	}
	return req
}

// waitClassicWrites waits for the background writes of g's classic group.
func waitClassicWrites(c *Coordinator, id string) {
	c.mu.Lock()
	var cg *classicGroup
	for _, s := range c.shards {
		if g := s.groups[id]; g != nil {
			cg = g.classic
		}
	}
	c.mu.Unlock()
	if cg != nil {
		cg.writes.Wait()
	}
}

// convertToConsumer makes group "g", which must have no members, a KIP-848
// group.
func convertToConsumer(t *testing.T, c *Coordinator) {
	t.Helper()
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version = 1
	hb.Group, hb.MemberID, hb.MemberEpoch = "g", "m1", 0
	hb.RebalanceTimeoutMillis = 30000
	hb.SubscribedTopicNames = []string{"t"}
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if r := c.ConsumerGroupHeartbeat(context.Background(), hb); r.ErrorCode != 0 {
		t.Fatalf("consumer heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.shards[0].groups["g"]; g == nil || g.consumer == nil || g.classic != nil {
		t.Fatal("group g was not converted to a consumer group")
	}
}

// lateCoordinator is a coordinator serving partition 0 on a lateClock.
func lateCoordinator(t *testing.T) (*Coordinator, lateClock) {
	clk := lateClock{newManualClock()}
	c := New(testConfig(1, testTopics, clk))
	if err := c.Load(0, &memLog{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, clk
}

// TestClassicTimersAfterConversion: classic timers (a member's session, a
// KIP-394 pending member id, the join phase) that already fired when their
// group became a KIP-848 group find it no longer classic and do nothing;
// before, they dereferenced the nil classic state in a timer goroutine.
func TestClassicTimersAfterConversion(t *testing.T) {
	ctx := context.Background()
	t.Run("session", func(t *testing.T) {
		c, clk := lateCoordinator(t)
		jr := c.JoinGroup(ctx, classicJoinReq(3, ""))
		if jr.ErrorCode != 0 {
			t.Fatalf("join: %v", kerr.ErrorForCode(jr.ErrorCode))
		}
		if r := c.SyncGroup(ctx, classicSyncReq(jr)); r.ErrorCode != 0 {
			t.Fatalf("sync: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.Version, leave.Group = 5, "g"
		leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: jr.MemberID}}
		if r := c.LeaveGroup(ctx, leave); r.ErrorCode != 0 || r.Members[0].ErrorCode != 0 {
			t.Fatalf("leave: %+v", r)
		}
		waitClassicWrites(c, "g")
		convertToConsumer(t, c)
		clk.Advance(time.Minute) // the session and sync timers fire
		c.mu.Lock()
		defer c.mu.Unlock()
		if g := c.shards[0].groups["g"]; g.consumer == nil || g.classic != nil {
			t.Fatal("a classic timer changed the converted group")
		}
	})
	t.Run("pending", func(t *testing.T) {
		c, clk := lateCoordinator(t)
		if jr := c.JoinGroup(ctx, classicJoinReq(4, "")); jr.ErrorCode != kerr.MemberIDRequired.Code {
			t.Fatalf("join v4: %v", kerr.ErrorForCode(jr.ErrorCode))
		}
		convertToConsumer(t, c)
		clk.Advance(time.Minute) // the pending member id expires
	})
	t.Run("join", func(t *testing.T) {
		c, clk := lateCoordinator(t)
		// Two members, then one leaves: the join timer waits for the
		// other, which leaves too, emptying the group.
		// Sessions outlast the rebalance timeout, so the join timer
		// fires first.
		join := func(id string) *kmsg.JoinGroupResponse {
			req := classicJoinReq(3, id)
			req.SessionTimeoutMillis = 30000
			return c.JoinGroup(ctx, req)
		}
		a := join("")
		done := make(chan *kmsg.JoinGroupResponse, 2)
		go func() { done <- join("") }()
		deadline := time.Now().Add(5 * time.Second)
		for c.classicWaiting() != 1 {
			if time.Now().After(deadline) {
				t.Fatal("the second join did not wait")
			}
			time.Sleep(time.Millisecond)
		}
		go func() { done <- join(a.MemberID) }()
		a, b := <-done, <-done
		if a.ErrorCode != 0 || b.ErrorCode != 0 {
			t.Fatalf("joins: %v, %v", kerr.ErrorForCode(a.ErrorCode), kerr.ErrorForCode(b.ErrorCode))
		}
		for _, id := range []string{a.MemberID, b.MemberID} {
			leave := kmsg.NewPtrLeaveGroupRequest()
			leave.Version, leave.Group = 5, "g"
			leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: id}}
			if r := c.LeaveGroup(ctx, leave); r.ErrorCode != 0 || r.Members[0].ErrorCode != 0 {
				t.Fatalf("leave: %+v", r)
			}
		}
		waitClassicWrites(c, "g")
		convertToConsumer(t, c)
		clk.Advance(time.Minute) // the join, sync and session timers fire
	})
}

// TestClassicPanicReleasesLock: a panic in a handler holding Coordinator.mu
// (here from the clock) does not leave it locked for every later request.
func TestClassicPanicReleasesLock(t *testing.T) {
	ctx := context.Background()
	clk := &panicClock{manualClock: newManualClock()}
	c := New(testConfig(1, testTopics, clk))
	if err := c.Load(0, &memLog{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if !t.Failed() { // Close would wait for the lock forever
			c.Close()
		}
	}()
	jr := c.JoinGroup(ctx, classicJoinReq(3, ""))
	if jr.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(jr.ErrorCode))
	}
	mustPanic := func(name string, f func()) {
		t.Helper()
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			clk.armed.Store(true)
			defer clk.armed.Store(false)
			f()
		}()
		if !c.mu.TryLock() {
			t.Fatalf("%s: Coordinator.mu left locked by the panic", name)
		}
		c.mu.Unlock()
	}
	mustPanic("JoinGroup", func() { c.JoinGroup(ctx, classicJoinReq(3, jr.MemberID)) })
	mustPanic("SyncGroup", func() { c.SyncGroup(ctx, classicSyncReq(jr)) })
	mustPanic("write check", func() {
		c.write(ctx, c.shards[0], func() ([]Record, int16) { panic("injected check panic") }, nil)
	})
	if !c.shards[0].writeMu.TryLock() {
		t.Fatal("shard writeMu left locked by the panic")
	}
	c.shards[0].writeMu.Unlock()
	if !c.Owns("g") {
		t.Fatal("coordinator lost its partition")
	}
}

// blockingLog is a memLog whose Replay stops before its first record until
// release is closed, signalling started.
type blockingLog struct {
	*memLog
	started, release chan struct{}
}

func (l *blockingLog) Replay(fn func(Record) error) error {
	close(l.started)
	<-l.release
	return l.memLog.Replay(fn)
}

// TestClassicLoadInterrupted: a Load whose shard is unloaded, replaced or
// whose coordinator is closed while it replays fails and starts no member
// timers on the orphaned shard.
func TestClassicLoadInterrupted(t *testing.T) {
	ctx := context.Background()
	log := &memLog{}
	{
		c := testCoordinator(t, log, newManualClock())
		jr := c.JoinGroup(ctx, classicJoinReq(3, ""))
		if r := c.SyncGroup(ctx, classicSyncReq(jr)); jr.ErrorCode != 0 || r.ErrorCode != 0 {
			t.Fatal("join and sync failed")
		}
		c.Close()
	}
	for _, tc := range []struct {
		name      string
		interrupt func(c *Coordinator)
		want      error
	}{
		{"unload", func(c *Coordinator) { c.Unload(0) }, ErrUnloaded},
		{"replace", func(c *Coordinator) {
			if err := c.Load(0, &memLog{}); err != nil {
				t.Error(err)
			}
		}, ErrUnloaded},
		{"close", func(c *Coordinator) { c.Close() }, ErrClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newManualClock()
			c := New(testConfig(1, testTopics, clk))
			defer c.Close()
			bl := &blockingLog{memLog: log, started: make(chan struct{}), release: make(chan struct{})}
			done := make(chan error, 1)
			go func() { done <- c.Load(0, bl) }()
			<-bl.started
			tc.interrupt(c)
			clk.mu.Lock()
			timers := len(clk.timers)
			clk.mu.Unlock()
			close(bl.release)
			if err := <-done; !errors.Is(err, tc.want) {
				t.Fatalf("Load: %v, want %v", err, tc.want)
			}
			clk.mu.Lock()
			defer clk.mu.Unlock()
			if len(clk.timers) != timers {
				t.Fatalf("Load armed %d timers on a shard it no longer serves", len(clk.timers)-timers)
			}
		})
	}
}
