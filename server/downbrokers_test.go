package server

import (
	"testing"
	"time"
)

// A down broker's partitions are named by topic, the users' first, and
// its text has its address and how long it has been down.
func TestDownText(t *testing.T) {
	now := time.Now()
	d := downBroker{id: 2, addr: "127.0.0.1:9093", since: now.Add(-80 * time.Second), underReplicated: []topicPartition{
		{offsetsTopic, 7}, {offsetsTopic, 8}, {offsetsTopic, 9}, {"orders", 0}, {"orders", 1}, {"orders", 5},
	}}
	if got, want := downText(d, now), "127.0.0.1:9093, down for 1m20s (fenced); 6 partitions under-replicated: orders 0,1,5; __consumer_offsets 7-9"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := d.name(); got != "broker 2 (127.0.0.1:9093)" {
		t.Errorf("name %q", got)
	}
	d.addr, d.underReplicated = "", nil
	if got, want := downText(d, now), "down for 1m20s (fenced); no partition left under-replicated"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
