package index

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// memFile is an in-memory File. It records a trace of the calls that reach
// it (reads, writes, truncates, syncs) so tests can see the I/O an
// operation does, and can fail chosen operations.
type memFile struct {
	data   []byte
	closed bool
	trace  []string
	// failOp, when set, fails the next call whose name ("write", "truncate",
	// "sync", "read", "size", "close") matches, then clears itself.
	failOp string
	// noTrace turns the trace off (benchmarks).
	noTrace bool
}

var errInjected = errors.New("injected error")

func (m *memFile) fail(op string) error {
	if m.failOp == op {
		m.failOp = ""
		m.trace = append(m.trace, op+" -> injected error")
		return errInjected
	}
	return nil
}

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	if err := m.fail("read"); err != nil {
		return 0, err
	}
	m.trace = append(m.trace, fmt.Sprintf("ReadAt(off=%d, n=%d)", off, len(p)))
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	if off >= int64(len(m.data)) {
		return 0, io.EOF
	}
	n := copy(p, m.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	if err := m.fail("write"); err != nil {
		return 0, err
	}
	kind := ""
	if !m.noTrace && len(p) > 0 && bytes.Count(p, []byte{0}) == len(p) {
		kind = ", zeros"
	}
	if !m.noTrace {
		m.trace = append(m.trace, fmt.Sprintf("WriteAt(off=%d, n=%d%s)", off, len(p), kind))
	}
	m.writeRaw(p, off)
	return len(p), nil
}

// writeRaw writes without tracing, growing the file as needed.
func (m *memFile) writeRaw(p []byte, off int64) {
	if end := off + int64(len(p)); end > int64(len(m.data)) {
		m.data = append(m.data, make([]byte, end-int64(len(m.data)))...)
	}
	copy(m.data[off:], p)
}

func (m *memFile) Truncate(size int64) error {
	if err := m.fail("truncate"); err != nil {
		return err
	}
	m.trace = append(m.trace, fmt.Sprintf("Truncate(%d)", size))
	m.resize(size)
	return nil
}

func (m *memFile) resize(size int64) {
	if size <= int64(len(m.data)) {
		m.data = m.data[:size:size] // drop the tail for good
		return
	}
	m.data = append(m.data, make([]byte, size-int64(len(m.data)))...)
}

func (m *memFile) Sync() error {
	if err := m.fail("sync"); err != nil {
		return err
	}
	m.trace = append(m.trace, "Sync()")
	return nil
}

func (m *memFile) Size() (int64, error) {
	if err := m.fail("size"); err != nil {
		return 0, err
	}
	return int64(len(m.data)), nil
}

func (m *memFile) Close() error {
	if err := m.fail("close"); err != nil {
		return err
	}
	m.trace = append(m.trace, "Close()")
	m.closed = true
	return nil
}

// takeTrace returns and clears the trace.
func (m *memFile) takeTrace() []string {
	t := m.trace
	m.trace = nil
	return t
}
