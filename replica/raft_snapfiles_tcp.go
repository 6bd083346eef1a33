package replica

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/sluicemq/sluice/segment"
)

// The TCP transport's snapshot stream: a compacted topic's snapshot files
// travel on connections of their own, one request per connection, to the
// same listener as raft's messages but never on their connections, so a
// large file does not delay a heartbeat (the message connection is written
// by one goroutine, frame after frame).
//
// Format: the connection starts with the magic "SLRF", a version byte (1)
// and the requester's node id (uint64), then one request of fixed size:
//
//	kind       uint8    1: send a file; 2: the snapshot failed
//	topic id   16 bytes
//	partition  int32
//	index      uint64   the snapshot's raft index
//	base       int64    kind 1: the file's base offset
//	size       int64    kind 1: its size
//	crc        uint32   kind 1: its CRC-32C (the requester checks it)
//	to         uint64   kind 2: the replica that failed to take it
//
// The answer is a status byte: 0 then, for kind 1, exactly size bytes of
// the file; 1 then a uint32 length and an error message. Integers are
// big-endian. A server error in the middle of a file closes the
// connection (the requester sees a short file).
const (
	snapFileMagic   = "SLRF"
	snapFileVersion = 1
	snapReqFile     = 1
	snapReqFailed   = 2
	snapReqSize     = 1 + 16 + 4 + 8 + 8 + 8 + 4 + 8
	// snapIOTimeout bounds each read or write of the stream.
	snapIOTimeout = 30 * time.Second
)

var errSnapRemote = errors.New("replica: snapshot stream: the leader refused")

// SnapshotFetcher returns the SnapshotFetcher that fetches snapshot files
// from the peers' transports (SetPeer names them) on streams of their
// own.
func (t *TCPTransport) SnapshotFetcher() SnapshotFetcher { return tcpSnapFetcher{t} }

type tcpSnapFetcher struct{ t *TCPTransport }

type snapRequest struct {
	kind      uint8
	group     GroupID
	index     uint64
	file      segment.SnapshotFile
	to        uint64
	requester uint64
}

func (r *snapRequest) encode() []byte {
	b := append([]byte(snapFileMagic), snapFileVersion)
	b = binary.BigEndian.AppendUint64(b, r.requester)
	b = append(b, r.kind)
	b = append(b, r.group.TopicID[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(r.group.Partition))
	b = binary.BigEndian.AppendUint64(b, r.index)
	b = binary.BigEndian.AppendUint64(b, uint64(r.file.Base))
	b = binary.BigEndian.AppendUint64(b, uint64(r.file.Size))
	b = binary.BigEndian.AppendUint32(b, r.file.CRC)
	return binary.BigEndian.AppendUint64(b, r.to)
}

func decodeSnapRequest(b []byte) snapRequest {
	var r snapRequest
	r.kind = b[0]
	copy(r.group.TopicID[:], b[1:17])
	r.group.Partition = int32(binary.BigEndian.Uint32(b[17:]))
	r.index = binary.BigEndian.Uint64(b[21:])
	r.file.Base = int64(binary.BigEndian.Uint64(b[29:]))
	r.file.Size = int64(binary.BigEndian.Uint64(b[37:]))
	r.file.CRC = binary.BigEndian.Uint32(b[45:])
	r.to = binary.BigEndian.Uint64(b[49:])
	return r
}

// do sends one request to node from and returns the connection after a
// good status byte.
func (f tcpSnapFetcher) do(ctx context.Context, from uint64, req snapRequest) (net.Conn, *bufio.Reader, error) {
	f.t.mu.Lock()
	addr, ok := f.t.addrs[from]
	f.t.mu.Unlock()
	if !ok {
		return nil, nil, fmt.Errorf("replica: snapshot stream: no address for node %d", from)
	}
	c, err := f.t.dialPeer(ctx, addr, snapIOTimeout)
	if err != nil {
		return nil, nil, err
	}
	req.requester = f.t.id
	c.SetDeadline(time.Now().Add(snapIOTimeout))
	if _, err := c.Write(req.encode()); err != nil {
		c.Close()
		return nil, nil, err
	}
	r := bufio.NewReaderSize(c, 64<<10)
	status, err := r.ReadByte()
	if err == nil && status != 0 {
		var n [4]byte
		if _, err = io.ReadFull(r, n[:]); err == nil {
			msg := make([]byte, min(binary.BigEndian.Uint32(n[:]), 4096))
			io.ReadFull(r, msg)
			err = fmt.Errorf("%w: %s", errSnapRemote, msg)
		}
	}
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, r, nil
}

func (f tcpSnapFetcher) FetchSnapshotFile(ctx context.Context, from uint64, group GroupID, index uint64, sf segment.SnapshotFile, w io.Writer) error {
	c, r, err := f.do(ctx, from, snapRequest{kind: snapReqFile, group: group, index: index, file: sf})
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	left := sf.Size
	buf := make([]byte, 256<<10)
	for left > 0 {
		c.SetReadDeadline(time.Now().Add(snapIOTimeout))
		n, err := r.Read(buf[:min(int64(len(buf)), left)])
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			left -= int64(n)
		}
		if err != nil && left > 0 {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("replica: snapshot stream: file %d: %d bytes missing: %w", sf.Base, left, err)
		}
	}
	return nil
}

func (f tcpSnapFetcher) SnapshotFailed(ctx context.Context, from uint64, group GroupID, index uint64, to uint64) error {
	c, _, err := f.do(ctx, from, snapRequest{kind: snapReqFailed, group: group, index: index, to: to})
	if err != nil {
		return err
	}
	return c.Close()
}

// serveSnapshotStream answers one snapshot-stream request on c, whose
// hello receive read.
func (t *TCPTransport) serveSnapshotStream(c net.Conn, r *bufio.Reader, version byte) {
	if version != snapFileVersion {
		t.logger.Debug("replica: snapshot stream: bad version", "remote", c.RemoteAddr().String(), "version", version)
		return
	}
	c.SetDeadline(time.Now().Add(snapIOTimeout))
	var b [snapReqSize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return
	}
	req := decodeSnapRequest(b[:])
	t.mu.Lock()
	h := t.host
	t.mu.Unlock()
	bw := bufio.NewWriterSize(c, 256<<10)
	refuse := func(err error) {
		msg := err.Error()
		bw.WriteByte(1)
		bw.Write(binary.BigEndian.AppendUint32(nil, uint32(len(msg))))
		bw.WriteString(msg)
		bw.Flush()
	}
	if h == nil {
		refuse(ErrHostClosed)
		return
	}
	switch req.kind {
	case snapReqFile:
		w := &snapStreamWriter{c: c, w: bw}
		err := h.ServeSnapshotFile(req.group, req.index, req.file, w)
		switch {
		case err != nil && !w.started:
			refuse(err)
		case err != nil:
			t.logger.Debug("replica: snapshot stream: serving a file", "file", req.file.Base, "err", err)
			// The connection closes short.
		default:
			if !w.started {
				bw.WriteByte(0)
			}
			bw.Flush()
		}
	case snapReqFailed:
		if err := h.ReportSnapshotFailure(req.group, req.to); err != nil {
			refuse(err)
			return
		}
		bw.WriteByte(0)
		bw.Flush()
	default:
		refuse(fmt.Errorf("unknown request kind %d", req.kind))
	}
}

// snapStreamWriter writes a file's bytes after the status byte 0, which
// it sends with the first of them.
type snapStreamWriter struct {
	c       net.Conn
	w       *bufio.Writer
	started bool
}

func (s *snapStreamWriter) Write(p []byte) (int, error) {
	s.c.SetWriteDeadline(time.Now().Add(snapIOTimeout))
	if !s.started {
		s.started = true
		if err := s.w.WriteByte(0); err != nil {
			return 0, err
		}
	}
	return s.w.Write(p)
}
