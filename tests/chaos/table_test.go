package chaos

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

// chaosRounds repeats every fault kind of the fault tests.
var chaosRounds = flag.Int("chaos.rounds", 1, "fault tests (TestStorageFaults, TestS3Faults, TestPGRestart, TestPGLostCommit, TestKafkaFaults, TestClockJumps): rounds of each fault kind")

var chaosTable = flag.String("chaos.table", "", "append each fault test's table to this file: markdown rows of fault kind, runs, faults, rode through, stopped, and the differences of the kafka, lake, postgres and foreachBatch sinks")

// faultRow is one fault kind's line per sink in the fault table: how many
// runs had the fault armed, how many faults were injected, how those runs
// ended, and what the audit of each sink found after the fault cleared and
// a restart finished.
type faultRow struct {
	kind     string
	runs     int
	injected int
	rode     int // runs that finished despite the fault
	stopped  int // runs that stopped with an error naming the fault
	sinks    []sinkKind
	diffs    map[sinkKind]int
}

// faultTable collects a test's rows and prints them when the test ends.
type faultTable struct {
	t       *testing.T
	command string
	rows    []*faultRow
}

func newFaultTable(t *testing.T, command string) *faultTable {
	ft := &faultTable{t: t, command: command}
	t.Cleanup(ft.print)
	return ft
}

func (ft *faultTable) row(kind string, sinks []sinkKind) *faultRow {
	r := &faultRow{kind: kind, sinks: sinks, diffs: map[sinkKind]int{}}
	ft.rows = append(ft.rows, r)
	return r
}

// settle audits every sink of h after the fault of r cleared: each must
// match the committed batches (or the pending one) with no difference.
func (r *faultRow) settle(h *harness) {
	h.t.Helper()
	began := time.Now()
	defer func() {
		h.t.Logf("%s: audit of %d sinks took %s", r.kind, len(h.sinks), time.Since(began).Round(time.Millisecond))
	}()
	reps := h.auditAll(context.Background())
	for _, s := range h.sinks {
		rep := reps[s]
		r.diffs[s] += rep.Differences()
		if !rep.OK() || rep.InputRows != int64(h.sentCount()) {
			h.t.Errorf("%s: %s sink after the fault cleared: matched batch %d of %d, %d of %d payments, %d differences, suspects %+v",
				r.kind, s, rep.MatchedBatch, rep.LastCommitted, rep.InputRows, h.sentCount(), rep.Differences(), rep.Suspects)
		}
	}
	if r.injected == 0 {
		h.t.Errorf("%s: no fault was injected in %d runs", r.kind, r.runs)
	}
}

func (ft *faultTable) print() {
	if len(ft.rows) == 0 {
		return
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "fault kind\tsink\truns\tfaults injected\trode through\tstopped, then restarted\tdifferences\t")
	for _, r := range ft.rows {
		for _, s := range r.sinks {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t\n", r.kind, s, r.runs, r.injected, r.rode, r.stopped, r.diffs[s])
		}
	}
	tw.Flush()
	ft.t.Logf("%s\n%s", ft.command, b.String())
	if *chaosTable == "" {
		return
	}
	// One markdown row per fault kind: every run has all the sinks, so
	// runs and faults are the same for each; the differences are per sink
	// (kafka, lake, postgres, foreachBatch; "-" when a sink sat out).
	var md strings.Builder
	for _, r := range ft.rows {
		fmt.Fprintf(&md, "| %s | %d | %d | %d | %d |", r.kind, r.runs, r.injected, r.rode, r.stopped)
		for _, s := range []sinkKind{sinkKafka, sinkLake, sinkPG, sinkLines} {
			if slices.Contains(r.sinks, s) {
				fmt.Fprintf(&md, " %d |", r.diffs[s])
			} else {
				md.WriteString(" - |")
			}
		}
		md.WriteString("\n")
	}
	f, err := os.OpenFile(*chaosTable, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		ft.t.Errorf("chaos.table: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "<!-- %s: %s -->\n%s", ft.t.Name(), ft.command, md.String())
}

// injectedLine is chaosprog's report of one storage fault.
var injectedLine = regexp.MustCompile(`^chaosprog: (checkpoint|lake): faultstore: injected `)

// countInjected returns how many storage faults chaosprog reported.
func countInjected(stderr string) int {
	n := 0
	for _, l := range strings.Split(stderr, "\n") {
		if injectedLine.MatchString(l) {
			n++
		}
	}
	return n
}

// count returns how many lines of stderr contain marker.
func count(stderr, marker string) int {
	n := 0
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, marker) {
			n++
		}
	}
	return n
}

// lastError returns the program's final error line ("chaosprog: ..."
// printed by main), or the tail of stderr when there is none.
func lastError(stderr string) string {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		if strings.HasPrefix(l, "chaosprog: ") && !strings.HasPrefix(l, "chaosprog: batch ") &&
			!injectedLine.MatchString(l) && !strings.HasPrefix(l, "chaosprog: clock ") {
			return l
		}
	}
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, "\n")
}
