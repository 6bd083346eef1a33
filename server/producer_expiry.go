package server

import (
	"time"

	"github.com/sluicemq/sluice/replica"
)

// producerExpiry removes idle idempotent producers' state from every open
// partition every producer.id.expiration.check.interval.ms (Kafka's
// ProducerStateManager expiry, KIP-854's producer.id.expiration.ms).
type producerExpiry struct {
	stop chan struct{}
	done chan struct{}
}

func (b *Broker) startProducerExpiry() {
	e := &producerExpiry{stop: make(chan struct{}), done: make(chan struct{})}
	b.expiry = e
	interval := time.Duration(b.cfg.ProducerIDExpirationCheckIntervalMs) * time.Millisecond
	go func() {
		defer close(e.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-e.stop:
				return
			case <-t.C:
				b.expireProducers()
			}
		}
	}()
}

func (b *Broker) stopProducerExpiry() {
	if b.expiry != nil {
		close(b.expiry.stop)
		<-b.expiry.done
		b.expiry = nil
	}
}

// expireProducers runs one expiry pass and returns the producers removed.
func (b *Broker) expireProducers() int {
	b.mu.RLock()
	parts := make([]*replica.Partition, 0, len(b.parts))
	for _, p := range b.parts {
		parts = append(parts, p)
	}
	b.mu.RUnlock()
	n := 0
	for _, p := range parts {
		n += p.ExpireProducers()
	}
	if n > 0 {
		b.logger.Debug("sluice: expired idle producers", "producers", n)
	}
	return n
}
