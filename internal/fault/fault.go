// Package fault places named crash points in the batch protocol so tests can
// kill a real process at an exact step (etcd's raftBeforeSave and friends).
//
// A point does nothing unless the process was started with the environment
// variable ONCEFLOW_FAULT set to a comma-separated list of specs:
//
//	name        kill at the first hit of the named point
//	name@N      kill at the Nth hit (1-based) of the named point
//
// A kill is a real SIGKILL of the process itself: no deferred call, no
// buffered write, no exit handler runs, exactly as when an operator or the
// kernel kills it. Before dying the process writes one line
// "onceflow-fault: NAME" to standard error so a harness can tell a planned
// death from a crash.
//
// The specification is read from the environment once, on the first hit;
// after that the package holds only hit counters. Safe for concurrent use.
package fault

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// EnvVar is the environment variable that arms fault points.
const EnvVar = "ONCEFLOW_FAULT"

type armed struct {
	mu     sync.Mutex
	target map[string]int // point → hit number that kills
	hits   map[string]int
}

var load = sync.OnceValue(func() *armed {
	spec := os.Getenv(EnvVar)
	if spec == "" {
		return nil
	}
	a := &armed{target: map[string]int{}, hits: map[string]int{}}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, n := part, 1
		if i := strings.LastIndexByte(part, '@'); i >= 0 {
			v, err := strconv.Atoi(part[i+1:])
			if err != nil || v < 1 {
				fmt.Fprintf(os.Stderr, "onceflow-fault: ignoring bad spec %q\n", part)
				continue
			}
			name, n = part[:i], v
		}
		a.target[name] = n
	}
	return a
})

// Point marks the named step. When armed for this hit it kills the process.
func Point(name string) {
	a := load()
	if a == nil {
		return
	}
	a.mu.Lock()
	want, ok := a.target[name]
	if !ok {
		a.mu.Unlock()
		return
	}
	a.hits[name]++
	hit := a.hits[name] == want
	a.mu.Unlock()
	if hit {
		fmt.Fprintf(os.Stderr, "onceflow-fault: %s\n", name)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}

// Enabled reports whether any fault point is armed, so callers can skip work
// that exists only to place a point (such as splitting a write in two).
func Enabled() bool { return load() != nil }
