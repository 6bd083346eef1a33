package server

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every listener is bound, and Metadata answers with the advertised
// address of the listener the request came in on (as Kafka does).
func TestEveryListenerBound(t *testing.T) {
	p1, p2 := freePort(t), freePort(t)
	_, addr := startBroker(t, "",
		"listeners=PLAINTEXT://127.0.0.1:"+strconv.Itoa(p1)+",INTERNAL://127.0.0.1:"+strconv.Itoa(p2),
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
		"advertised.listeners=PLAINTEXT://localhost:"+strconv.Itoa(p1)+",INTERNAL://127.0.0.1:"+strconv.Itoa(p2))
	if addr != "127.0.0.1:"+strconv.Itoa(p1) {
		t.Fatalf("Addr %s, want the first listener's", addr)
	}
	for _, tc := range []struct {
		seed, host string
		port       int
	}{
		{"127.0.0.1:" + strconv.Itoa(p1), "localhost", p1},
		{"127.0.0.1:" + strconv.Itoa(p2), "127.0.0.1", p2},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cl := newClient(t, tc.seed)
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		cancel()
		if err != nil {
			t.Fatalf("listener %s: %v", tc.seed, err)
		}
		if len(resp.Brokers) != 1 || resp.Brokers[0].Host != tc.host || resp.Brokers[0].Port != int32(tc.port) {
			t.Fatalf("metadata through %s: brokers %+v, want %s:%d", tc.seed, resp.Brokers, tc.host, tc.port)
		}
	}
	// A client seeded on the second listener produces through it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newClient(t, "127.0.0.1:"+strconv.Itoa(p2), kgo.DefaultProduceTopic("two-listeners"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// A TLS listener (SSL or SASL_SSL) without its certificate is refused at
// start-up, naming the listener and what is missing; so is a listener
// whose protocol Kafka does not know.
func TestUnsupportedListenerProtocolRefused(t *testing.T) {
	_, err := config.Load("", []string{"listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0", "log.dirs=" + t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "listener SASL_SSL") || !strings.Contains(err.Error(), "ssl.keystore.location") {
		t.Fatalf("SASL_SSL listener without a keystore: %v", err)
	}
	_, err = config.Load("", []string{"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,A:TLS", "log.dirs=" + t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), `unknown security protocol "TLS"`) {
		t.Fatalf("an unknown protocol: %v", err)
	}
	_, err = config.Load("", []string{"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "log.dirs=" + t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "listener SSL") || !strings.Contains(err.Error(), "ssl.keystore.location") {
		t.Fatalf("SSL listener without a keystore: %v", err)
	}
	cfg := config.Default()
	cfg.LogDirs = []string{t.TempDir()}
	cfg.Listeners = append(cfg.Listeners, config.Listener{Name: "SASL_SSL", Host: "127.0.0.1"})
	cfg.AdvertisedListeners = cfg.Listeners
	if _, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil || !strings.Contains(err.Error(), "SASL_SSL") {
		t.Fatalf("SASL_SSL listener: %v", err)
	}
}
