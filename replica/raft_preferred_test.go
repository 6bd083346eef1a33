package replica

import (
	"fmt"
	"testing"
	"time"
)

// preferredElectionTicks is the election timeout of these tests: far more
// ticks than the preferred replica's campaigns take, so a leader before it
// can only come from an early campaign (raft's own timeout never fires
// before ElectionTicks ticks). Paced at 20 ms a tick, it gives an election
// round trip 6 s of a loaded machine's time.
const preferredElectionTicks = 300

// ticksUntil ticks c, one tick per every pace of polling, until cond
// holds or limit ticks passed, and returns the ticks taken (limit when
// cond never held). It fails the test after a wall-clock deadline only.
func ticksUntil(c *pcluster, limit int, pace time.Duration, cond func() bool) int {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	ticks := 0
	for !cond() {
		if ticks == limit {
			return limit
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%d ticks not done by the deadline", ticks)
		}
		c.tick()
		ticks++
		// The workers run between ticks; polling cond meanwhile keeps the
		// tick count at which it first held.
		for end := time.Now().Add(pace); time.Now().Before(end) && !cond(); {
			time.Sleep(time.Millisecond)
		}
	}
	return ticks
}

func newPreferredCluster(t *testing.T, nodes int) *pcluster {
	c := newPCluster(t, nodes, 1, 1)
	c.hostCfg = func(hc *HostConfig) { hc.ElectionTicks = preferredElectionTicks }
	return c
}

// A new group's preferred replica (RaftConfig.Preferred) campaigns as it
// opens and leads long before raft's election timeout; the others wait.
// Node 1 opens first, so its first campaign reaches no peer and a retry
// wins; node 3 opens last and wins the first. With no preferred replica
// nobody stands before the election timeout.
func TestPreferredReplicaLeadsNewGroup(t *testing.T) {
	for _, pref := range []uint64{1, 3, 0} {
		t.Run(fmt.Sprintf("preferred=%d", pref), func(t *testing.T) {
			c := newPreferredCluster(t, 3)
			if pref != 0 {
				c.preferred[pref] = true
			}
			c.startAll()
			g := c.groups[0]
			ticks := ticksUntil(c, preferredElectionTicks, 20*time.Millisecond, func() bool { return c.leader(g) != nil })
			if pref == 0 {
				if ticks < preferredElectionTicks {
					t.Fatalf("a leader after %d ticks with no preferred replica (election timeout %d)", ticks, preferredElectionTicks)
				}
				return
			}
			if ticks == preferredElectionTicks {
				t.Fatalf("no leader within %d ticks: the preferred replica did not campaign early", ticks)
			}
			if lead, _, _ := c.leader(g).Leader(); lead != pref {
				t.Fatalf("node %d leads after %d ticks, not the preferred node %d", lead, ticks, pref)
			}
			t.Logf("node %d leads after %d ticks", pref, ticks)
		})
	}
}

// A group that ran before is not new: restarted with Preferred still set,
// no replica stands before raft's election timeout, and no term moves.
func TestPreferredReplicaRestartWaits(t *testing.T) {
	c := newPreferredCluster(t, 3)
	c.preferred[2] = true
	c.startAll()
	g := c.groups[0]
	if ticks := ticksUntil(c, preferredElectionTicks, 20*time.Millisecond, func() bool { return c.leader(g) != nil }); ticks == preferredElectionTicks {
		t.Fatal("no leader of the new group")
	}
	// The leader's empty entry of its term reaches every log.
	c.settle()
	terms := map[uint64]uint64{}
	for _, id := range c.voters {
		st, err := c.nodes[id].host.Status(g)
		if err != nil {
			t.Fatal(err)
		}
		terms[id] = st.Term
	}
	for _, id := range c.voters {
		c.stop(id)
	}
	c.startAll()
	moved := func() bool {
		for _, n := range c.up() {
			st, err := n.host.Status(g)
			if err != nil {
				t.Fatal(err)
			}
			if st.Term != terms[n.id] || st.Lead != 0 {
				return true
			}
		}
		return false
	}
	if ticks := ticksUntil(c, preferredElectionTicks-1, 5*time.Millisecond, moved); ticks < preferredElectionTicks-1 {
		t.Fatalf("after a restart a replica stood (or a leader appeared) at tick %d, before the election timeout of %d ticks", ticks, preferredElectionTicks)
	}
	// Raft's timeout still elects a leader.
	c.waitLeader(g)
}

// A new group's lone voter that is preferred leads without a tick.
func TestPreferredReplicaOneVoter(t *testing.T) {
	c := newPreferredCluster(t, 1)
	c.preferred[1] = true
	c.startAll()
	p := c.nodes[1].parts[c.groups[0]]
	deadline := time.Now().Add(30 * time.Second)
	for !p.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("the lone preferred voter does not lead without a tick")
		}
		time.Sleep(time.Millisecond)
	}
}
