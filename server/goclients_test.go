package server

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
)

// goClientRecord is one record the Go client tests produce and expect back.
type goClientRecord struct {
	key, value string
	headers    map[string]string
}

// goClientRecords are keyed records, one of them with two headers, produced
// to partition 0 of a new topic and expected back at offsets 0, 1, 2, ...
var goClientRecords = []goClientRecord{
	{key: "k0", value: "v0"},
	{key: "k1", value: "v1", headers: map[string]string{"trace": "abc", "empty": ""}},
	{key: "k2", value: "v2"},
	{key: "k3", value: "v3"},
}

// checkGoClientRecord compares one consumed record with goClientRecords[i].
func checkGoClientRecord(t *testing.T, client string, i int, offset int64, key, value []byte, headers map[string]string) {
	t.Helper()
	w := goClientRecords[i]
	if offset != int64(i) || !bytes.Equal(key, []byte(w.key)) || !bytes.Equal(value, []byte(w.value)) {
		t.Fatalf("%s: record %d: got offset %d key %q value %q, want offset %d key %q value %q",
			client, i, offset, key, value, i, w.key, w.value)
	}
	if len(headers) != len(w.headers) {
		t.Fatalf("%s: record %d: got headers %v, want %v", client, i, headers, w.headers)
	}
	for k, v := range w.headers {
		if got, ok := headers[k]; !ok || got != v {
			t.Fatalf("%s: record %d: got headers %v, want %v", client, i, headers, w.headers)
		}
	}
}

// saramaVersions are the Kafka versions the sarama test runs as. sarama
// sends ApiVersions first and caps each request at the broker's advertised
// maximum (restrictApiVersion), so a high Version only raises the ceiling.
// Every version in sarama v1.61.1's SupportedVersions from V0_11_0_0 up to
// MaxVersion (V4_3_1_0, where sarama sends up to Produce v10, Fetch v12 and
// Metadata v11) works. The older ones (V0_8_2_0 to V0_10_2_2) send Produce
// v2 or below, which Sluice (as Kafka 4) answers with UNSUPPORTED_VERSION.
var saramaVersions = []sarama.KafkaVersion{sarama.V0_11_0_0, sarama.V2_8_0_0, sarama.V3_6_0_0, sarama.MaxVersion}

// sarama (github.com/IBM/sarama): a SyncProducer with acks=all produces,
// a partition Consumer reads back from OffsetOldest.
func TestSaramaProduceConsume(t *testing.T) {
	t.Parallel()
	_, addr := startBroker(t, "")
	for _, v := range saramaVersions {
		t.Run(v.String(), func(t *testing.T) {
			testSarama(t, addr, v, "sarama-"+v.String())
		})
	}
}

func testSarama(t *testing.T, addr string, version sarama.KafkaVersion, topic string) {
	cfg := sarama.NewConfig()
	cfg.Version = version
	cfg.ClientID = "sluice-test"
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Retry.Backoff = 20 * time.Millisecond
	cfg.Metadata.Retry.Backoff = 20 * time.Millisecond
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond

	producer, err := sarama.NewSyncProducer([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("sarama %s: new producer: %v", version, err)
	}
	producerOpen := true
	defer func() {
		if producerOpen { // a failed produce: Close twice panics in sarama
			producer.Close()
		}
	}()
	for i, r := range goClientRecords {
		msg := &sarama.ProducerMessage{Topic: topic, Partition: 0, Key: sarama.StringEncoder(r.key), Value: sarama.StringEncoder(r.value)}
		for k, v := range r.headers {
			msg.Headers = append(msg.Headers, sarama.RecordHeader{Key: []byte(k), Value: []byte(v)})
		}
		p, off, err := producer.SendMessage(msg)
		if err != nil {
			t.Fatalf("sarama %s: produce record %d: %v", version, i, err)
		}
		if p != 0 || off != int64(i) {
			t.Fatalf("sarama %s: record %d acked at partition %d offset %d, want 0 %d", version, i, p, off, i)
		}
	}
	producerOpen = false
	if err := producer.Close(); err != nil {
		t.Fatalf("sarama %s: close producer: %v", version, err)
	}

	consumer, err := sarama.NewConsumer([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("sarama %s: new consumer: %v", version, err)
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatalf("sarama %s: consume partition: %v", version, err)
	}
	defer pc.Close()
	if hw := pc.HighWaterMarkOffset(); hw != 0 && hw != int64(len(goClientRecords)) {
		t.Fatalf("sarama %s: high watermark %d", version, hw)
	}
	timeout := time.After(30 * time.Second)
	for i := range goClientRecords {
		select {
		case m := <-pc.Messages():
			headers := map[string]string{}
			for _, h := range m.Headers {
				headers[string(h.Key)] = string(h.Value)
			}
			checkGoClientRecord(t, "sarama "+version.String(), i, m.Offset, m.Key, m.Value, headers)
			if m.Topic != topic || m.Partition != 0 {
				t.Fatalf("sarama %s: record %d from %s/%d", version, i, m.Topic, m.Partition)
			}
		case err := <-pc.Errors():
			t.Fatalf("sarama %s: consume: %v", version, err)
		case <-timeout:
			t.Fatalf("sarama %s: timed out after %d of %d records", version, i, len(goClientRecords))
		}
	}
	if hw := pc.HighWaterMarkOffset(); hw != int64(len(goClientRecords)) {
		t.Fatalf("sarama %s: high watermark %d, want %d", version, hw, len(goClientRecords))
	}
}

// segmentio/kafka-go: a Writer with acks=all and auto topic creation
// produces, a Reader on partition 0 reads back from FirstOffset.
func TestKafkaGoProduceConsume(t *testing.T) {
	t.Parallel()
	_, addr := startBroker(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic = "kafka-go-topic"

	w := &kafka.Writer{
		Addr:                   kafka.TCP(addr),
		Topic:                  topic,
		RequiredAcks:           kafka.RequireAll,
		AllowAutoTopicCreation: true,
		Balancer:               kafka.BalancerFunc(func(kafka.Message, ...int) int { return 0 }),
		BatchTimeout:           10 * time.Millisecond,
		MaxAttempts:            20,
		WriteBackoffMin:        20 * time.Millisecond,
		WriteBackoffMax:        200 * time.Millisecond,
	}
	defer w.Close()
	// One WriteMessages call per record, so each is acked before the next
	// and the offsets are known. The first call's metadata request creates
	// the topic.
	for i, r := range goClientRecords {
		m := kafka.Message{Key: []byte(r.key), Value: []byte(r.value)}
		for k, v := range r.headers {
			m.Headers = append(m.Headers, kafka.Header{Key: k, Value: []byte(v)})
		}
		if err := w.WriteMessages(ctx, m); err != nil {
			t.Fatalf("kafka-go: produce record %d: %v", i, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("kafka-go: close writer: %v", err)
	}

	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:   []string{addr},
		Topic:     topic,
		Partition: 0,
		MinBytes:  1,
		MaxBytes:  1 << 20,
		MaxWait:   100 * time.Millisecond,
	})
	defer r.Close()
	if err := r.SetOffset(kafka.FirstOffset); err != nil {
		t.Fatal(err)
	}
	for i := range goClientRecords {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("kafka-go: read record %d: %v", i, err)
		}
		headers := map[string]string{}
		for _, h := range m.Headers {
			headers[h.Key] = string(h.Value)
		}
		checkGoClientRecord(t, "kafka-go", i, m.Offset, m.Key, m.Value, headers)
		if m.Topic != topic || m.Partition != 0 {
			t.Fatalf("kafka-go: record %d from %s/%d", i, m.Topic, m.Partition)
		}
	}
	if lag := r.Lag(); lag != 0 {
		t.Fatalf("kafka-go: lag %d after reading every record", lag)
	}
}
