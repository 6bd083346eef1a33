// Command sluice-probe probes a running broker the way the hardening issue
// did (an operator or an attacker on loopback) and prints figures: the
// broker's RSS and descriptors (with -pid) and whether it still serves.
//
//		sluice-probe [-addr host:port] [-pid PID] frames|bombs|conns N|topics N|parts NAME N
//
//	  - frames: 60 connections each declaring a 100 MiB request, sending 64 KiB;
//	  - bombs: 16 concurrent gzip batches decompressing to 255 MiB each;
//	  - conns N: N idle connections, then closed;
//	  - topics N: one Metadata request naming N unknown topics, auto-create on;
//	  - parts NAME N: CreateTopics of N partitions.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	addr = flag.String("addr", "127.0.0.1:9092", "")
	pid  = flag.Int("pid", 0, "broker pid for RSS")
)

func rss() string {
	if *pid == 0 {
		return "?"
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", *pid))
	if err != nil {
		return "gone"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "VmRSS:"))
		}
	}
	return "?"
}

func fds() string {
	if *pid == 0 {
		return "?"
	}
	e, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", *pid))
	if err != nil {
		return "gone"
	}
	return strconv.Itoa(len(e))
}

func alive() bool {
	cl, err := kgo.NewClient(kgo.SeedBrokers(*addr))
	if err != nil {
		return false
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	return err == nil
}

func frames(n int) {
	var conns []net.Conn
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", *addr)
		if err != nil {
			fmt.Println("dial:", err)
			break
		}
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], 100<<20)
		c.Write(hdr[:])
		c.Write(make([]byte, 64<<10))
		conns = append(conns, c)
	}
	time.Sleep(3 * time.Second)
	fmt.Printf("frames: %d conns declaring 100 MiB, 64 KiB sent: RSS %s, fds %s, serving %v\n", len(conns), rss(), fds(), alive())
	for _, c := range conns {
		c.Close()
	}
	time.Sleep(2 * time.Second)
	fmt.Printf("frames: after close: RSS %s, serving %v\n", rss(), alive())
}

func bombs() {
	cl, _ := kgo.NewClient(kgo.SeedBrokers(*addr))
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	adm.CreateTopics(ctx, 16, 1, nil, "bombs")
	time.Sleep(time.Second)
	md, _ := adm.Metadata(ctx, "bombs")
	tid := md.Topics["bombs"].ID
	// one record of 255 MiB zeros, gzip
	var raw bytes.Buffer
	val := 255 << 20
	rec := []byte{}
	body := []byte{0}                    // attributes
	body = binary.AppendVarint(body, 0)  // ts delta
	body = binary.AppendVarint(body, 0)  // offset delta
	body = binary.AppendVarint(body, -1) // key null
	body = binary.AppendVarint(body, int64(val))
	tail := binary.AppendVarint(nil, 0) // headers
	rec = binary.AppendVarint(rec, int64(len(body)+val+len(tail)))
	raw.Write(rec)
	raw.Write(body)
	raw.Write(make([]byte, val))
	raw.Write(tail)
	var z bytes.Buffer
	w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	w.Write(raw.Bytes())
	w.Close()
	comp := z.Bytes()
	now := time.Now().UnixMilli()
	hdr := make([]byte, 61)
	binary.BigEndian.PutUint64(hdr[0:], 0)
	binary.BigEndian.PutUint32(hdr[8:], uint32(61-12+len(comp)))
	binary.BigEndian.PutUint32(hdr[12:], 0xffffffff) // leader epoch -1
	hdr[16] = 2
	binary.BigEndian.PutUint16(hdr[21:], 1) // gzip
	binary.BigEndian.PutUint32(hdr[23:], 0) // last offset delta
	binary.BigEndian.PutUint64(hdr[27:], uint64(now))
	binary.BigEndian.PutUint64(hdr[35:], uint64(now))
	binary.BigEndian.PutUint64(hdr[43:], ^uint64(0))
	binary.BigEndian.PutUint16(hdr[51:], 0xffff)
	binary.BigEndian.PutUint32(hdr[53:], 0xffffffff)
	binary.BigEndian.PutUint32(hdr[57:], 1)
	b := append(hdr, comp...)
	crc := crc32c(b[21:])
	binary.BigEndian.PutUint32(b[17:], crc)
	fmt.Printf("bombs: each %d bytes compressed -> %d MiB\n", len(b), val>>20)
	peak := rss()
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				r := rss()
				if len(r) > len(peak) || (len(r) == len(peak) && r > peak) {
					peak = r
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for p := int32(0); p < 16; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c2, _ := kgo.NewClient(kgo.SeedBrokers(*addr), kgo.ProducerBatchMaxBytes(16<<20))
			defer c2.Close()
			req := kmsg.NewPtrProduceRequest()
			req.Acks, req.TimeoutMillis = 1, 30000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "bombs"
			rt.TopicID = tid
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = p
			rp.Records = append([]byte(nil), b...)
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, c2)
			if err != nil {
				fmt.Println("bomb", p, err)
				return
			}
			if p == 0 {
				fmt.Println("bomb 0: code", resp.Topics[0].Partitions[0].ErrorCode)
			}
		}()
	}
	wg.Wait()
	close(stop)
	fmt.Printf("bombs: peak RSS %s; right after %s\n", peak, rss())
	time.Sleep(5 * time.Second)
	fmt.Printf("bombs: 5 s after %s, serving %v\n", rss(), alive())
}

func conns(n int) {
	var cs []net.Conn
	var firstErr error
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", *addr)
		if err != nil {
			firstErr = err
			break
		}
		cs = append(cs, c)
	}
	time.Sleep(2 * time.Second)
	fmt.Printf("conns: opened %d (first error %v): broker fds %s\n", len(cs), firstErr, fds())
	for _, c := range cs {
		c.Close()
	}
	time.Sleep(3 * time.Second)
	fmt.Printf("conns: after closing, serving %v, fds %s\n", alive(), fds())
}

func manyTopics(n int) {
	cl, _ := kgo.NewClient(kgo.SeedBrokers(*addr), kgo.RequestTimeoutOverhead(2*time.Minute))
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	for i := 0; i < n; i++ {
		t := kmsg.NewMetadataRequestTopic()
		s := fmt.Sprintf("auto-%d", i)
		t.Topic = &s
		req.Topics = append(req.Topics, t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	resp, err := req.RequestWith(ctx, cl)
	codes := map[int16]int{}
	if err == nil {
		for _, t := range resp.Topics {
			codes[t.ErrorCode]++
		}
	}
	fmt.Printf("topics: %d unknown with auto-create: %v in %v, codes %v; serving %v, RSS %s, fds %s\n", n, err, time.Since(start).Round(time.Millisecond), codes, alive(), rss(), fds())
}

func main() {
	flag.Parse()
	switch flag.Arg(0) {
	case "frames":
		frames(60)
	case "bombs":
		bombs()
	case "conns":
		n, _ := strconv.Atoi(flag.Arg(1))
		conns(n)
	case "parts":
		n, _ := strconv.Atoi(flag.Arg(2))
		parts(flag.Arg(1), int32(n))
	case "topics":
		n, _ := strconv.Atoi(flag.Arg(1))
		manyTopics(n)
	}
}
