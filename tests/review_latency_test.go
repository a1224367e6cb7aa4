package tests

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/internal/fault/faulttest"
)

// every0All runs TestReviewCrashEveryZero over every crashprog mode (about
// 4 minutes more under -race on 2 cores); by default it runs two.
var every0All = flag.Bool("crash.every0.all", false, "TestReviewCrashEveryZero: every crashprog mode, not only aggregate and chain")

// TestReviewCrashEveryZero is TestCrashAtEveryFaultPoint under Every(0)
// (crashprog -every0), where h/latency plans batch N+1 while commits/N is
// written and syncs state while the sinks run: the crash tests above all
// run AvailableNow, which never plans ahead. The output after SIGKILLs at
// each engine fault point and a clean finish must equal a run without
// crashes under AvailableNow, batch for batch (two modes by default,
// every mode with -crash.every0.all).
func TestReviewCrashEveryZero(t *testing.T) {
	faulttest.Require(t)
	bin := buildProg(t, "github.com/onceflow/onceflow/tests/crashprog")
	modes := []string{"aggregate", "chain"} // a group-by, and windows feeding Top: the plan ahead with and without eviction
	if *every0All {
		modes = []string{"aggregate", "stateless", "windowed", "sliding", "chain", "join", "tablejoin", "process"}
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			var extra []string
			if mode != "aggregate" {
				extra = []string{"-" + mode}
			}
			refOut := t.TempDir()
			ref := crashRun{bin: bin, args: progArgs(t.TempDir(), refOut, extra...)}
			if killed, _ := ref.once(t, "", 0); killed {
				t.Fatal("reference run was killed")
			}
			want, reps := readOut(t, refOut)
			if len(want) < 12 || reps != 0 {
				t.Fatalf("reference run: %d batches, %d repeats", len(want), reps)
			}
			// Without crashes, Every(0) gives the same batches.
			e0Out := t.TempDir()
			e0 := crashRun{bin: bin, args: progArgs(t.TempDir(), e0Out, append(extra, "-every0")...)}
			if killed, _ := e0.once(t, "", 0); killed {
				t.Fatal("Every(0) run was killed")
			}
			got, _ := readOut(t, e0Out)
			compareOut(t, want, got)
			for _, point := range fault.EnginePoints() {
				t.Run(point, func(t *testing.T) {
					out := t.TempDir()
					c := crashRun{bin: bin, args: progArgs(t.TempDir(), out, append(extra, "-every0")...)}
					kills := 0
					for k := 2; k < 2+*pointKills; k++ {
						killed, stderr := c.once(t, fmt.Sprintf("%s@%d", point, k), 0)
						if !killed {
							break
						}
						if !strings.Contains(stderr, "onceflow-fault: "+point) {
							t.Fatalf("killed without reaching the fault point:\n%s", stderr)
						}
						kills++
					}
					if killed, _ := c.once(t, "", 0); killed {
						t.Fatal("clean run was killed")
					}
					got, _ := readOut(t, out)
					compareOut(t, want, got)
				})
			}
		})
	}
}
