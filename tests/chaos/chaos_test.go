package chaos

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/onceflow/onceflow/audit"
	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/internal/fault/faulttest"
)

var (
	chaosKills = flag.Int("chaos.kills", 30, "SIGKILLs in TestChaos")
	chaosSeed  = flag.Uint64("chaos.seed", 1, "seed of TestChaos's choices")
)

const pointRandom = "random"

// faultPoints are the named points of every link the program runs.
func faultPoints(sinks []sinkKind) []string {
	ps := fault.EnginePoints()
	for _, s := range sinks {
		switch s {
		case sinkKafka:
			ps = append(ps, fault.KafkaSinkAfterProduce, fault.KafkaSinkAfterCommit)
		case sinkLake:
			ps = append(ps, fault.FileSinkBetweenFiles, fault.FileSinkBeforeLog, fault.FileSinkAfterLog, fault.FileSinkCompaction)
		case sinkPG:
			ps = append(ps, fault.PGBeforeBegin, fault.PGAfterRows, fault.PGAfterCommit)
		case sinkLines:
			ps = append(ps, fault.LinesMidRows, fault.LinesAfterMarker)
		}
	}
	return append(ps, pointRandom)
}

type pointStats struct{ tried, killed int }

// TestChaos kills the four-sink settlement program at every fault point
// in turn and at random moments, with payments arriving throughout and
// the program sometimes kept down, and then reconciles every sink.
func TestChaos(t *testing.T) {
	faulttest.Require(t)
	start := time.Now()
	onceflow, prog := programs(t)
	broker := startBroker(t, onceflow, "payments:4,settlements:4")
	h := newHarness(t, onceflow, prog, broker, *chaosSeed, sinkKafka, sinkLake, sinkPG, sinkLines)
	h.extra = []string{"-max-offsets-per-trigger", "60"}
	ctx := context.Background()
	cl := h.client()
	points := faultPoints(h.sinks)
	stats := map[string]*pointStats{}
	for _, p := range points {
		stats[p] = &pointStats{}
	}
	stopProducing := h.keepProducing(5, 100*time.Millisecond)
	kills, runs, pendingMatches := 0, 0, 0
	for kills < *chaosKills {
		p := points[runs%len(points)]
		if runs >= 2*len(points) {
			p = points[h.rng.IntN(len(points))]
		}
		runs++
		h.produce(cl, 60+h.rng.IntN(120))
		spec, after := "", time.Duration(0)
		if p == pointRandom {
			after = time.Duration(100+h.rng.IntN(900)) * time.Millisecond
		} else {
			spec = fmt.Sprintf("%s@%d", p, 1+h.rng.IntN(3))
		}
		stats[p].tried++
		killed, stderr := h.run(spec, after)
		if !killed {
			continue
		}
		if spec != "" && !strings.Contains(stderr, "onceflow-fault: "+p) {
			t.Fatalf("killed without reaching %s:\n%s", p, stderr)
		}
		stats[p].killed++
		kills++
		if p == fault.EngineAfterSink && (kills < 100 || kills%50 == 0) {
			// Every sink holds batch C+1 and commits/C+1 is not written:
			// each output must match the pending batch.
			for _, s := range h.sinks {
				rep := h.audit(ctx, s)
				if !rep.OK() || rep.MatchedBatch != rep.LastCommitted+1 {
					t.Fatalf("after %s: %s sink: matched %d (last committed %d, %d differences): %+v", p, s, rep.MatchedBatch, rep.LastCommitted, rep.Differences(), rep.Suspects)
				}
			}
			pendingMatches++
		}
		if h.rng.IntN(5) == 0 {
			time.Sleep(time.Duration(100+h.rng.IntN(700)) * time.Millisecond) // down a while; payments keep coming
		}
	}
	stopProducing()
	// The final run drains what arrived while the program was down.
	if killed, stderr := h.runFor("", 0, 20*time.Minute); killed {
		t.Fatalf("final run killed:\n%s", stderr)
	}

	reports := map[sinkKind]*audit.Report{}
	for _, s := range h.sinks {
		rep := h.audit(ctx, s)
		reports[s] = rep
		if !rep.OK() || rep.MatchedBatch != rep.LastCommitted || rep.InputRows != int64(h.sentCount()) {
			t.Errorf("%s sink: matched batch %d of %d, %d input rows of %d sent, %d differences, suspects %+v",
				s, rep.MatchedBatch, rep.LastCommitted, rep.InputRows, h.sentCount(), rep.Differences(), rep.Suspects)
		}
	}
	for _, s := range h.sinks {
		code, out := h.auditCLI(s)
		if code != 0 {
			t.Errorf("onceflow audit of the %s sink exited %d:\n%s", s, code, out)
		}
		if strings.Contains(out, "onceflow-test") {
			t.Errorf("onceflow audit printed the database password")
		}
	}
	printTable(t, stats, points, reports, h, runs, kills, pendingMatches, time.Since(start))
	for _, p := range []string{fault.EngineAfterWAL, fault.EngineAfterSink, fault.EngineAfterState} {
		if stats[p].tried > 0 && stats[p].killed == 0 {
			t.Errorf("fault point %s never killed the program", p)
		}
	}
}

func printTable(t *testing.T, stats map[string]*pointStats, points []string, reports map[sinkKind]*audit.Report, h *harness, runs, kills, pending int, took time.Duration) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "fault point\ttried\tkilled\t")
	sorted := append([]string(nil), points...)
	sort.Strings(sorted)
	for _, p := range sorted {
		fmt.Fprintf(tw, "%s\t%d\t%d\t\n", p, stats[p].tried, stats[p].killed)
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t\n", runs, kills)
	tw.Flush()
	fmt.Fprintln(&b)
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "sink\tbatches\tinput records\toutput rows\tkeys\tdifferences\t")
	for _, s := range h.sinks {
		r := reports[s]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t\n", s, r.LastCommitted+1, r.InputRows, r.OutputRows, r.Matching, r.Differences())
	}
	tw.Flush()
	fmt.Fprintf(&b, "\n%d payments sent; %d audits right after %s matched the pending batch; %s\n", h.sentCount(), pending, fault.EngineAfterSink, took.Round(time.Second))
	t.Log("\n" + b.String())
	if f := os.Getenv("CHAOS_TABLE"); f != "" {
		_ = os.WriteFile(f, []byte(b.String()), 0o644)
	}
}
