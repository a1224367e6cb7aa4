package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow/offsetlog"
)

// walTimestamps returns the batch timestamps of the retained offsets/N
// entries and of the progress records that say a batch was recovered,
// keyed by batch id.
func walTimestamps(t *testing.T, h *harness) (planned map[int64]int64, recovered map[int64]string) {
	t.Helper()
	ctx := context.Background()
	cp, err := openLocation(ctx, h.checkpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	type plan struct {
		BatchID     int64 `json:"batchId"`
		TimestampMs int64 `json:"timestampMs"`
	}
	planned, recovered = map[int64]int64{}, map[int64]string{}
	infos, err := cp.List(ctx, "offsets/")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		b, err := cp.Get(ctx, in.Name)
		if err != nil {
			t.Fatal(err)
		}
		_, body, _ := strings.Cut(string(b), "\n")
		var p plan
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			t.Fatalf("%s: %v", in.Name, err)
		}
		planned[p.BatchID] = p.TimestampMs
	}
	infos, err = cp.List(ctx, "progress/")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		id, ok := offsetlog.ParseFileName("progress", in.Name)
		if !ok {
			continue
		}
		b, err := cp.Get(ctx, in.Name)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Timestamp string `json:"timestamp"`
			Recovered bool   `json:"recovered"`
		}
		_, body, _ := strings.Cut(string(b), "\n") // v1, then the record
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			t.Fatalf("%s: %v", in.Name, err)
		}
		if p.Recovered {
			recovered[id] = p.Timestamp
		}
	}
	return planned, recovered
}

// TestClockJumps gives the four-sink program an engine clock that jumps
// up to two hours backwards and forwards every few readings, under three
// triggers: available-now, a 200ms processing-time trigger and a 1s
// schedule, the last two killed with SIGKILL after a few seconds. Batch
// timestamps come from the clock, so the write-ahead log holds them out
// of order; nothing that reaches a sink may depend on them. A recovered
// batch keeps the timestamp its plan recorded, the schedule keeps firing,
// and every sink reconciles with the input.
func TestClockJumps(t *testing.T) {
	t.Parallel() // its own broker, checkpoint and outputs; see doc.go
	onceflow, prog := programs(t)
	broker := startBroker(t, onceflow, "payments:4,settlements:4")
	h := newHarness(t, onceflow, prog, broker, 81, sinkKafka, sinkLake, sinkPG, sinkLines)
	h.extra = []string{"-max-offsets-per-trigger", "40", "-retain", "100"}
	cl := h.client()
	table := newFaultTable(t, fmt.Sprintf("go test -race ./tests/chaos/ -run TestClockJumps -chaos.rounds=%d", *chaosRounds))
	cases := []struct {
		kind    string
		trigger string
		kill    bool // SIGKILL after a few batches (the trigger never ends the run)
	}{
		{"clock jumps ±2h, available-now", "available-now", false},
		{"clock jumps ±2h, every 200ms, SIGKILL", "200ms", true},
		{"clock jumps ±2h, schedule @every 1s, SIGKILL", "schedule:@every 1s", true},
	}
	for i, c := range cases {
		row := table.row(c.kind, h.sinks)
		for round := range *chaosRounds {
			h.produce(cl, 150+h.rng.IntN(100))
			spec := fmt.Sprintf("seed=%d every=%d max=2h", 10*i+round+1, 2+h.rng.IntN(3))
			run := runSpec{args: []string{"-trigger", c.trigger, "-clock-jumps", spec}}
			stop := func() {}
			if c.kill {
				// Kill once a few batches committed: a schedule that stops
				// firing under the jumps never gets there, and the
				// watchdog fails the test.
				stop = h.keepProducing(3, 100*time.Millisecond) // data for every tick
				wait, extra := 2+h.rng.IntN(3), time.Duration(h.rng.IntN(1000))*time.Millisecond
				run.during = func(ctx context.Context, pid int, stderr *syncBuffer) {
					if waitFor(ctx, stderr, "chaosprog: batch ", wait) {
						time.Sleep(extra)
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
			r := h.start(run)
			stop()
			jumps, batches := count(r.stderr, "chaosprog: clock jumps"), count(r.stderr, "chaosprog: batch ")
			row.runs++
			row.injected += jumps
			switch {
			case r.err != nil:
				t.Fatalf("%s (%s): the program failed: %v\n%s", c.kind, spec, r.err, lastError(r.stderr))
			case r.killed != c.kill:
				t.Fatalf("%s (%s): killed %v, want %v:\n%s", c.kind, spec, r.killed, c.kill, r.stderr)
			}
			if r.killed {
				row.stopped++
			} else {
				row.rode++
			}
			t.Logf("%s (%s): %d jumps, %d batches in %s", c.kind, spec, jumps, batches, r.took.Round(time.Millisecond))
			if !r.killed {
				continue
			}
			// The restart drains with the system clock.
			if r := h.start(runSpec{}); r.err != nil || r.killed {
				t.Fatalf("%s: the restart did not finish: %v\n%s", c.kind, r.err, r.stderr)
			}
		}
		row.settle(h)
	}
	planned, recovered := walTimestamps(t, h)
	back := 0
	for id, ts := range planned {
		if prev, ok := planned[id-1]; ok && ts < prev {
			back++
		}
	}
	if back == 0 {
		t.Errorf("no batch timestamp in %d retained plans is older than its predecessor's: the jumps did not reach the write-ahead log", len(planned))
	}
	for id, got := range recovered {
		if ts, ok := planned[id]; ok && fmtMillisUTC(ts) != got {
			t.Errorf("batch %d was recovered with timestamp %s, but its plan recorded %s", id, got, fmtMillisUTC(ts))
		}
	}
	t.Logf("%d plans, %d with a timestamp older than the batch before; %d recovered batches, each with its plan's timestamp", len(planned), back, len(recovered))
}

func fmtMillisUTC(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}
