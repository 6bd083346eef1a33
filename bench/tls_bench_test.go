package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicemq/sluice/server"
	"github.com/sluicemq/sluice/server/config"
	"github.com/sluicemq/sluice/server/tlstest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkTLSProduce produces b.N records (1 KiB incompressible values,
// as BenchmarkProduceE2E; MB/s counts the value bytes) with a franz-go
// producer over TLS to one in-process Sluice broker (default config: an
// acks=all reply waits for the fsync), and the same records over
// plaintext to the same broker and topic (16 partitions) in the same run.
// The broker has two listeners, PLAINTEXT and SSL (a PEM keystore made by
// a test CA; TLS 1.3, Go's default suites), so both paths share the disk
// and the log. The produce runs in rounds of 8 MiB alternating TLS and
// plaintext (which goes first alternates too); TLS is the timed region.
//
// Custom metrics: plain-MB/s, and tls-ratio = MB/s / plain-MB/s (the
// target is >= 0.7).
//
// With -benchtime 1x (CI) it is a smoke test; measure with a fixed count:
// -benchtime 32768x is 32 MiB each way.
func BenchmarkTLSProduce(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	n := b.N
	total := int64(n) * recordValueBytes

	ca := tlstest.NewCA(b)
	srv := ca.Issue(b, tlstest.Options{CommonName: "broker"})
	cfg, err := config.Load("", []string{"metrics.listen=", "log.dirs=" + b.TempDir(),
		"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		"ssl.keystore.type=PEM", "ssl.keystore.location=" + srv.File})
	if err != nil {
		b.Fatal(err)
	}
	br, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	if err := br.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { br.Close() })
	plainAddr, tlsAddr := br.ListenerAddr("PLAINTEXT").String(), br.ListenerAddr("SSL").String()
	if err := createE2ETopic(ctx, plainAddr); err != nil {
		b.Fatal(err)
	}
	producer := func(addr string, tc *tls.Config) *kgo.Client {
		opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerLinger(e2eLinger), kgo.ProducerBatchCompression(kgo.NoCompression())}
		if tc != nil {
			opts = append(opts, kgo.DialTLSConfig(tc))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(cl.Close)
		return cl
	}
	tlsProducer, plainProducer := producer(tlsAddr, ca.ClientConfig(nil)), producer(plainAddr, nil)
	tlsRecs, plainRecs := e2eRecords(n), e2eRecords(n)
	b.SetBytes(recordValueBytes)

	var plainTime time.Duration
	peers := []func(lo, hi int) error{
		func(lo, hi int) error { // TLS: the timed region
			b.StartTimer()
			err := e2eProduce(ctx, tlsProducer, tlsRecs[lo:hi])
			b.StopTimer()
			if err != nil {
				return fmt.Errorf("tls produce: %w", err)
			}
			return nil
		},
		func(lo, hi int) error {
			d, err := timeIt(func() error { return e2eProduce(ctx, plainProducer, plainRecs[lo:hi]) })
			plainTime += d
			if err != nil {
				return fmt.Errorf("plaintext produce: %w", err)
			}
			return nil
		},
	}
	b.ResetTimer()
	b.StopTimer()
	for round, lo := 0, 0; lo < n; round, lo = round+1, lo+e2eRoundRecords {
		hi := min(lo+e2eRoundRecords, n)
		for i := range peers {
			if err := peers[(round+i)%len(peers)](lo, hi); err != nil {
				b.Fatal(err)
			}
		}
	}
	tlsMBps, plainMBps := mbps(total, b.Elapsed()), mbps(total, plainTime)
	b.ReportMetric(plainMBps, "plain-MB/s")
	if plainMBps > 0 {
		b.ReportMetric(tlsMBps/plainMBps, "tls-ratio")
	}
}
