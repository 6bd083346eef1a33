package server

import (
	"bufio"
	"errors"
	"net"
	"syscall"

	"github.com/sluicemq/sluice/segment"
)

// sendRange sends a file range on a TCP connection with sendfile(2), so
// the bytes go from the page cache to the socket without passing through
// Go buffers; other connections copy.
func sendRange(conn net.Conn, w *bufio.Writer, r segment.FileRange) error {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return copyRange(w, r)
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return copyRange(w, r)
	}
	fc, ok := r.File.(syscall.Conn)
	if !ok {
		return copyRange(w, r)
	}
	rawFile, err := fc.SyscallConn()
	if err != nil {
		return copyRange(w, r)
	}
	// Use the file's descriptor inside its RawConn callback: that holds a
	// reference, so a concurrent Close (topic deletion, retention) cannot
	// release or reuse the descriptor number mid-send.
	var serr error
	ferr := rawFile.Read(func(fd uintptr) bool {
		serr = sendfileAll(raw, int(fd), r.Position, r.Size)
		return true
	})
	if ferr != nil {
		return ferr
	}
	return serr
}

// sendfileAll sends size bytes of file fd from off on the socket.
func sendfileAll(raw syscall.RawConn, fd int, off, left int64) error {
	var serr error
	werr := raw.Write(func(sock uintptr) bool {
		for left > 0 {
			n, err := syscall.Sendfile(int(sock), fd, &off, int(min(left, 1<<30)))
			if n > 0 {
				left -= int64(n)
			}
			switch {
			case errors.Is(err, syscall.EAGAIN):
				return false // wait until the socket is writable
			case errors.Is(err, syscall.EINTR):
				continue
			case err != nil:
				serr = err
				return true
			case n == 0:
				serr = errors.New("server: sendfile wrote nothing (file shorter than its range)")
				return true
			}
		}
		return true
	})
	if werr != nil {
		return werr
	}
	return serr
}
