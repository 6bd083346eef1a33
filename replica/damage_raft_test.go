package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/segment/vfs"
)

// TestLogLostCommittedEntries: a one-voter partition whose log lost
// committed entries (recovery cut its tail at a corrupt batch, after a
// clean shutdown) does not rejoin its raft group: Open fails with
// ErrLostCommitted, naming the indexes, and never panics. That includes
// a saved applied index within the log and a commit index past it, on
// which etcd raft would panic ("tocommit out of range").
func TestLogLostCommittedEntries(t *testing.T) {
	for _, tc := range []struct {
		batch        int  // the batch (of 10) whose last byte flips
		appliedInLog bool // the saved applied index lowered to the log's end
	}{{2, false}, {8, false}, {9, true}} {
		t.Run(fmt.Sprintf("batch %d applied in log %v", tc.batch, tc.appliedInLog), func(t *testing.T) {
			mem := vfs.NewMem()
			p, err := openVoter(t, mem, "/p-0", DefaultTopicConfig(), Options{}, 0)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 10 {
				if _, err := p.Append(context.Background(), valueBatch(fmt.Sprintf("v%d", i)), AppendOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			flipBatchByte(t, mem, "/p-0/00000000000000000000.log", tc.batch)
			if tc.appliedInLog {
				// As if the host's save of the applied index lagged the
				// commit index's (it saves Applied one batch later).
				states, err := openFileStates(mem, "/p-0.raftstate")
				if err != nil {
					t.Fatal(err)
				}
				g := voterGroup("/p-0")
				st, _, err := states.Load(g)
				if err != nil {
					t.Fatal(err)
				}
				st.Applied = 2
				if err := states.Save(map[GroupID]GroupState{g: st}, true); err != nil {
					t.Fatal(err)
				}
			}
			var q *Partition
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("reopening panicked: %v", r)
					}
				}()
				q, err = openVoter(t, mem, "/p-0", DefaultTopicConfig(), Options{}, 0)
			}()
			if q != nil {
				q.Close()
			}
			if !errors.Is(err, ErrLostCommitted) || !strings.Contains(err.Error(), "the log ends at index") {
				t.Fatalf("reopening: %v, want ErrLostCommitted", err)
			}
		})
	}
}

// flipBatchByte flips the last byte of the n-th record batch (from 0) of
// the .log file name on fs.
func flipBatchByte(t *testing.T, fs vfs.FS, name string, n int) {
	t.Helper()
	f, err := fs.OpenReadWrite(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	pos := int64(0)
	for i := 0; ; i++ {
		if pos+12 > size {
			t.Fatalf("%s has %d batches, not %d", name, i, n+1)
		}
		end := pos + 12 + int64(binary.BigEndian.Uint32(buf[pos+8:]))
		if i == n {
			pos = end - 1
			break
		}
		pos = end
	}
	if _, err := f.WriteAt([]byte{buf[pos] ^ 0xff}, pos); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}
