package nexmark

// javaRandom is the linear congruential generator of java.util.Random
// (48-bit state, multiplier 0x5DEECE66D). The Nexmark generators draw every
// field of event n from a generator seeded with n, so using the same
// algorithm keeps the distributions of the reference generators and makes
// each event a pure function of its number.
type javaRandom struct{ seed uint64 }

const (
	jrMult = 0x5DEECE66D
	jrMask = (1 << 48) - 1
)

func newJavaRandom(seed int64) javaRandom {
	return javaRandom{seed: (uint64(seed) ^ jrMult) & jrMask}
}

func (r *javaRandom) next(bits uint) int32 {
	r.seed = (r.seed*jrMult + 0xB) & jrMask
	return int32(int64(r.seed) >> (48 - bits))
}

// nextInt is java.util.Random.nextInt(): 32 uniform bits.
func (r *javaRandom) nextInt() int32 { return r.next(32) }

// intn is java.util.Random.nextInt(bound) for bound > 0, with its
// rejection of the biased tail.
func (r *javaRandom) intn(bound int32) int32 {
	if bound&(-bound) == bound {
		return int32((int64(bound) * int64(r.next(31))) >> 31)
	}
	for {
		bits := r.next(31)
		val := bits % bound
		if bits-val+(bound-1) >= 0 { // int32 overflow means a biased draw
			return val
		}
	}
}

// int63n is Nexmark's LongGenerator.nextLong(random, n): nextInt for n that
// fits in an int, else |nextLong % n|.
func (r *javaRandom) int63n(n int64) int64 {
	if n < 1<<31-1 {
		return int64(r.intn(int32(n)))
	}
	v := (int64(r.next(32)) << 32) + int64(r.next(32))
	v %= n
	if v < 0 {
		v = -v
	}
	return v
}

// float64 is java.util.Random.nextDouble: 53 uniform bits in [0, 1).
func (r *javaRandom) float64() float64 {
	return float64((int64(r.next(26))<<27)+int64(r.next(27))) * (1.0 / (1 << 53))
}
