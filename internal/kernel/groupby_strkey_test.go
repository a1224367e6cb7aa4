package kernel

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestStrKeyWords checks the slot words of byte keys: the same key gives
// the same words and hash wherever it lies in a buffer (16 bytes readable
// after it or not), short keys' words are their bytes and length, and keys
// that differ only in a trailing zero or their length differ in words.
func TestStrKeyWords(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := range 41 {
		for range 20 {
			key := make([]byte, n)
			for i := range key {
				key[i] = "a\x00\xff"[rng.IntN(3)]
			}
			// The key alone in its buffer (tail path) and inside a longer one.
			alone := append([]byte(nil), key...)
			inside := append(append([]byte("0123456789abcdef"), key...), "0123456789abcdef"...)
			w0, w1, h := strKey(alone, 0, n)
			x0, x1, xh := strKey(inside, 16, 16+n)
			if w0 != x0 || w1 != x1 || h != xh {
				t.Fatalf("key %q: words %x %x hash %x alone, %x %x %x inside a buffer", key, w0, w1, h, x0, x1, xh)
			}
			if n <= strInline {
				var pad [16]byte
				copy(pad[:], key)
				want0 := binary.LittleEndian.Uint64(pad[:8])
				want1 := binary.LittleEndian.Uint64(pad[8:])&(1<<56-1) | uint64(n)<<56
				if w0 != want0 || w1 != want1 {
					t.Fatalf("key %q: words %x %x, want %x %x", key, w0, w1, want0, want1)
				}
				if strCompareMask(w1) != ^uint64(0) {
					t.Fatalf("key %q: compare mask %x", key, strCompareMask(w1))
				}
			} else {
				if w1>>56 != strLong || (w1>>strOffBits)&strLenMax != uint64(n) || w1&strOffMax != 0 {
					t.Fatalf("key of %d bytes: w1 %x", n, w1)
				}
				s := strSlot{gid: 1}
				s.fill(w0, w1, 12345, 1, 0)
				if s.w1&strCompareMask(w1) != w1 || s.w1&strOffMax != 12345 || strSlotHash(&s) != h {
					t.Fatalf("key of %d bytes: slot w1 %x", n, s.w1)
				}
			}
			// A trailing zero or one byte less is another key.
			longer := append(append([]byte(nil), key...), 0)
			y0, y1, _ := strKey(longer, 0, n+1)
			if y0 == w0 && y1 == w1 {
				t.Fatalf("key %q and %q have the same words", key, longer)
			}
			if n > 0 {
				z0, z1, _ := strKey(key, 0, n-1)
				if z0 == w0 && z1 == w1 {
					t.Fatalf("key %q and its prefix have the same words", key)
				}
			}
		}
	}
}
