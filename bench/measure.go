package main

import (
	"slices"
	"syscall"
	"time"
)

// cpuTime returns the process's user+system CPU time so far (every thread,
// DuckDB's included).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSSMB returns the process's peak resident set size in MiB (Linux
// reports maxrss in KiB).
func peakRSSMB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024
}

// span measures wall and CPU time of a piece of work.
type span struct {
	wall0 time.Time
	cpu0  time.Duration
}

func start() span { return span{wall0: time.Now(), cpu0: cpuTime()} }

func (s span) stop() (wall, cpu time.Duration) {
	return time.Since(s.wall0), cpuTime() - s.cpu0
}

// percentile returns the p-th percentile (0..100) of xs by the nearest-rank
// method, or 0 for none.
func percentile(xs []int64, p float64) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(p/100*float64(len(s)) + 0.999999)
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}
