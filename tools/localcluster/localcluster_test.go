package localcluster

import (
	"net"
	"testing"

	"github.com/sluicemq/sluice/tools/faultproxy"
)

// unstartedProxied is an Unstarted cluster of n voters whose links are
// proxies to one listener.
func unstartedProxied(t *testing.T, n int) *Cluster {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return Unstarted(n, func(from, to int) *faultproxy.Proxy {
		p, err := faultproxy.New("127.0.0.1:0", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	})
}

// cut is which directed links are cut.
func cut(c *Cluster) map[[2]int]bool {
	m := map[[2]int]bool{}
	for l, p := range c.proxies {
		if p.Mode() != 0 {
			m[[2]int{l.from, l.to}] = true
		}
	}
	return m
}

func TestPartitionIsolateHeal(t *testing.T) {
	c := unstartedProxied(t, 3)
	if err := c.Partition([][]int{{1}, {2, 3}}, faultproxy.Blackhole); err != nil {
		t.Fatal(err)
	}
	want := map[[2]int]bool{{1, 2}: true, {2, 1}: true, {1, 3}: true, {3, 1}: true}
	if got := cut(c); len(got) != len(want) {
		t.Fatalf("partition {1} {2,3} cut %v, want %v", got, want)
	} else {
		for l := range want {
			if !got[l] {
				t.Fatalf("partition {1} {2,3} cut %v, want %v", got, want)
			}
		}
	}
	if err := c.HealNetwork(); err != nil {
		t.Fatal(err)
	}
	if got := cut(c); len(got) != 0 {
		t.Fatalf("after HealNetwork %v cut", got)
	}
	if err := c.Isolate(2, faultproxy.Reset); err != nil {
		t.Fatal(err)
	}
	if got := cut(c); len(got) != 4 || !got[[2]int{2, 1}] || !got[[2]int{3, 2}] || got[[2]int{1, 3}] {
		t.Fatalf("Isolate(2) cut %v", got)
	}
	if err := c.CutLinks([][2]int{{1, 4}}, faultproxy.Blackhole); err == nil {
		t.Fatal("a link to a node that does not exist was cut")
	}
}

func TestIsolateRefusesLinksWithoutProxy(t *testing.T) {
	c := Unstarted(3, nil)
	c.cfg.Direct = true
	if err := c.Isolate(1, faultproxy.Blackhole); err == nil {
		t.Fatal("Isolate on a cluster without proxies did not refuse")
	}
}

func TestStartRefusesBadConfigs(t *testing.T) {
	for _, cfg := range []Config{{Voters: 0}, {Voters: 1, Brokers: 1, Standalone: true}} {
		if c, err := Start(t.Context(), cfg); err == nil {
			c.Close()
			t.Errorf("Start(%+v) accepted", cfg)
		}
	}
}

func TestFastFailover(t *testing.T) {
	got := FastFailover(3)
	for _, want := range []string{"broker.heartbeat.interval.ms=500", "broker.session.timeout.ms=3000",
		"default.replication.factor=3", "offsets.topic.replication.factor=3", "min.insync.replicas=2"} {
		found := false
		for _, s := range got {
			found = found || s == want
		}
		if !found {
			t.Errorf("FastFailover(3) = %v lacks %s", got, want)
		}
	}
}
