//go:build !linux

package server

import (
	"bufio"
	"net"

	"github.com/sluicemq/sluice/segment"
)

// sendRange copies a file range to the connection (sendfile is used on
// Linux only).
func sendRange(_ net.Conn, w *bufio.Writer, r segment.FileRange) error { return copyRange(w, r) }
