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
	off, left := r.Position, r.Size
	fd := int(r.File.Fd())
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
