package vfs

import (
	"bytes"
	"math/rand/v2"
	"sort"
)

// CrashOptions configures MemFS.CrashClone.
type CrashOptions struct {
	// Rand, when non-nil, makes the clone keep torn writes: a random prefix
	// of each file's unsynced appended data, sometimes with a few garbage
	// bytes (see CrashClone). The same Rand seed and the same MemFS
	// history give the same clone. When nil, the clone holds exactly the
	// synced state.
	Rand *rand.Rand
}

// tornRunMax bounds the run of garbage bytes written into a torn tail.
const tornRunMax = 16

// CrashClone returns a new, independent MemFS holding what a machine would
// find after losing power at this instant. The model, after Pebble's strict
// MemFS:
//
//   - Every file node has current data and synced data; File.Sync copies
//     the current data to the synced data. Every directory has current
//     entries and synced entries (name to node); SyncDir copies the current
//     entries to the synced entries. The root always exists, and MkdirAll
//     adds each directory it creates to both its parent's current and
//     synced entries.
//   - The clone is built from the root through synced entries only: a
//     creation, rename or removal not followed by SyncDir of the directory
//     concerned is undone. A rename moves the node, so a file reached
//     through either name carries its own synced data; if a rename was
//     synced in the new parent but not in the old one, the node is reached
//     through both names, and the clone shares one node between them (like
//     a hard link). The entries of a removed directory are those it last
//     synced.
//   - Each file in the clone holds its synced data: unsynced writes and
//     unsynced truncations (shrinking or growing) are lost, and a file
//     whose entry is durable but which was never synced is empty.
//   - With opts.Rand set, a file whose current data is longer than its
//     synced data and begins with it (unsynced appends only) also keeps the
//     first k bytes of the unsynced extension, k uniform in [0, len(ext)].
//     When k > 0, with probability 1/2 a run of 1 to min(k, 16) consecutive
//     bytes at a uniformly chosen place inside those k bytes is replaced
//     with garbage: each byte is XORed with a random non-zero value, so it
//     always differs from what was written (a torn sector). Synced bytes
//     are never damaged. Files are visited in sorted path order, so a
//     seeded Rand makes the result reproducible.
//
// In the clone, current and synced state are equal and no file is locked.
// Files open on fs stay attached to fs.
func (fs *MemFS) CrashClone(opts CrashOptions) *MemFS {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	c := crashCloner{rng: opts.Rand, done: map[*memNode]*memNode{}}
	return &MemFS{root: c.clone(fs.root)}
}

type crashCloner struct {
	rng  *rand.Rand
	done map[*memNode]*memNode // clone of each node visited (renames can alias)
}

// clone copies n's durable state. The MemFS's mu must be held.
func (c *crashCloner) clone(n *memNode) *memNode {
	if m, ok := c.done[n]; ok {
		return m
	}
	if n.isDir {
		m := newDirNode()
		m.modTime = n.modTime
		c.done[n] = m
		names := make([]string, 0, len(n.syncedChildren))
		for name := range n.syncedChildren {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			child := c.clone(n.syncedChildren[name])
			m.children[name] = child
			m.syncedChildren[name] = child
		}
		return m
	}
	n.mu.RLock()
	data := c.crashData(n.data, n.synced)
	m := &memNode{data: data, synced: bytes.Clone(data), modTime: n.modTime}
	n.mu.RUnlock()
	c.done[n] = m
	return m
}

// crashData returns a fresh copy of what survives of a file whose current
// contents are data and whose synced contents are synced.
func (c *crashCloner) crashData(data, synced []byte) []byte {
	out := bytes.Clone(synced)
	if c.rng == nil || len(data) <= len(synced) || !bytes.HasPrefix(data, synced) {
		return out
	}
	ext := data[len(synced):]
	k := c.rng.IntN(len(ext) + 1)
	out = append(out, ext[:k]...)
	if k > 0 && c.rng.IntN(2) == 0 {
		run := 1 + c.rng.IntN(min(k, tornRunMax))
		start := len(synced) + c.rng.IntN(k-run+1)
		for i := start; i < start+run; i++ {
			out[i] ^= byte(1 + c.rng.IntN(255))
		}
	}
	return out
}
