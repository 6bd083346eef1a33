package batch

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Decompression memory. One batch's records may decompress to up to
// MaxDecompressedBytes (256 MiB by default), so a 1 MiB gzip "bomb"
// needs 256 MiB to check; sixteen at once would need 4 GiB. gzip and lz4
// records are checked as a stream and need none of this (stream.go). For
// the rest, output up to smallDecompressed bytes (8 MiB: every ordinary
// batch, a 1 MiB batch compressed eight times) needs nothing; a
// decompression that grows past it first takes one of a fixed number of
// large-decompression slots,
// waiting while all are taken, and gives it back once its output is no
// longer used. A call holds at most one slot and small ones hold none, so
// nothing waits in a cycle. The slots are the memory set with
// SetDecompressionMemory divided by MaxDecompressedBytes (at least one):
// by default 512 MiB, two slots. Once the last large decompression gives
// its slot back after holding more than freeAfter bytes, the heap is
// returned to the OS (at most once a second), so a bomb's memory is not
// kept resident; ordinary traffic never forces that collection.
const (
	smallDecompressed = 8 << 20
	freeAfter         = 64 << 20
)

// DefaultDecompressionMemory is the default of SetDecompressionMemory, in
// bytes.
const DefaultDecompressionMemory = 512 << 20

var (
	largeSlots atomic.Pointer[chan struct{}]
	largeHeld  atomic.Int64 // slots held now
	largePeak  atomic.Int64 // the most slots ever held at once (tests)
	// bigSinceFree: a decompression past freeAfter ended since the heap
	// was last returned to the OS.
	bigSinceFree atomic.Bool
	freeMu       sync.Mutex
	lastFree     time.Time
)

func init() { SetDecompressionMemory(DefaultDecompressionMemory) }

// SetDecompressionMemory bounds the memory, in bytes, that decompressions
// larger than 1 MiB may use together (the broker's
// sluice.decompression.memory.bytes): bytes / MaxDecompressedBytes of
// them run at once, at least one. Set it before use; calls already
// waiting keep the old slots.
func SetDecompressionMemory(bytes int64) {
	n := max(bytes/int64(max(MaxDecompressedBytes, 1)), 1)
	ch := make(chan struct{}, n)
	largeSlots.Store(&ch)
}

// grant is one decompression's claim on a large slot.
type grant struct {
	slot chan struct{} // nil until taken
	size int           // the most output bytes its buffer reached (grew)
}

// grew notes that the decompression's buffer reached n bytes, whether or
// not it then succeeds (a bomb fails at the limit, having grown to it).
func (g *grant) grew(n int) {
	if g != nil {
		g.size = max(g.size, n)
	}
}

// need takes a large slot unless the grant holds one already.
func (g *grant) need() {
	if g.slot != nil {
		return
	}
	ch := *largeSlots.Load()
	ch <- struct{}{}
	g.slot = ch
	n := largeHeld.Add(1)
	for {
		p := largePeak.Load()
		if n <= p || largePeak.CompareAndSwap(p, n) {
			break
		}
	}
}

// release gives the slot back (when held) and, once no large
// decompression is running, returns freed memory to the OS.
func (g *grant) release() {
	if g == nil || g.slot == nil {
		return
	}
	<-g.slot
	g.slot = nil
	if g.size > freeAfter {
		bigSinceFree.Store(true)
	}
	g.size = 0
	if largeHeld.Add(-1) != 0 || !bigSinceFree.Load() {
		return
	}
	freeMu.Lock()
	defer freeMu.Unlock()
	if time.Since(lastFree) < time.Second {
		return
	}
	lastFree = time.Now()
	bigSinceFree.Store(false)
	go debug.FreeOSMemory()
}
