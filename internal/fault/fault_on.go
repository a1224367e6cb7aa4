//go:build onceflow_faults

package fault

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Enabled reports whether this binary was built with Tag, so its fault
// points can kill it.
const Enabled = true

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

// Point marks the named step (a constant of points.go). When armed for
// this hit it kills the process.
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
