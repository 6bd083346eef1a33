package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
)

// chaosFetcher is node self's SnapshotFetcher over a chaosNet: in
// process, straight to the leader's Host.ServeSnapshotFile, failing as a
// connection would when either node is down or the link is cut. It does
// not go through the message path, so a transfer is never dropped,
// delayed or reordered with raft's messages.
type chaosFetcher struct {
	n    *chaosNet
	self uint64
}

func (n *chaosNet) fetcher(self uint64) SnapshotFetcher { return chaosFetcher{n: n, self: self} }

var errUnreachable = errors.New("test: node unreachable")

func (f chaosFetcher) host(from uint64) (*Host, error) {
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	h := f.n.hosts[from]
	if h == nil || f.n.down[from] || f.n.down[f.self] || f.n.cut[[2]uint64{f.self, from}] || f.n.cut[[2]uint64{from, f.self}] {
		return nil, fmt.Errorf("%w: %d from %d", errUnreachable, from, f.self)
	}
	f.n.snapFetches++
	return h, nil
}

func (f chaosFetcher) FetchSnapshotFile(ctx context.Context, from uint64, group GroupID, index uint64, sf segment.SnapshotFile, w io.Writer) error {
	h, err := f.host(from)
	if err != nil {
		return err
	}
	f.n.mu.Lock()
	fail := f.n.snapFail > 0
	if fail {
		f.n.snapFail--
	}
	gate := f.n.snapGate
	if gate != nil {
		f.n.snapHeld++
	}
	f.n.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail {
		// Half a file, then the connection drops.
		w.Write([]byte("torn"))
		return fmt.Errorf("%w: the transfer broke", errUnreachable)
	}
	return h.ServeSnapshotFile(group, index, sf, w)
}

func (f chaosFetcher) SnapshotFailed(ctx context.Context, from uint64, group GroupID, index uint64, to uint64) error {
	h, err := f.host(from)
	if err != nil {
		return err
	}
	return h.ReportSnapshotFailure(group, to)
}

func TestRaftSnapDataCompacted(t *testing.T) {
	d := raftSnapData{nextOffset: 120, epochs: []epochEntry{{epoch: 1, startOffset: 0}, {epoch: 4, startOffset: 77}},
		producers: []byte("producer state"), compacted: true, logStartOffset: 3,
		files: []segment.SnapshotFile{{Base: 0, Size: 900, CRC: 0xabcdef01}, {Base: 60, Size: 10, CRC: 2}}}
	b := encodeRaftSnap(d)
	got, err := decodeRaftSnap(b)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", d) {
		t.Fatalf("got %+v\nwant %+v", got, d)
	}
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 1
		if _, err := decodeRaftSnap(c); !errors.Is(err, errBadRaftSnapshot) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	// Fields that do not fit together are refused even with a good
	// checksum: files out of order, at or past the next offset, a log
	// start offset below the first file.
	for _, bad := range []raftSnapData{
		{nextOffset: 10, compacted: true, logStartOffset: 0, files: []segment.SnapshotFile{{Base: 5}, {Base: 2}}},
		{nextOffset: 10, compacted: true, logStartOffset: 0, files: []segment.SnapshotFile{{Base: 10}}},
		{nextOffset: 10, compacted: true, logStartOffset: 1, files: []segment.SnapshotFile{{Base: 2}}},
	} {
		if _, err := decodeRaftSnap(encodeRaftSnap(bad)); !errors.Is(err, errBadRaftSnapshot) {
			t.Fatalf("%+v decoded: %v", bad, err)
		}
	}
	// A delete topic's snapshot decodes with its conf index.
	v4 := raftSnapData{nextOffset: 5, epochs: []epochEntry{{epoch: 2, startOffset: 1}}, confIndex: 77}
	if got, err := decodeRaftSnap(encodeRaftSnap(v4)); err != nil || got.compacted || got.nextOffset != 5 || len(got.epochs) != 1 || got.confIndex != 77 {
		t.Fatalf("version 4: %+v, %v", got, err)
	}
	// Versions 1 to 3 (no conf index) still decode.
	for _, d := range []raftSnapData{v4, d, {nextOffset: 9, state: []byte("s"), confIndex: 3}} {
		b := encodeRaftSnap(d)
		old := append([]byte{}, b[:4]...)
		old = append(old, b[4]-raftSnapConf)
		old = append(old, b[5:13]...) // nextOffset
		old = append(old, b[21:len(b)-4]...)
		old = binary.BigEndian.AppendUint32(old, crc32.Checksum(old, castagnoli))
		got, err := decodeRaftSnap(old)
		d.confIndex = 0
		if err != nil || fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", d) {
			t.Fatalf("version %d: %+v, %v; want %+v", old[4], got, err, d)
		}
	}
}

// keyedBatch is one batch of records key=value.
func keyedBatch(kvs ...string) []byte {
	recs := make([]batch.Record, len(kvs))
	for i, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		recs[i] = batch.Record{Key: []byte(k), Value: []byte(v), Timestamp: 1000}
	}
	return batch.Build(batch.NewBuildOptions(), recs)
}

// latestByKey returns the last value of each key among recs
// (key=value@offset), as key=value sorted by key.
func latestByKey(recs []string) []string {
	last := map[string]string{}
	for _, r := range recs {
		kv, _, _ := strings.Cut(r, "@")
		k, v, _ := strings.Cut(kv, "=")
		last[k] = v
	}
	var out []string
	for k, v := range last {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// compactedRecords returns the records p serves below its high watermark
// as key=value@offset (offsets may have gaps: compaction's).
func compactedRecords(t *testing.T, p *Partition) []string {
	t.Helper()
	var out []string
	next := p.LogStartOffset()
	for next < p.HighWatermark() {
		data, res, err := p.ReadBytes(nil, next, 1<<20)
		res.Release()
		if err != nil {
			t.Fatalf("read at %d: %v", next, err)
		}
		if len(data) == 0 {
			t.Fatalf("read at %d below the high watermark %d returned nothing", next, p.HighWatermark())
		}
		for len(data) > 0 {
			h, err := batch.ParseHeader(data)
			if err != nil {
				t.Fatal(err)
			}
			if h.Control() {
				t.Fatalf("a control or internal batch was served at offset %d", h.BaseOffset)
			}
			if h.NextOffset() <= next {
				t.Fatalf("batch [%d, %d) served at %d", h.BaseOffset, h.NextOffset(), next)
			}
			if _, err := batch.Iterate(data[:h.Size()], func(r *batch.Record) error {
				if r.Offset >= next {
					out = append(out, fmt.Sprintf("%s=%s@%d", r.Key, r.Value, r.Offset))
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			next = h.NextOffset()
			data = data[h.Size():]
		}
	}
	return out
}

// TestSnapshotStreamTCP fetches a compacted partition's snapshot files
// from its host over the TCP transport's snapshot stream, and reports a
// failed snapshot through it.
func TestSnapshotStreamTCP(t *testing.T) {
	c := newPCluster(t, 1, 1, 1)
	c.cfg.Log.SegmentBytes = 1024
	c.cfg.Log.CleanupPolicy = segment.PolicyCompact
	c.cfg.Log.MinCleanableDirtyRatio = 0
	c.startAll()
	g := c.groups[0]
	c.drive("a leader", func() bool {
		c.nodes[1].host.Campaign(g)
		return c.nodes[1].parts[g].IsLeader()
	})
	p := c.nodes[1].parts[g]
	var last *Pending
	for i := range 80 {
		pd, err := p.ProduceWith(keyedBatch(fmt.Sprintf("k%d=v%d", i%3, i)), ProduceOptions{Acks: AcksAll})
		if err != nil {
			t.Fatal(err)
		}
		last = pd
	}
	if _, err := c.wait(last); err != nil {
		t.Fatal(err)
	}
	// A one-voter leader answers once its write is durable, before raft
	// applies the entry (soleVoterDurable); the cleaner cleans only what
	// is applied.
	c.drive("the entries applied", func() bool {
		st, err := c.nodes[1].host.Status(g)
		return err == nil && st.Applied == st.Commit && st.Commit == p.log.LastIndex()
	})
	if _, err := p.log.Clean(p.HighWatermark()); err != nil {
		t.Fatal(err)
	}
	files, err := p.log.SnapshotFiles()
	if err != nil || len(files) == 0 {
		t.Fatalf("files %v, %v", files, err)
	}
	server, err := ListenTCP(1, "127.0.0.1:0", quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	server.SetHost(c.nodes[1].host)
	client, err := ListenTCP(2, "127.0.0.1:0", quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	client.SetPeer(1, server.Addr().String())
	f := client.SnapshotFetcher()
	ctx := context.Background()
	for _, sf := range files {
		var buf bytes.Buffer
		if err := f.FetchSnapshotFile(ctx, 1, g, p.log.FirstIndex()-1, sf, &buf); err != nil {
			t.Fatal(err)
		}
		if int64(buf.Len()) != sf.Size || crc32c(buf.Bytes()) != sf.CRC {
			t.Fatalf("file %d: %d bytes, want %d (crc ok %v)", sf.Base, buf.Len(), sf.Size, crc32c(buf.Bytes()) == sf.CRC)
		}
	}
	// A file the leader no longer has (another size) is refused.
	bad := files[0]
	bad.Size++
	if err := f.FetchSnapshotFile(ctx, 1, g, 0, bad, io.Discard); !errors.Is(err, errSnapRemote) {
		t.Fatalf("a wrong size: %v", err)
	}
	if err := f.FetchSnapshotFile(ctx, 1, GroupID{Partition: 77}, 0, files[0], io.Discard); !errors.Is(err, errSnapRemote) {
		t.Fatalf("an unknown group: %v", err)
	}
	if err := f.SnapshotFailed(ctx, 1, g, 0, 2); err != nil {
		t.Fatal(err)
	}
	if err := f.FetchSnapshotFile(ctx, 3, g, 0, files[0], io.Discard); err == nil {
		t.Fatal("a node without an address answered")
	}
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// TestCompactedSnapshotCrashBeforeStateSaved: a follower installs a
// compacted topic's snapshot (durably, in step 2 of the host's loop) and
// crashes before the group state covering it is saved (step 4). It
// restarts from its installed log with the older saved state, whose
// commit index is below the log's first index - 1, and catches up.
func TestCompactedSnapshotCrashBeforeStateSaved(t *testing.T) {
	c, snapIndex := compactedBehind(t)
	g := c.groups[0]
	c.nodes[3].states.refuse = func(st GroupState) bool { return st.HardState.Commit >= snapIndex }
	c.start(3)
	c.drive("node 3 to install the snapshot", func() bool { return c.nodes[3].parts[g].log.FirstIndex() > snapIndex })
	c.crash(3, 1)
	c.start(3)
	c.settle()
	want := compactedRecords(t, c.nodes[1].parts[g])
	if got := compactedRecords(t, c.nodes[3].parts[g]); !slices.Equal(got, want) {
		t.Fatalf("node 3 serves %v\nnode 1 %v", got, want)
	}
}

// compactedBehind builds a 3-node compacted cluster led by node 1 in
// which node 3 was down while the others produced and cleaned: it needs
// the segment transfer. It returns the snapshot index.
func compactedBehind(t *testing.T) (*pcluster, uint64) {
	t.Helper()
	c := newPCluster(t, 3, 1, 1)
	c.cfg.Log.SegmentBytes = 1024
	c.cfg.Log.CleanupPolicy = segment.PolicyCompact
	c.cfg.Log.MinCleanableDirtyRatio = 0
	c.startAll()
	g := c.groups[0]
	ticks := 0
	c.drive("node 1 to lead", func() bool {
		if ticks%20 == 0 {
			c.nodes[1].host.Campaign(g)
		}
		ticks++
		return c.leads(1)
	})
	produceKeyed(t, c, 20, 10, 0)
	c.settle()
	c.stop(3)
	produceKeyed(t, c, 100, 4, 20)
	c.settle()
	for _, n := range c.up() {
		p := n.parts[g]
		if _, err := p.log.Clean(p.HighWatermark()); err != nil {
			t.Fatal(err)
		}
	}
	snapIndex := c.nodes[1].parts[g].log.FirstIndex() - 1
	if snapIndex == 0 {
		t.Fatal("nothing cleaned out of the raft log")
	}
	return c, snapIndex
}

// produceKeyed writes n keyed batches through the leader, again after a
// leadership change (elections are timing's under the race detector),
// and waits for each.
func produceKeyed(t *testing.T, c *pcluster, n, keys, from int) {
	t.Helper()
	for i := range n {
		for try := 0; ; try++ {
			lead := c.waitLeader(c.groups[0])
			pd, err := lead.ProduceWith(keyedBatch(fmt.Sprintf("k%d=v%d", i%keys, from+i)), ProduceOptions{Acks: AcksAll})
			if err == nil {
				_, err = c.wait(pd)
			}
			if err == nil {
				break
			}
			if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrLeaderNotAvailable) || try > 50 {
				t.Fatal(err)
			}
			c.tick()
			time.Sleep(time.Millisecond)
		}
	}
}

// TestCompactedSnapshotTransferDoesNotBlock holds a follower's segment
// transfer: meanwhile its host keeps handling the group (it follows the
// leader's heartbeats, stands for no election, answers calls), and the
// group keeps committing. Released, the follower catches up.
func TestCompactedSnapshotTransferDoesNotBlock(t *testing.T) {
	c, _ := compactedBehind(t)
	g := c.groups[0]
	gate := make(chan struct{})
	c.net.mu.Lock()
	c.net.snapGate = gate
	c.net.mu.Unlock()
	c.start(3)
	c.drive("a held transfer", func() bool {
		c.net.mu.Lock()
		defer c.net.mu.Unlock()
		return c.net.snapHeld > 0
	})
	// The group commits without node 3 meanwhile, and node 3's host
	// keeps handling it: it answers calls and follows the leader.
	produceKeyed(t, c, 10, 4, 500)
	for range 60 { // several election timeouts, paced as drive paces them
		c.tick()
		time.Sleep(time.Millisecond)
	}
	c.drive("node 3 to follow the leader while its transfer is held", func() bool {
		st, err := c.nodes[3].host.Status(g)
		if err != nil {
			t.Fatal(err)
		}
		lead := c.leader(g)
		if lead == nil {
			return false
		}
		id, _, _ := lead.Leader()
		return st.Lead == id && id != 3
	})
	c.net.mu.Lock()
	held := c.net.snapHeld
	c.net.mu.Unlock()
	if held == 0 || c.nodes[3].parts[g].log.FirstIndex() != 1 {
		t.Fatalf("the transfer was not held: %d requests, first index %d", held, c.nodes[3].parts[g].log.FirstIndex())
	}
	c.net.mu.Lock()
	c.net.snapGate = nil
	c.net.mu.Unlock()
	close(gate)
	c.settle()
	want := compactedRecords(t, c.nodes[1].parts[g])
	if got := compactedRecords(t, c.nodes[3].parts[g]); !slices.Equal(got, want) {
		t.Fatalf("node 3 serves %v\nnode 1 %v", got, want)
	}
}
