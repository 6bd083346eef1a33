package batch

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// withDecompressionLimits sets MaxDecompressedBytes and the slots' memory
// for one test.
func withDecompressionLimits(t *testing.T, maxBytes int, memory int64) {
	old := MaxDecompressedBytes
	MaxDecompressedBytes = maxBytes
	SetDecompressionMemory(memory)
	largePeak.Store(0)
	t.Cleanup(func() {
		MaxDecompressedBytes = old
		SetDecompressionMemory(DefaultDecompressionMemory)
	})
}

// bomb is a batch of codec whose one record's value is n zero bytes: a
// few KiB that decompress to n.
func bomb(codec Codec, n int) []byte {
	o := NewBuildOptions()
	o.Codec = codec
	return Build(o, []Record{{Timestamp: 1, Value: make([]byte, n)}})
}

// Sixteen concurrent decompression bombs (the probe: 16 gzip or
// lz4 bombs held about 7 GB): gzip and lz4 are checked as streams, in a
// window, so the heap barely grows; snappy and zstd two at a time (the
// slots). Each still validates. For the slotted codecs the heap's growth
// is logged, not asserted: on two cores the scheduler alone keeps it low.
func TestDecompressionBombsShareSlots(t *testing.T) {
	const size = 24 << 20
	withDecompressionLimits(t, 32<<20, 64<<20) // two slots
	for _, codec := range []Codec{CodecGzip, CodecLZ4, CodecSnappy, CodecZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			largePeak.Store(0)
			b := bomb(codec, size)
			if len(b) > 2<<20 {
				t.Fatalf("the bomb is %d bytes compressed", len(b))
			}
			runtime.GC()
			var base runtime.MemStats
			runtime.ReadMemStats(&base)
			var peak atomic.Uint64
			stop := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				var ms runtime.MemStats
				for {
					runtime.ReadMemStats(&ms)
					if ms.HeapInuse > peak.Load() {
						peak.Store(ms.HeapInuse)
					}
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
				}
			}()
			var wg sync.WaitGroup
			errs := make([]error, 16)
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := append([]byte(nil), b...)
					_, errs[i] = Validate(c)
				}()
			}
			wg.Wait()
			close(stop)
			<-sampled
			for i, err := range errs {
				if err != nil {
					t.Fatalf("bomb %d: %v", i, err)
				}
			}
			grown := int64(peak.Load()) - int64(base.HeapInuse)
			t.Logf("%s: heap grew by at most %d MiB for 16 bombs of %d MiB", codec, grown>>20, size>>20)
			if streamed(codec) {
				// Checked as a stream: no slot, and no batch-sized buffer.
				if p := largePeak.Load(); p != 0 {
					t.Fatalf("%d large slots taken by a streamed codec", p)
				}
				if grown > 16<<20 {
					t.Fatalf("heap grew by %d MiB: the records were not streamed", grown>>20)
				}
				return
			}
			if p := largePeak.Load(); p > 2 {
				t.Fatalf("%d large decompressions at once, want at most the 2 slots", p)
			}
			if p := largePeak.Load(); p == 0 {
				t.Fatalf("no large slot was taken: the test does not exercise the bound")
			}
		})
	}
}

// Small decompressions never wait for a slot, so they go on while every
// slot is held by large ones.
func TestSmallDecompressionsNeedNoSlot(t *testing.T) {
	withDecompressionLimits(t, 32<<20, 32<<20) // one slot
	var g grant
	g.need()
	defer g.release()
	done := make(chan error, 1)
	go func() {
		_, err := Validate(bomb(CodecZstd, 64<<10))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a 64 KiB decompression waited for the held slot")
	}
}

// Iterate materializes the records, so a gzip bomb there takes a slot.
func TestIterateTakesSlot(t *testing.T) {
	withDecompressionLimits(t, 32<<20, 32<<20)
	n := 0
	if _, err := Iterate(bomb(CodecGzip, 12<<20), func(*Record) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("Iterate: %d records, %v", n, err)
	}
	if largePeak.Load() != 1 {
		t.Fatalf("slots taken: %d, want 1", largePeak.Load())
	}
	if largeHeld.Load() != 0 {
		t.Fatalf("slot still held after Iterate returned")
	}
}
