package chaos

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	chaosSoak      = flag.Duration("chaos.soak", 0, "TestSoak: how long to soak (0 skips it; the lead's run is 30m)")
	soakRate       = flag.Int("chaos.soak-rate", 10000, "TestSoak: payments per second")
	soakKillEvery  = flag.Duration("chaos.soak-kill-every", 20*time.Second, "TestSoak: mean time between SIGKILLs (each drawn from ±25%)")
	soakReportFile = flag.String("chaos.soak-report", "", "TestSoak: also write the report (markdown) to this file")
)

// soakSample is one reading during the soak, at a time since its start.
type soakSample struct {
	at    time.Duration
	value float64
}

// soakRecorder keeps the soak's readings; safe for concurrent use.
type soakRecorder struct {
	mu      sync.Mutex
	rss     []soakSample // program RSS, MiB, every second
	broker  []soakSample // broker RSS, MiB
	cpBytes []soakSample // checkpoint size, KiB
	batches []soakSample // batch durations, ms, at commit
	rows    []soakSample // payments per batch, at commit
}

func (r *soakRecorder) add(dst *[]soakSample, at time.Duration, v float64) {
	r.mu.Lock()
	*dst = append(*dst, soakSample{at, v})
	r.mu.Unlock()
}

// window returns the values of samples in [from, to).
func window(samples []soakSample, from, to time.Duration) []float64 {
	var out []float64
	for _, s := range samples {
		if s.at >= from && s.at < to {
			out = append(out, s.value)
		}
	}
	return out
}

func quantile(vs []float64, q float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func sum(vs []float64) float64 {
	t := 0.0
	for _, v := range vs {
		t += v
	}
	return t
}

// rssMiB reads a process's resident set size.
func rssMiB(pid int) (float64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024, err == nil
		}
	}
	return 0, false
}

// dirKiB returns the bytes of the files below dir, in KiB.
func dirKiB(dir string) float64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if in, err := d.Info(); err == nil {
				n += in.Size()
			}
		}
		return nil
	})
	return float64(n) / (1 << 10)
}

var batchLine = regexp.MustCompile(`^chaosprog: batch (\d+): (\d+) payments in (\d+)ms`)

// TestSoak runs the four-sink program for -chaos.soak with payments
// arriving at -chaos.soak-rate per second and a SIGKILL about every
// -chaos.soak-kill-every, restarting it at once each time. It samples the
// program's RSS every second, the checkpoint's size every five seconds
// and every batch's duration, and compares the first window (5 minutes,
// or a third of a shorter soak) with the last. At the end the input
// stops, a last run drains it, and every sink must reconcile.
//
//	go test ./tests/chaos/ -run TestSoak -chaos.soak=30m -timeout 60m -v
//
// (without -race: the producer alone needs most of a core at 10k/s).
func TestSoak(t *testing.T) {
	if *chaosSoak <= 0 {
		t.Skip("TestSoak runs with -chaos.soak=DURATION, e.g. go test ./tests/chaos/ -run TestSoak -chaos.soak=30m -timeout 60m -v")
	}
	total := *chaosSoak
	win := min(5*time.Minute, total/3)
	onceflow, prog := programs(t)
	brokerCmd, broker := startBrokerCmd(t, onceflow, "payments:4,settlements:4")
	h := newHarness(t, onceflow, prog, broker, 91, sinkKafka, sinkLake, sinkPG, sinkLines)
	h.extra = []string{"-trigger", "1s", "-max-offsets-per-trigger", strconv.Itoa(4 * *soakRate)}
	rec := &soakRecorder{}
	began := time.Now()
	since := func() time.Duration { return time.Since(began) }

	// The producer: every 50ms the payments due by then.
	cl := h.client()
	stopProducing := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		sent := 0
		for {
			select {
			case <-stopProducing:
				return
			case <-tk.C:
			}
			due := int(since().Seconds()*float64(*soakRate)) - sent
			if due > 0 {
				h.produce(cl, due)
				sent += due
			}
		}
	})
	// The samplers of what outlives a kill.
	wg.Go(func() {
		tk := time.NewTicker(5 * time.Second)
		defer tk.Stop()
		for {
			select {
			case <-stopProducing:
				return
			case <-tk.C:
			}
			rec.add(&rec.cpBytes, since(), dirKiB(h.checkpoint()))
			if v, ok := rssMiB(brokerCmd.Process.Pid); ok {
				rec.add(&rec.broker, since(), v)
			}
		}
	})

	kills, runs := 0, 0
	for since() < total {
		left := total - since()
		after := min(left, time.Duration(float64(*soakKillEvery)*(0.75+0.5*h.rng.Float64())))
		spec := runSpec{limit: left + 2*time.Minute}
		spec.during = func(ctx context.Context, pid int, stderr *syncBuffer) {
			deadline := time.Now().Add(after)
			seen := 0
			tk := time.NewTicker(time.Second)
			defer tk.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tk.C:
				}
				if v, ok := rssMiB(pid); ok {
					rec.add(&rec.rss, since(), v)
				}
				lines := strings.Split(stderr.String(), "\n")
				for _, l := range lines[seen:max(seen, len(lines)-1)] {
					if m := batchLine.FindStringSubmatch(l); m != nil {
						n, _ := strconv.ParseFloat(m[2], 64)
						ms, _ := strconv.ParseFloat(m[3], 64)
						rec.add(&rec.batches, since(), ms)
						rec.add(&rec.rows, since(), n)
					}
				}
				seen = max(seen, len(lines)-1)
				if time.Now().After(deadline) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					return
				}
			}
		}
		r := h.start(spec)
		runs++
		switch {
		case r.killed:
			kills++
		case r.err != nil:
			t.Fatalf("run %d failed: %v\n%s", runs, r.err, lastError(r.stderr))
		}
	}
	close(stopProducing)
	wg.Wait()
	// The last run drains what is left.
	drain := h.start(runSpec{args: []string{"-trigger", "available-now"}, limit: 30 * time.Minute})
	if drain.err != nil || drain.killed {
		t.Fatalf("the draining run did not finish: %v\n%s", drain.err, lastError(drain.stderr))
	}
	auditStart := time.Now()
	reps := h.auditAll(context.Background())
	auditTook := time.Since(auditStart)
	diffs := map[sinkKind]int{}
	for _, s := range h.sinks {
		rep := reps[s]
		diffs[s] = rep.Differences()
		if !rep.OK() || rep.InputRows != int64(h.sentCount()) {
			t.Errorf("%s sink after the soak: %d of %d payments, %d differences, suspects %+v", s, rep.InputRows, h.sentCount(), rep.Differences(), rep.Suspects)
		}
	}

	// The report: first window against last.
	first, last := [2]time.Duration{0, win}, [2]time.Duration{total - win, total}
	type metric struct {
		name        string
		first, last float64
	}
	rec.mu.Lock()
	m := []metric{
		{"program RSS, MiB (median)", quantile(window(rec.rss, first[0], first[1]), 0.5), quantile(window(rec.rss, last[0], last[1]), 0.5)},
		{"program RSS, MiB (max)", quantile(window(rec.rss, first[0], first[1]), 1), quantile(window(rec.rss, last[0], last[1]), 1)},
		{"checkpoint size, KiB (max)", quantile(window(rec.cpBytes, first[0], first[1]), 1), quantile(window(rec.cpBytes, last[0], last[1]), 1)},
		{"batch duration p50, ms", quantile(window(rec.batches, first[0], first[1]), 0.5), quantile(window(rec.batches, last[0], last[1]), 0.5)},
		{"batch duration p99, ms", quantile(window(rec.batches, first[0], first[1]), 0.99), quantile(window(rec.batches, last[0], last[1]), 0.99)},
		{"batches", float64(len(window(rec.batches, first[0], first[1]))), float64(len(window(rec.batches, last[0], last[1])))},
		{"payments committed per second", sum(window(rec.rows, first[0], first[1])) / win.Seconds(), sum(window(rec.rows, last[0], last[1])) / win.Seconds()},
		{"broker RSS, MiB (max)", quantile(window(rec.broker, first[0], first[1]), 1), quantile(window(rec.broker, last[0], last[1]), 1)},
	}
	rec.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "soak: %s at %d payments/s, %d runs, %d SIGKILLs (about every %s), %d payments; the last run drained in %s, the four audits took %s\n",
		total, *soakRate, runs, kills, *soakKillEvery, h.sentCount(), drain.took.Round(100*time.Millisecond), auditTook.Round(100*time.Millisecond))
	fmt.Fprintf(&b, "command: go test ./tests/chaos/ -run TestSoak -chaos.soak=%s -chaos.soak-rate=%d -chaos.soak-kill-every=%s -v\n\n", total, *soakRate, *soakKillEvery)
	fmt.Fprintf(&b, "| measure | first %s | last %s |\n|---|---:|---:|\n", win, win)
	for _, x := range m {
		fmt.Fprintf(&b, "| %s | %.1f | %.1f |\n", x.name, x.first, x.last)
	}
	fmt.Fprintf(&b, "\n| sink | differences |\n|---|---:|\n")
	for _, s := range h.sinks {
		fmt.Fprintf(&b, "| %s | %d |\n", s, diffs[s])
	}
	t.Log("\n" + b.String())
	if *soakReportFile != "" {
		if err := os.WriteFile(*soakReportFile, []byte(b.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
	// Flat means no leak: what is retained is bounded, so the last window
	// holds no more than twice the first (plus a little slack).
	if m[0].last > 2*m[0].first+64 {
		t.Errorf("program RSS grew from %.0f MiB to %.0f MiB (median) between the first and the last %s", m[0].first, m[0].last, win)
	}
	if m[2].last > 2*m[2].first+256 {
		t.Errorf("checkpoint grew from %.0f KiB to %.0f KiB between the first and the last %s", m[2].first, m[2].last, win)
	}
}
