package bench

import (
	"io"
	"log/slog"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/replica"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// The raft host at rest and at failover: three hosts in one process over
// loopback TCP (replica.TCPTransport), RF=3 groups on raft.MemoryStorage
// (the partition's segment-log storage comes later), the host's defaults
// (100 ms ticks, liveness heartbeats every 250 ms, a peer down after 1 s).

// benchStorage is a replica.GroupStorage on raft.MemoryStorage.
type benchStorage struct {
	*raft.MemoryStorage
	mu sync.Mutex
	st replica.GroupState
}

func (s *benchStorage) InitialState() (raftpb.HardState, raftpb.ConfState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.HardState, s.st.ConfState, nil
}

func (s *benchStorage) SetState(st replica.GroupState) {
	s.mu.Lock()
	s.st = st
	s.mu.Unlock()
	s.MemoryStorage.SetHardState(st.HardState)
}

func (s *benchStorage) Sync() error { return nil }

// nopMachine applies nothing.
type nopMachine struct{}

func (nopMachine) Apply([]raftpb.Entry) {}

// raftCluster is three hosts over loopback TCP with the same groups.
type raftCluster struct {
	hosts map[uint64]*replica.Host
	tps   map[uint64]*replica.TCPTransport
	ids   []replica.GroupID
}

func newRaftCluster(b *testing.B, groups int, cfg replica.HostConfig) *raftCluster {
	b.Helper()
	c := &raftCluster{hosts: map[uint64]*replica.Host{}, tps: map[uint64]*replica.TCPTransport{}}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	voters := []uint64{1, 2, 3}
	for _, id := range voters {
		tp, err := replica.ListenTCP(id, "127.0.0.1:0", logger)
		if err != nil {
			b.Fatal(err)
		}
		c.tps[id] = tp
	}
	for g := 0; g < groups; g++ {
		c.ids = append(c.ids, replica.GroupID{TopicID: [16]byte{byte(g >> 8), byte(g)}, Partition: int32(g)})
	}
	for _, id := range voters {
		for _, peer := range voters {
			if peer != id {
				c.tps[id].SetPeer(peer, c.tps[peer].Addr().String())
			}
		}
		hc := cfg
		hc.NodeID, hc.Transport, hc.HardState, hc.Logger = id, c.tps[id], replica.NewMemStateStore(), logger
		h, err := replica.NewHost(hc)
		if err != nil {
			b.Fatal(err)
		}
		c.hosts[id] = h
		c.tps[id].SetHost(h)
		for _, gid := range c.ids {
			st := replica.GroupState{ConfState: raftpb.ConfState{Voters: voters}}
			if err := h.AddGroup(replica.GroupConfig{ID: gid, Storage: &benchStorage{MemoryStorage: raft.NewMemoryStorage()}, Machine: nopMachine{}, State: st}); err != nil {
				b.Fatal(err)
			}
		}
	}
	return c
}

func (c *raftCluster) close() {
	for id, h := range c.hosts {
		c.tps[id].Close()
		h.Close()
	}
}

// campaign makes host lead(i) stand in group i and waits until every
// group has that leader. A group whose election timeout ran out while the
// hosts were still adding groups may have elected another host first
// (whose followers then refuse lead(i)'s pre-votes): that leader hands
// over, retried until it holds.
func (c *raftCluster) campaign(b *testing.B, lead func(i int) uint64) {
	b.Helper()
	for i, id := range c.ids {
		if err := c.hosts[lead(i)].Campaign(id); err != nil {
			b.Fatal(err)
		}
	}
	nudged := time.Now()
	c.wait(b, "every group led", 60*time.Second, func() bool {
		ok, nudge := true, time.Since(nudged) > 500*time.Millisecond
		for i, id := range c.ids {
			want := lead(i)
			st, err := c.hosts[want].Status(id)
			if err == nil && st.RaftState == raft.StateLeader {
				continue
			}
			ok = false
			if !nudge || err != nil {
				continue
			}
			if h := c.hosts[st.Lead]; st.Lead != 0 && h != nil {
				_ = h.TransferLeadership(id, want)
			} else {
				_ = c.hosts[want].Campaign(id)
			}
		}
		if nudge {
			nudged = time.Now()
		}
		return ok
	})
}

func (c *raftCluster) wait(b *testing.B, what string, limit time.Duration, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkRaftIdle: 1,000 idle RF=3 groups (3,000 replicas) on three
// hosts ticking every 100 ms, leaders spread over the hosts. Once the
// groups settle (quiesced, or with DisableQuiescence merely elected), it
// measures the process's CPU over idleWindow, as a percentage of one core
// (cpu-%), and the heap per group replica after a GC (B/replica).
// quiesce/ticking compares the two in one run (cpu-ratio is ticking's CPU
// over quiesce's, in the ticking sub-benchmark). The measurement runs once
// whatever b.N.
func BenchmarkRaftIdle(b *testing.B) {
	const groups, idleWindow = 1000, 3 * time.Second
	var quiesceCPU float64
	for _, mode := range []struct {
		name    string
		disable bool
	}{{"quiesce", false}, {"ticking", true}} {
		b.Run(mode.name, func(b *testing.B) {
			before := heapAlloc()
			c := newRaftCluster(b, groups, replica.HostConfig{DisableQuiescence: mode.disable})
			defer c.close()
			c.campaign(b, func(i int) uint64 { return uint64(i%3) + 1 })
			if !mode.disable {
				c.wait(b, "every group quiesced", 60*time.Second, func() bool {
					for _, h := range c.hosts {
						if st := h.Stats(); st.Quiesced != st.Groups {
							return false
						}
					}
					return true
				})
			}
			time.Sleep(time.Second) // let the last messages settle
			heap := heapAlloc()
			cpu0, wall0 := cpuTime(b), time.Now()
			time.Sleep(idleWindow)
			cpu := float64(cpuTime(b)-cpu0) / float64(time.Since(wall0)) * 100
			for range b.N {
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(cpu, "cpu-%")
			b.ReportMetric(float64(heap-min(heap, before))/float64(3*groups), "B/replica")
			if mode.disable {
				if quiesceCPU > 0 {
					b.ReportMetric(cpu/quiesceCPU, "cpu-ratio")
				}
			} else {
				quiesceCPU = cpu
			}
		})
	}
}

// BenchmarkRaftFailover: 100 quiesced RF=3 groups all led by host 1 with
// the host's defaults; host 1 stops (its transport and host close, so
// nothing more comes from it); the time until hosts 2 and 3 have a leader
// for every group is ms-to-leaders (goal: under 2 s; the liveness timeout
// is 1 s of it). One failover per op.
func BenchmarkRaftFailover(b *testing.B) {
	const groups = 100
	var total time.Duration
	for range b.N {
		b.StopTimer()
		c := newRaftCluster(b, groups, replica.HostConfig{})
		c.campaign(b, func(int) uint64 { return 1 })
		c.wait(b, "every group quiesced", 60*time.Second, func() bool {
			for _, h := range c.hosts {
				if st := h.Stats(); st.Quiesced != st.Groups {
					return false
				}
			}
			return true
		})
		b.StartTimer()
		start := time.Now()
		c.tps[1].Close()
		c.hosts[1].Close()
		led := func() bool {
			for _, id := range c.ids {
				n := 0
				for _, nid := range []uint64{2, 3} {
					if st, err := c.hosts[nid].Status(id); err == nil && st.RaftState == raft.StateLeader {
						n++
					}
				}
				if n != 1 {
					return false
				}
			}
			return true
		}
		deadline := start.Add(30 * time.Second)
		for !led() {
			if time.Now().After(deadline) {
				b.Fatal("no new leaders within 30 s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		total += time.Since(start)
		b.StopTimer()
		c.close()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-to-leaders")
}
