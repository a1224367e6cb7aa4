package engine

import (
	"math/rand/v2"
	"testing"
)

// TestPaneDiskBoundCoversWhatFinishReads: on a disk backend a sliding
// window by panes loads, before it merges, the panes whose pane_start is
// below diskBound. For random watermarks, every pane that finish reads —
// those of the windows closing in (prevWatermark, watermark], and those it
// evicts — is below the bound, given that the batch of prevWatermark
// evicted the panes it expired; and when the watermark did not move, the
// bound is the eviction's alone (no window closes: the open panes stay on
// disk).
func TestPaneDiskBoundCoversWhatFinishReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		slide := int64(1+rng.IntN(5)) * 1000
		size := slide * int64(1+rng.IntN(6))
		o := &paneOp{size: size, slide: slide, sizeMs: size, ev: &evictRule{col: 0, inKeys: true, offsetMs: size - 1}}
		prev := int64(rng.IntN(100_000))
		wm := prev + int64(rng.IntN(3))*int64(rng.IntN(20_000))
		fc := &finishCtx{watermark: wm, prevWatermark: prev}
		bound, ok := o.diskBound(fc)
		if wm > 0 && !ok {
			t.Fatalf("watermark %d: no bound", wm)
		}
		if wm == prev && bound != wm-(size-1) {
			t.Fatalf("watermark %d did not move: bound %d, want the eviction's %d", wm, bound, wm-(size-1))
		}
		// Panes still on disk: those the batch of prev did not evict.
		for ps := (prev - 3*size) / slide * slide; ps < wm+2*size; ps += slide {
			if o.ev.expired(ps, prev) {
				continue
			}
			read := o.ev.expired(ps, wm) // evicted now
			for j := int64(0); j < size/slide; j++ {
				end := ps - j*slide + size // a window over the pane
				if end > prev && end <= wm {
					read = true // it closes now
				}
			}
			if read && ps >= bound {
				t.Fatalf("size %d slide %d, watermark %d→%d: pane %d is read by finish but not below the bound %d", size, slide, prev, wm, ps, bound)
			}
		}
	}
}
