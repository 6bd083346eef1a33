package segment

import (
	"fmt"
	"testing"

	"github.com/sluicemq/sluice/segment/vfs"
)

func debugSegs(l *Log) string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	s := fmt.Sprintf("prev %d/%d:", l.raftPrevIndex, l.raftPrevTerm)
	for _, g := range l.segs {
		s += fmt.Sprintf(" [base %d next %d size %d rfirst %d n %d]", g.base, g.next, g.size, g.rfirst, len(g.rpos))
	}
	return s
}

func debugFS(mem *vfs.MemFS) string {
	names, _ := mem.List("/p/topic-0")
	s := ""
	for _, n := range names {
		fi, _ := mem.Stat("/p/topic-0/" + n)
		s += fmt.Sprintf(" %s:%d", n, fi.Size())
	}
	return s
}

var _ = testing.Verbose
