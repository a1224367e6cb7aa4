package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// storageFault is one kind of storage fault: the faultstore specs armed on
// the checkpoint and on the file sink's table in the same run. In a spec,
// {seed} is the round's seed and {n} a call number drawn from the test's
// seed, so the fault lands at another step of the protocol each round.
type storageFault struct {
	kind       string
	checkpoint string
	lake       string
}

var storageFaults = []storageFault{
	{"storage ENOSPC", "op=write nth={n} fault=enospc", "op=write nth={n} fault=enospc"},
	{"storage EIO (any call)", "seed={seed}; op=store p=0.04 fault=eio", "seed={seed}; op=store p=0.05 fault=eio"},
	{"storage torn write", "op=fs.write nth={n} fault=torn", "op=fs.write nth={n} fault=torn"},
	{"storage failed fsync", "seed={seed}; op=write|delete p=0.04 fault=syncfail; op=fs.sync|fs.syncdir nth={n} fault=eio",
		"seed={seed}; op=write p=0.04 fault=syncfail; op=fs.sync|fs.syncdir nth={n} fault=eio"},
	{"storage slow calls", "seed={seed}; op=any p=0.03 fault=slow delay=150ms", "seed={seed}; op=any p=0.05 fault=slow delay=150ms"},
}

// TestStorageFaults runs the four-sink program with storage faults
// injected into the checkpoint store and into the file sink's table
// store (storage/faultstore through chaosprog's -checkpoint-faults and
// -lake-faults), at the store layer and, for a local directory, at the
// file-system layer under it. Each faulty run either finishes (the fault
// was ridden through: a slow call, a progress record, which may fail) or
// stops with an error that names the injected fault and the object. Then
// the fault clears, a restart finishes, and every sink reconciles with
// the input.
func TestStorageFaults(t *testing.T) {
	t.Parallel() // its own broker, checkpoint and outputs; see doc.go
	onceflow, prog := programs(t)
	broker := startBroker(t, onceflow, "payments:4,settlements:4")
	h := newHarness(t, onceflow, prog, broker, 31, sinkKafka, sinkLake, sinkPG, sinkLines)
	h.extra = []string{"-max-offsets-per-trigger", "60"}
	cl := h.client()
	table := newFaultTable(t, fmt.Sprintf("go test -race ./tests/chaos/ -run TestStorageFaults -chaos.rounds=%d", *chaosRounds))
	seed := 0
	for _, f := range storageFaults {
		row := table.row(f.kind, h.sinks)
		for range *chaosRounds {
			seed++
			fill := func(spec string) string {
				// A batch writes about four checkpoint objects (its plan,
				// its commit, its progress, one bundle of state deltas a
				// store), so the nth call is drawn from the first dozen:
				// a run of a few batches makes that many.
				return strings.NewReplacer("{seed}", fmt.Sprint(seed), "{n}", fmt.Sprint(1+h.rng.IntN(12))).Replace(spec)
			}
			cp, lake := fill(f.checkpoint), fill(f.lake)
			h.produce(cl, 120+h.rng.IntN(120))
			r := h.start(runSpec{args: []string{"-checkpoint-faults", cp, "-lake-faults", lake}})
			row.runs++
			n := countInjected(r.stderr)
			row.injected += n
			what := fmt.Sprintf("%s (checkpoint %q, lake %q)", f.kind, cp, lake)
			switch {
			case r.killed:
				t.Fatalf("%s: killed without a kill:\n%s", what, r.stderr)
			case r.err == nil:
				row.rode++
				t.Logf("%s: %d faults, rode through in %s", what, n, r.took.Round(time.Millisecond))
			case n == 0:
				t.Fatalf("%s: the run failed with no fault injected: %v\n%s", what, r.err, r.stderr)
			default:
				row.stopped++
				msg := lastError(r.stderr)
				if !strings.Contains(msg, "faultstore: injected") {
					t.Errorf("%s: the run stopped with an error that does not name the injected fault: %s", what, msg)
				}
				t.Logf("%s: stopped after %s: %s", what, r.took.Round(time.Millisecond), msg)
			}
			if r.err == nil {
				continue
			}
			// The fault clears: a restart finishes.
			r = h.start(runSpec{})
			if r.err != nil || r.killed {
				t.Fatalf("%s: the restart without faults did not finish: %v\n%s", f.kind, r.err, r.stderr)
			}
			t.Logf("%s: the restart finished in %s", f.kind, r.took.Round(time.Millisecond))
		}
		row.settle(h)
	}
}
