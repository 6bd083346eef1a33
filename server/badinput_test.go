package server

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Garbage on one connection closes that connection; the broker keeps
// serving others.
func TestBadFramesCloseOnlyThatConnection(t *testing.T) {
	t.Parallel()
	_, addr := startBroker(t, "")
	rng := rand.New(rand.NewPCG(1, 2))
	frames := [][]byte{
		{0xff, 0xff, 0xff, 0xff},                          // negative size
		{0x7f, 0xff, 0xff, 0xff, 1, 2, 3},                 // oversized length prefix
		{0, 0, 0, 4, 0, 18},                               // truncated header
		{0, 0, 0, 10, 0x7f, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0}, // unknown API key
	}
	for i := 0; i < 20; i++ {
		junk := make([]byte, 8+rng.IntN(200))
		for j := range junk {
			junk[j] = byte(rng.Uint32())
		}
		binary.BigEndian.PutUint32(junk, uint32(len(junk)-4))
		frames = append(frames, junk)
	}
	for _, f := range frames {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(f)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 1<<16)
		for {
			if _, err := c.Read(buf); err != nil {
				break // closed (or answered then closed on a later frame)
			}
		}
		c.Close()
	}
	// Still serving.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newClient(t, addr, kgo.DefaultProduceTopic("after-junk"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("ok")}).FirstErr(); err != nil {
		t.Fatalf("broker stopped serving after bad frames: %v", err)
	}
}

// A batch with a bad CRC gets CORRUPT_MESSAGE and nothing is stored.
func TestProduceCorruptCRC(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	topic, err := b.createTopic("crc", 1, 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, addr)
	good := batch.Build(batch.NewBuildOptions(), []batch.Record{{Timestamp: 1, Value: []byte("v")}})
	for _, tc := range []struct {
		name  string
		data  []byte
		codes []int16
	}{
		{"bad crc", func() []byte { b := append([]byte(nil), good...); b[len(b)-1] ^= 1; return b }(), []int16{kerr.CorruptMessage.Code}},
		{"wrong record count", func() []byte {
			b := append([]byte(nil), good...)
			binary.BigEndian.PutUint32(b[batch.OffRecordCount:], 5)
			binary.BigEndian.PutUint32(b[batch.OffCRC:], batch.Checksum(b))
			return b
		}(), []int16{kerr.InvalidRecord.Code}}, // LogValidator: the count must fit lastOffsetDelta
		{"truncated", good[:len(good)-3], []int16{kerr.CorruptMessage.Code, kerr.InvalidRecord.Code}},
		{"control batch", func() []byte {
			o := batch.NewBuildOptions()
			o.Control = true
			return batch.Build(o, []batch.Record{{Timestamp: 1, Key: []byte{0, 0, 0, 0}, Value: []byte("v")}})
		}(), []int16{kerr.InvalidRecord.Code}},
		{"delete horizon", func() []byte {
			b := append([]byte(nil), good...)
			b[batch.OffAttributes+1] |= batch.DeleteHorizonBit
			binary.BigEndian.PutUint32(b[batch.OffCRC:], batch.Checksum(b))
			return b
		}(), []int16{kerr.InvalidRecord.Code}},
	} {
		req := kmsg.NewPtrProduceRequest()
		req.Acks = -1
		req.TimeoutMillis = 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = "crc", topic.ID // by name before v13, by ID after
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = tc.data
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		code := resp.Topics[0].Partitions[0].ErrorCode
		ok := false
		for _, c := range tc.codes {
			ok = ok || code == c
		}
		if !ok {
			t.Fatalf("%s: error code %d, want one of %v", tc.name, code, tc.codes)
		}
	}
	part, _ := b.partition("crc", 0)
	if part.LogEndOffset() != 0 {
		t.Fatalf("corrupt batches were stored: LEO %d", part.LogEndOffset())
	}
}
