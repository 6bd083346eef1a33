package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync/atomic"
	"syscall"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clientConn is one client connection. Requests are read, served and
// answered one at a time, in order, as a Kafka broker does per connection
// (pipelined requests queue in the socket); memory per connection is
// bounded by socket.request.max.bytes plus one response.
type clientConn struct {
	b        *Broker
	conn     net.Conn
	clientID string
	logger   *slog.Logger
	// splices are the current Fetch response's records to send from
	// files (zerocopy.go); reset for every request.
	splices []splice
}

func (b *Broker) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	cc := &clientConn{b: b, conn: c, logger: b.logger.With("remote", c.RemoteAddr().String())}
	defer func() {
		// A bug in one request's handling must not take the broker (and
		// every other client) down: log it and drop this connection.
		if r := recover(); r != nil {
			handlerPanics.Add(1)
			cc.logger.Error("server: panic serving a request; closing the connection", "client_id", cc.clientID, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	w := bufio.NewWriterSize(c, 64<<10)
	for {
		if err := cc.serveOne(ctx, r, w); err != nil {
			switch {
			case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), ctx.Err() != nil:
			case errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNRESET):
				// The client went away mid-answer (a consumer closing
				// while its fetch or heartbeat was served): routine.
				cc.logger.Debug("server: client closed the connection", "client_id", cc.clientID, "reason", err)
			default:
				cc.logger.Info("server: closing connection", "client_id", cc.clientID, "reason", err)
			}
			return
		}
	}
}

// handlerPanics counts recovered panics (tests assert there are none).
var handlerPanics atomic.Int64

// errClose closes the connection after a request Kafka would not answer.
var errClose = errors.New("server: closing connection")

func (cc *clientConn) serveOne(ctx context.Context, r *bufio.Reader, w *bufio.Writer) error {
	var sizeBuf [4]byte
	if _, err := io.ReadFull(r, sizeBuf[:]); err != nil {
		return err
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	if size < 8 || int64(size) > int64(cc.b.cfg.SocketRequestMaxBytes) {
		return fmt.Errorf("%w: request size %d outside [8, socket.request.max.bytes=%d]", errClose, size, cc.b.cfg.SocketRequestMaxBytes)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	rd := kbin.Reader{Src: body}
	key, version, corr := rd.Int16(), rd.Int16(), rd.Int32()
	clientID := rd.NullableString()
	if rd.Complete() != nil {
		return fmt.Errorf("%w: truncated request header", errClose)
	}
	if clientID != nil {
		cc.clientID = *clientID
	}
	h, ok := handlers[key]
	req := kmsg.RequestForKey(key)
	if !ok || req == nil {
		return fmt.Errorf("%w: unsupported API key %d", errClose, key)
	}
	if version < h.minVersion || version > h.maxVersion {
		if key == kmsg.ApiVersions.Int16() {
			// KIP-511: answer UNSUPPORTED_VERSION with our versions, in v0.
			return cc.write(w, corr, key, 0, apiVersionsUnsupported())
		}
		return fmt.Errorf("%w: API %d version %d outside [%d, %d]", errClose, key, version, h.minVersion, h.maxVersion)
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		kmsg.SkipTags(&rd)
	}
	if err := rd.Complete(); err != nil {
		return fmt.Errorf("%w: malformed request header: %v", errClose, err)
	}
	if err := req.ReadFrom(rd.Src); err != nil {
		return fmt.Errorf("%w: malformed %s v%d: %v", errClose, kmsg.NameForKey(key), version, err)
	}
	cc.splices = cc.splices[:0]
	resp, err := h.serve(ctx, cc.b, cc, req)
	if err != nil {
		return err
	}
	if resp == nil { // acks=0 produce: no response
		return nil
	}
	resp.SetVersion(version)
	return cc.write(w, corr, key, version, resp)
}

// write sends one response: size, correlation id, the header's tagged
// fields when the response is flexible (never for ApiVersions), the body.
func (cc *clientConn) write(w *bufio.Writer, corr int32, key, version int16, resp kmsg.Response) error {
	buf := make([]byte, 8, 256+responseSizeHint(resp))
	binary.BigEndian.PutUint32(buf[4:], uint32(corr))
	if resp.IsFlexible() && key != kmsg.ApiVersions.Int16() {
		buf = append(buf, 0) // no tagged fields
	}
	buf = resp.AppendTo(buf)
	if len(cc.splices) > 0 {
		return cc.writeSpliced(w, buf, resp.IsFlexible(), cc.splices)
	}
	binary.BigEndian.PutUint32(buf[:4], uint32(len(buf)-4))
	if _, err := w.Write(buf); err != nil {
		return err
	}
	return w.Flush()
}

// responseSizeHint estimates a response's encoded size so the buffer is
// allocated once: Fetch responses are mostly record bytes.
func responseSizeHint(resp kmsg.Response) int {
	n := 0
	if fr, ok := resp.(*kmsg.FetchResponse); ok {
		for _, t := range fr.Topics {
			n += 64 + len(t.Topic)
			for _, p := range t.Partitions {
				n += 64 + len(p.RecordBatches)
			}
		}
	}
	return n
}
