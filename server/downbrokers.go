package server

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/server/console"
)

// A broker that stays down is made visible, as Kafka's operators expect:
// every node (brokers and controllers alike: each applies the metadata)
// logs a warning every sluice.broker.down.warning.interval.ms for each
// registered broker its metadata has shown fenced (its session expired, or
// it shut down and has not come back) for at least that long, naming it,
// how long it has been down and the partitions it leaves under-replicated
// (it is in their replicas but, fenced, out of their ISR). The console's
// alerts list the same brokers. The wait of one interval leaves out the
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

// maxListedPartitions caps the partitions a warning or an alert names;
// the rest are counted ("and N more").
const maxListedPartitions = 20

// downTracker remembers when each fenced broker was first seen fenced.
type downTracker struct {
	mu    sync.Mutex
	since map[int32]time.Time
}

// brokerState is one registered broker as this node's metadata has it.
type brokerState struct {
	id     int32
	fenced bool
	since  time.Time // first seen fenced (fenced only)
}

// downBroker is a fenced broker and what it leaves under-replicated.
type downBroker struct {
	id              int32
	since           time.Time
	underReplicated []topicPartition // sorted
}

// brokerStates are the registered brokers, by id; now stamps those newly
// seen fenced. A single node is its one broker, up.
func (b *Broker) brokerStates(now time.Time) []brokerState {
	if b.cl == nil {
		return []brokerState{{id: b.cfg.NodeID}}
	}
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
		st := brokerState{id: br.NodeID, fenced: br.Fenced}
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
	var down []downBroker
	for _, st := range b.brokerStates(now) {
		if st.fenced {
			down = append(down, downBroker{id: st.id, since: st.since})
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

// partitionList names up to maxListedPartitions partitions as
// "topic-partition", comma-separated, with "and N more" for the rest.
func partitionList(tps []topicPartition) string {
	var sb strings.Builder
	for i, tp := range tps {
		if i == maxListedPartitions {
			fmt.Fprintf(&sb, " and %d more", len(tps)-i)
			break
		}
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(partitionDirName(tp.topic, tp.partition))
	}
	return sb.String()
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

// warnDown logs one warning per broker down for at least downGrace whose
// last warning (in last, by broker id) is at least downGrace old; it
// forgets brokers no longer down.
func (b *Broker) warnDown(now time.Time, last map[int32]time.Time) {
	down := b.downBrokers(now)
	seen := make(map[int32]bool, len(down))
	for _, d := range down {
		seen[d.id] = true
		if now.Sub(d.since) < b.downGrace() {
			continue
		}
		if t, ok := last[d.id]; ok && now.Sub(t) < b.downGrace() {
			continue
		}
		last[d.id] = now
		b.logger.Warn("sluice: broker down: a registered broker is fenced and has not come back; its partitions are under-replicated until it returns or they are reassigned",
			"broker", d.id,
			"down_for", now.Sub(d.since).Round(time.Second).String(),
			"under_replicated_count", len(d.underReplicated),
			"under_replicated", partitionList(d.underReplicated))
	}
	for id := range last {
		if !seen[id] {
			delete(last, id)
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
	last := map[int32]time.Time{}
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
		a := console.Alert{
			Severity: "warning",
			Title:    fmt.Sprintf("broker %d is down", d.id),
			Detail:   fmt.Sprintf("down for %s (fenced); no partition left under-replicated", now.Sub(d.since).Round(time.Second)),
		}
		if n := len(d.underReplicated); n > 0 {
			a.Severity = "critical"
			a.Detail = fmt.Sprintf("down for %s (fenced); %d partitions under-replicated: %s", now.Sub(d.since).Round(time.Second), n, partitionList(d.underReplicated))
		}
		out = append(out, a)
	}
	return out
}
