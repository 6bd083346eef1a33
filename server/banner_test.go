package server

import (
	"strings"
	"testing"
)

// The start-up banner names the version, the config's source, the data
// dir, the listeners and the console's URL, or why there is none.
func TestBanner(t *testing.T) {
	dir := t.TempDir()
	b, addr := startBroker(t, dir, "metrics.listen=127.0.0.1:0")
	got := b.Banner("server.properties + 1 --set, over the defaults")
	for _, want := range []string{
		"Sluice " + Version() + " started: node 1 (broker,controller), single node (a one-voter cluster)\n",
		"  config     server.properties + 1 --set, over the defaults\n",
		"  data       " + dir + "\n",
		"  listener   PLAINTEXT://" + addr + ", advertised to clients as " + addr + "\n",
		"  console    http://" + b.MetricsAddr().String() + "/ui/\n",
		"  metrics    http://" + b.MetricsAddr().String() + "/metrics",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("banner lacks %q:\n%s", want, got)
		}
	}
	off, _ := startBroker(t, "", "metrics.listen=none")
	if got := off.Banner("defaults"); !strings.Contains(got, "console    off (metrics.listen=none)") {
		t.Errorf("banner without a console:\n%s", got)
	}
}
