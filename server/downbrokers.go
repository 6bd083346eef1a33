package server

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/server/console"
)

// A broker that stays down is made visible, as Kafka's operators expect:
// every node (brokers and controllers alike: each applies the metadata)
// logs a warning every sluice.broker.down.warning.interval.ms for each
// registered broker its metadata has shown fenced (its session expired, or
// it shut down and has not come back) for at least that long, naming it,
// its address (its registration's first listener, kept while it is
// fenced), how long it has been down and the partitions it leaves
// under-replicated (it is in their replicas but, fenced, out of their
// ISR), by topic, the users' first (console.PartitionsByTopic). Once a
// broker it warned of is unfenced again it logs, at INFO, that it is
// back and after how long (or that it was unregistered). The console's
// banner shows the same brokers, with the same text. The wait of one interval leaves out the
// brief fencing of a broker that registers (it is fenced until it caught
// up with the metadata log, usually well under a second). The metrics
// (sluice_broker_up, sluice_broker_down_seconds) show every fenced broker
// at once; the alert rules wait minutes. A single node has no other
// broker, so none.
//
// "Down since" is when this process first saw the broker fenced (a
// restarted node counts from its start): the metadata records fencing,
// not its time. Goroutine: warnDownLoop, started by Start, stopped first
// by Close; downTracker.mu is a leaf.

// downTracker remembers when each fenced broker was first seen fenced.
type downTracker struct {
	mu    sync.Mutex
	since map[int32]time.Time
}

// brokerState is one registered broker as this node's metadata has it.
type brokerState struct {
	id     int32
	addr   string // host:port of its first listener; "" if it has none
	fenced bool
	since  time.Time // first seen fenced (fenced only)
}

// downBroker is a fenced broker and what it leaves under-replicated.
type downBroker struct {
	id              int32
	addr            string
	since           time.Time
	underReplicated []topicPartition // sorted
}

// name is "broker 2 (127.0.0.1:9093)", or "broker 2" without an address.
func (d downBroker) name() string {
	if d.addr == "" {
		return fmt.Sprintf("broker %d", d.id)
	}
	return fmt.Sprintf("broker %d (%s)", d.id, d.addr)
}

// brokerAddr is the host:port of a registration's first listener.
func brokerAddr(ls []meta.Endpoint) string {
	if len(ls) == 0 {
		return ""
	}
	return net.JoinHostPort(ls[0].Host, strconv.Itoa(int(ls[0].Port)))
}

// brokerStates are the registered brokers, by id; now stamps those newly
// seen fenced. A single node is its one broker, up.
func (b *Broker) brokerStates(now time.Time) []brokerState {
	brokers := b.meta.Brokers()
	t := &b.down
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.since == nil {
		t.since = map[int32]time.Time{}
	}
	out := make([]brokerState, 0, len(brokers))
	seen := make(map[int32]bool, len(brokers))
	for _, br := range brokers {
		st := brokerState{id: br.NodeID, addr: brokerAddr(br.Listeners), fenced: br.Fenced}
		seen[br.NodeID] = true
		if br.Fenced {
			since, ok := t.since[br.NodeID]
			if !ok {
				since = now
				t.since[br.NodeID] = now
			}
			st.since = since
		} else {
			delete(t.since, br.NodeID)
		}
		out = append(out, st)
	}
	for id := range t.since {
		if !seen[id] { // unregistered
			delete(t.since, id)
		}
	}
	slices.SortFunc(out, func(a, b brokerState) int { return int(a.id) - int(b.id) })
	return out
}

// downBrokers are the fenced registered brokers, by id, each with the
// partitions of the metadata that have it as a replica and not in their
// ISR (partitionView: a fenced broker leaves every ISR).
func (b *Broker) downBrokers(now time.Time) []downBroker {
	return b.downOf(b.brokerStates(now))
}

// downOf is downBrokers of the given states.
func (b *Broker) downOf(states []brokerState) []downBroker {
	var down []downBroker
	for _, st := range states {
		if st.fenced {
			down = append(down, downBroker{id: st.id, addr: st.addr, since: st.since})
		}
	}
	if len(down) == 0 {
		return nil
	}
	for _, t := range b.meta.Topics() {
		for p := range t.Partitions {
			v := b.partitionView(t, p)
			for i := range down {
				if slices.Contains(v.replicas, down[i].id) && !slices.Contains(v.isr, down[i].id) {
					down[i].underReplicated = append(down[i].underReplicated, topicPartition{t.Name, p})
				}
			}
		}
	}
	for i := range down {
		slices.SortFunc(down[i].underReplicated, func(a, b topicPartition) int {
			if c := strings.Compare(a.topic, b.topic); c != 0 {
				return c
			}
			return int(a.partition - b.partition)
		})
	}
	return down
}

// partitionList names sorted partitions by topic, the users' topics
// first: "orders 0-2,5; __consumer_offsets 7".
func partitionList(tps []topicPartition) string {
	var ts []console.TopicPartitions
	for _, tp := range tps {
		if len(ts) == 0 || ts[len(ts)-1].Topic != tp.topic {
			ts = append(ts, console.TopicPartitions{Topic: tp.topic, Internal: isInternalTopic(tp.topic)})
		}
		ts[len(ts)-1].Partitions = append(ts[len(ts)-1].Partitions, tp.partition)
	}
	return console.PartitionsByTopic(ts)
}

// downText says how long a broker has been down and what it leaves
// under-replicated, for the log and the console's banner.
func downText(d downBroker, now time.Time) string {
	s := fmt.Sprintf("down for %s (fenced)", now.Sub(d.since).Round(time.Second))
	if d.addr != "" {
		s = d.addr + ", " + s
	}
	switch n := len(d.underReplicated); n {
	case 0:
	case 1:
		return fmt.Sprintf("%s; 1 partition under-replicated: %s", s, partitionList(d.underReplicated))
	default:
		return fmt.Sprintf("%s; %d partitions under-replicated: %s", s, n, partitionList(d.underReplicated))
	}
	return s + "; no partition left under-replicated"
}

// downGrace is how long a broker must have been fenced before it is
// warned about and alerted on: sluice.broker.down.warning.interval.ms.
func (b *Broker) downGrace() time.Duration {
	return time.Duration(b.cfg.BrokerDownWarningIntervalMs) * time.Millisecond
}

// downObserveInterval is how often the warning loop looks at the
// applied metadata, so that "down since" is when this process saw the
// fencing (within a second), not when something next asked.
const downObserveInterval = time.Second

// warned is a broker warnDown warned of: when last, and the broker as it
// was then.
type warned struct {
	at time.Time
	downBroker
}

// warnDown logs one warning per broker down for at least downGrace whose
// last warning (in last, by broker id) is at least downGrace old; of a
// broker it warned of that is no longer down, it logs that it is back
// (or unregistered) and forgets it.
func (b *Broker) warnDown(now time.Time, last map[int32]warned) {
	states := b.brokerStates(now)
	down := b.downOf(states)
	seen := make(map[int32]bool, len(down))
	for _, d := range down {
		seen[d.id] = true
		if now.Sub(d.since) < b.downGrace() {
			continue
		}
		if w, ok := last[d.id]; ok && now.Sub(w.at) < b.downGrace() {
			continue
		}
		last[d.id] = warned{now, d}
		b.logger.Warn("sluice: broker down: "+d.name()+" is fenced and has not come back; its partitions are under-replicated until it returns or they are reassigned",
			"broker", d.id,
			"address", d.addr,
			"down_for", now.Sub(d.since).Round(time.Second).String(),
			"under_replicated_count", len(d.underReplicated),
			"under_replicated", partitionList(d.underReplicated))
	}
	for id, w := range last {
		if seen[id] {
			continue
		}
		delete(last, id)
		after := now.Sub(w.since).Round(time.Second).String()
		if i := slices.IndexFunc(states, func(st brokerState) bool { return st.id == id }); i >= 0 {
			b.logger.Info("sluice: broker back: "+w.name()+" is back after "+after,
				"broker", id, "address", states[i].addr, "down_for", after)
		} else {
			b.logger.Info("sluice: broker unregistered: "+w.name()+", down for "+after+", was unregistered",
				"broker", id, "address", w.addr, "down_for", after)
		}
	}
}

// warnDownLoop looks at the brokers every downObserveInterval (or the
// warning interval, if shorter) and warns of each down broker once it has
// been down for sluice.broker.down.warning.interval.ms, then again every
// interval, until stop is closed; it closes done when it returns.
func (b *Broker) warnDownLoop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(min(downObserveInterval, b.downGrace()))
	defer t.Stop()
	last := map[int32]warned{}
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			b.warnDown(time.Now(), last)
		}
	}
}

// Alerts are the broker's current alerts for the web console: one per
// broker fenced for at least sluice.broker.down.warning.interval.ms,
// critical when it leaves partitions under-replicated.
func (b *Broker) Alerts() []console.Alert {
	now := time.Now()
	var out []console.Alert
	for _, d := range b.downBrokers(now) {
		if now.Sub(d.since) < b.downGrace() {
			continue
		}
		// The title is the console's own for a broker Metadata leaves
		// out, so this alert, knowing more, replaces that one.
		a := console.Alert{Severity: "warning", Title: fmt.Sprintf("broker %d is down", d.id), Detail: downText(d, now)}
		if len(d.underReplicated) > 0 {
			a.Severity = "critical"
		}
		out = append(out, a)
	}
	return out
}
