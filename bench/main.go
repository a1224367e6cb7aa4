// Command bench runs the Nexmark queries and the settlement aggregation
// through the full onceflow engine (local checkpoint, write-ahead log, state
// and sink commits every batch) and, in the same run, computes each answer
// with DuckDB (and, for the aggregation, a plain Go map) over the same
// events. It reports throughput, per-core throughput, batch and state
// commit latencies and peak memory, and exits non-zero when a streamed
// answer differs from a reference. The kernel workload times the group-by
// kernel (internal/kernel GroupBy) alone against the same references on the same
// int64-keyed rows (kernel.go).
//
// It is its own module so that the engine's users never download DuckDB:
//
//	cd bench && go run . -events 10000000 -rows 10000000
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/source/nexmark"
	"github.com/onceflow/onceflow/statestore/pebblestore"
	"github.com/onceflow/onceflow/storage"
)

type config struct {
	events      int64
	eventRate   int64 // Nexmark events per second of event time
	rows        int64
	merchants   int64
	batchEvents int64
	batchRows   int64
	partitions  int
	reps        int
	denseIDs    bool
	duckThreads []int
	queries     []string
	dir         string
	cpuProfile  string
	isolate     bool
	preload     bool
	jsonOut     bool
	jsonFile    string
	child       bool
}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	c := &config{}
	fs.Int64Var(&c.events, "events", 10_000_000, "Nexmark events (all kinds; bids are 46 of every 50) for q0-q8")
	fs.Int64Var(&c.eventRate, "events-per-second", nexmark.DefaultEventsPerSecond, "Nexmark event rate in event time (spacing of date_time, auction lifetimes): fewer per second, more windows per event")
	fs.Int64Var(&c.rows, "rows", 10_000_000, "payment rows for the settlement aggregation")
	fs.Int64Var(&c.merchants, "merchants", 100_000, "distinct merchants (keys) of the aggregation")
	fs.Int64Var(&c.batchEvents, "batch-events", 500_000, "Nexmark events per engine batch (max per trigger)")
	fs.Int64Var(&c.batchRows, "batch-rows", 500_000, "payment rows per engine batch (max per trigger)")
	fs.IntVar(&c.partitions, "partitions", engine.DefaultStatePartitions, "state partitions of stateful queries")
	fs.IntVar(&c.reps, "reps", 1, "time the kernel and each reference query this many times and report the run of median CPU time (the engine runs once)")
	fs.BoolVar(&c.denseIDs, "dense-ids", false, "kernel and agg-int64: merchant ids 0..merchants-1 instead of ids scattered over the int64 range")
	threads := fs.String("duckdb-threads", "1,2", "DuckDB thread counts to run each reference with")
	queries := fs.String("queries", "q0,q1,q2,q3,q4,q5,q6,q7,q8,q7-max,agg,kernel,agg-int64,agg-int64-pebble", "workloads to run")
	fs.StringVar(&c.dir, "dir", "", "parent directory of the checkpoints (default: a temporary directory)")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of each engine (or kernel) run to PREFIX-<query>.pprof")
	fs.BoolVar(&c.isolate, "isolate", true, "run each workload in its own process, so peak memory is its own")
	fs.BoolVar(&c.preload, "preload", true, "engine reads the input from records generated beforehand (as the references do); false: the engine runs the generator")
	fs.BoolVar(&c.jsonOut, "json", false, "print the results as JSON instead of a table")
	fs.StringVar(&c.jsonFile, "json-file", "", "also write the results as JSON to this file")
	fs.BoolVar(&c.child, "child", false, "internal: run one workload and print its result as JSON")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	for _, t := range strings.Split(*threads, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(t))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-duckdb-threads: %q is not a positive number", t)
		}
		c.duckThreads = append(c.duckThreads, n)
	}
	known := map[string]bool{}
	for _, w := range workloads() {
		known[w.name] = true
	}
	for _, q := range strings.Split(*queries, ",") {
		q = strings.TrimSpace(q)
		if !known[q] {
			return nil, fmt.Errorf("-queries: unknown workload %q", q)
		}
		c.queries = append(c.queries, q)
	}
	if c.events < 1 || c.eventRate < 1 || c.rows < 1 || c.merchants < 1 || c.batchEvents < 1 || c.batchRows < 1 || c.reps < 1 {
		return nil, fmt.Errorf("-events, -events-per-second, -rows, -merchants, -batch-events, -batch-rows and -reps must be positive")
	}
	return c, nil
}

func main() {
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	var results []*result
	if c.isolate && !c.child && len(c.queries) > 1 {
		results, err = runChildren(ctx, c)
	} else {
		results, err = runAll(ctx, c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if c.jsonFile != "" && !c.child {
		b, err := json.MarshalIndent(results, "", "  ")
		if err == nil {
			err = os.WriteFile(c.jsonFile, append(b, '\n'), 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
	switch {
	case c.child || c.jsonOut:
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(results); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	default:
		printTable(os.Stdout, c, results)
	}
	for _, r := range results {
		if !r.Agree {
			fmt.Fprintf(os.Stderr, "bench: %s: the streamed answer differs from a reference\n", r.Workload)
			os.Exit(1)
		}
	}
}

// runChildren runs each workload in a child process of this binary.
func runChildren(ctx context.Context, c *config) ([]*result, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var out []*result
	for _, q := range c.queries {
		cmd := exec.CommandContext(ctx, exe, childArgs(os.Args[1:], q)...)
		cmd.Stderr = os.Stderr
		b, err := cmd.Output()
		var rs []*result
		if jerr := json.Unmarshal(b, &rs); jerr != nil {
			if err != nil {
				return out, fmt.Errorf("%s: %w", q, err)
			}
			return out, fmt.Errorf("%s: child output: %w", q, jerr)
		}
		out = append(out, rs...)
	}
	return out, nil
}

// childArgs is the parent's arguments with -queries replaced by q.
func childArgs(parent []string, q string) []string {
	out := []string{"-child", "-queries", q}
	for i := 0; i < len(parent); i++ {
		a := strings.TrimPrefix(parent[i], "-")
		a = strings.TrimPrefix(a, "-")
		switch {
		case a == "queries":
			i++ // and its value
		case strings.HasPrefix(a, "queries="):
		default:
			out = append(out, parent[i])
		}
	}
	return out
}

// runAll runs the selected workloads in this process.
func runAll(ctx context.Context, c *config) ([]*result, error) {
	r := &runner{cfg: c, ducks: map[input]*loadedDuck{}}
	defer r.close()
	var out []*result
	for _, w := range workloads() {
		if !contains(c.queries, w.name) {
			continue
		}
		res, err := r.run(ctx, w)
		if err != nil {
			return out, fmt.Errorf("%s: %w", w.name, err)
		}
		out = append(out, res)
	}
	return out, nil
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// result is one workload's figures.
type result struct {
	Workload  string      `json:"workload"`
	What      string      `json:"what"`
	Events    int64       `json:"events"`
	InputRows int64       `json:"inputRows"`
	Batches   int         `json:"batches"`
	Onceflow  engineStats `json:"onceflow"`
	// SourceOnly is the input generator alone (reading every record,
	// nothing else): the share of the engine's time that is data
	// generation, which the references do not pay.
	SourceOnly throughput `json:"sourceOnly"`
	References []refStats `json:"references"`
	// Preloaded is true when the engine read records generated beforehand
	// (PreloadedMB of Arrow buffers, part of the peak memory).
	Preloaded   bool    `json:"preloaded"`
	PreloadedMB float64 `json:"preloadedMB,omitempty"`
	Answer      string  `json:"answer"`
	Agree       bool    `json:"agree"`
}

type throughput struct {
	WallS          float64 `json:"wallS"`
	CPUS           float64 `json:"cpuS"`
	EventsPerS     float64 `json:"eventsPerS"`
	EventsPerCoreS float64 `json:"eventsPerCoreS"`
}

func newThroughput(events int64, wall, cpu time.Duration) throughput {
	t := throughput{WallS: wall.Seconds(), CPUS: cpu.Seconds()}
	if wall > 0 {
		t.EventsPerS = float64(events) / wall.Seconds()
	}
	if cpu > 0 {
		t.EventsPerCoreS = float64(events) / cpu.Seconds()
	}
	return t
}

type engineStats struct {
	throughput
	BatchP50Ms       int64   `json:"batchP50Ms"`
	BatchP99Ms       int64   `json:"batchP99Ms"`
	StateCommitP50Ms int64   `json:"stateCommitP50Ms"`
	StateCommitP99Ms int64   `json:"stateCommitP99Ms"`
	PeakRSSMB        float64 `json:"peakRssMB"`
	// NetEventsPerCoreS is the events over the engine's CPU time less
	// what the generator alone took: the engine's own cost per core.
	NetEventsPerCoreS float64 `json:"netEventsPerCoreS"`
}

type refStats struct {
	Name string `json:"name"`
	throughput
	// LoadS is the time to load the events into DuckDB (appender), not
	// counted in the throughput, which is the query alone.
	LoadS float64 `json:"loadS,omitempty"`
	// Ratio is onceflow's events/s over the reference's; RatioPerCore the
	// same per CPU-second.
	Ratio        float64 `json:"ratio"`
	RatioPerCore float64 `json:"ratioPerCore"`
	// RatioNetPerCore compares the engine's own cost (generation taken
	// out) with the reference, which reads data already in memory.
	RatioNetPerCore float64 `json:"ratioNetPerCore"`
	Agree           bool    `json:"agree"`
	Diff            string  `json:"diff,omitempty"`
}

type loadedDuck struct {
	d     *duck
	loadS float64
}

type runner struct {
	cfg   *config
	ducks map[input]*loadedDuck
}

func (r *runner) close() {
	for _, d := range r.ducks {
		d.d.close()
	}
}

func (r *runner) run(ctx context.Context, w workload) (*result, error) {
	c := r.cfg
	res := &result{Workload: w.name, What: w.what, Agree: true, Preloaded: c.preload}

	// The generator alone, once per side the engine reads.
	sp := start()
	var rows int64
	for range w.sides() {
		src, events, err := newSource(c, w.input)
		if err != nil {
			return nil, err
		}
		res.Events = events
		err = src.Read(ctx, mustJSON(src.InitialOffset(ctx)), endOffset(w.input, events), func(rec arrow.RecordBatch) error {
			rows += rec.NumRows()
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("source alone: %w", err)
		}
	}
	wall, cpu := sp.stop()
	res.SourceOnly = newThroughput(res.Events, wall, cpu)
	res.InputRows = rows
	runtime.GC()

	// The engine, or the kernel alone.
	var got answer
	var err error
	if w.kernel != nil {
		got, err = r.runKernel(ctx, w, res)
	} else {
		got, err = r.runEngine(ctx, w, res)
	}
	if err != nil {
		return nil, err
	}
	res.Answer = got.summary()

	// DuckDB, once per thread count.
	ld, err := r.duck(ctx, w.input)
	if err != nil {
		return nil, err
	}
	for _, th := range c.duckThreads {
		wall, cpu, err := medianRun(c.reps, func() (time.Duration, time.Duration, error) {
			return ld.d.timedQuery(ctx, th, w.sql(c))
		})
		if err != nil {
			return nil, err
		}
		scan, ans := w.scan(c)
		if err := ld.d.rows(ctx, scan); err != nil {
			return nil, err
		}
		res.addRef(fmt.Sprintf("duckdb-%dt", th), res.Events, wall, cpu, ld.loadS, got, ans())
	}

	// A plain Go loop.
	if w.goRef != nil {
		recs, err := loadRecords(ctx, c, w.input)
		if err != nil {
			return nil, err
		}
		ans, wall, cpu, err := timedCall(recs, w.goRef, c.reps, "")
		releaseAll(recs)
		if err != nil {
			return nil, fmt.Errorf("go map: %w", err)
		}
		res.addRef("go-map", res.Events, wall, cpu, 0, got, ans)
	}
	return res, nil
}

// loadRecords generates the whole input as records; the caller releases
// them (releaseAll).
func loadRecords(ctx context.Context, c *config, in input) ([]arrow.RecordBatch, error) {
	next, err := inputRecords(ctx, c, in)
	if err != nil {
		return nil, err
	}
	var recs []arrow.RecordBatch
	for rec := next(); rec != nil; rec = next() {
		recs = append(recs, rec)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("input %d: no records", in)
	}
	return recs, nil
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// timedCall runs fn over recs reps times and returns its answer and the
// wall and CPU time of the call of median CPU time. The whole is
// CPU-profiled to the file profile, if set. Every call must give the same
// answer.
func timedCall(recs []arrow.RecordBatch, fn refFunc, reps int, profile string) (answer, time.Duration, time.Duration, error) {
	stopProfile, err := startProfile(profile)
	if err != nil {
		return nil, 0, 0, err
	}
	defer stopProfile()
	var ans answer
	wall, cpu, err := medianRun(reps, func() (time.Duration, time.Duration, error) {
		runtime.GC()
		sp := start()
		finish, err := fn(recs)
		wall, cpu := sp.stop()
		if err != nil {
			return 0, 0, err
		}
		a := finish()
		if ans != nil {
			if d := a.diff(ans); d != "" {
				return 0, 0, fmt.Errorf("a repeated run's answer differs: %s", d)
			}
		}
		ans = a
		return wall, cpu, nil
	})
	if err != nil {
		return nil, 0, 0, err
	}
	return ans, wall, cpu, nil
}

// medianRun calls run reps times and returns the wall and CPU time of the
// call of median CPU time (the upper one of an even number): robust to the
// bursts of other jobs on a shared machine.
func medianRun(reps int, run func() (wall, cpu time.Duration, err error)) (time.Duration, time.Duration, error) {
	type timing struct{ wall, cpu time.Duration }
	ts := make([]timing, 0, reps)
	for range max(reps, 1) {
		wall, cpu, err := run()
		if err != nil {
			return 0, 0, err
		}
		ts = append(ts, timing{wall, cpu})
	}
	slices.SortFunc(ts, func(a, b timing) int { return cmp.Compare(a.cpu, b.cpu) })
	m := ts[len(ts)/2]
	return m.wall, m.cpu, nil
}

// startProfile starts a CPU profile to path ("" for none) and returns the
// function that ends it.
func startProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func (c *config) profilePath(workload string) string {
	if c.cpuProfile == "" {
		return ""
	}
	return c.cpuProfile + "-" + workload + ".pprof"
}

// runKernel times w.kernel over the preloaded input in place of an engine
// run: the onceflow figures of a kernel workload are the kernel's alone.
func (r *runner) runKernel(ctx context.Context, w workload, res *result) (answer, error) {
	c := r.cfg
	recs, err := loadRecords(ctx, c, w.input)
	if err != nil {
		return nil, err
	}
	var rows int64
	for _, rec := range recs {
		rows += rec.NumRows()
	}
	res.Batches = len(recs)
	res.Preloaded = true
	res.PreloadedMB = float64(recordBytes(recs)) / (1 << 20)
	defer releaseAll(recs)
	if rows != res.InputRows {
		return nil, fmt.Errorf("kernel input holds %d rows, the source %d", rows, res.InputRows)
	}
	got, wall, cpu, err := timedCall(recs, w.kernel, c.reps, c.profilePath(w.name))
	if err != nil {
		return nil, fmt.Errorf("kernel: %w", err)
	}
	res.Onceflow = engineStats{throughput: newThroughput(res.Events, wall, cpu), PeakRSSMB: peakRSSMB()}
	res.Onceflow.NetEventsPerCoreS = res.Onceflow.EventsPerCoreS
	return got, nil
}

func (res *result) addRef(name string, events int64, wall, cpu time.Duration, loadS float64, got, ref answer) {
	rs := refStats{Name: name, throughput: newThroughput(events, wall, cpu), LoadS: loadS}
	if rs.EventsPerS > 0 {
		rs.Ratio = res.Onceflow.EventsPerS / rs.EventsPerS
	}
	if rs.EventsPerCoreS > 0 {
		rs.RatioPerCore = res.Onceflow.EventsPerCoreS / rs.EventsPerCoreS
		rs.RatioNetPerCore = res.Onceflow.NetEventsPerCoreS / rs.EventsPerCoreS
	}
	rs.Diff = got.diff(ref)
	rs.Agree = rs.Diff == ""
	if !rs.Agree {
		res.Agree = false
	}
	res.References = append(res.References, rs)
}

func mustJSON(b json.RawMessage, err error) json.RawMessage {
	if err != nil {
		panic(err)
	}
	return b
}

func endOffset(in input, events int64) json.RawMessage {
	if in == payments || in == intPayments {
		return json.RawMessage(fmt.Sprintf(`{"rows":%d}`, events))
	}
	return json.RawMessage(fmt.Sprintf(`{"events":%d}`, events))
}

// runEngine runs w through the engine on a fresh local checkpoint with the
// AvailableNow trigger and returns the sink's answer.
func (r *runner) runEngine(ctx context.Context, w workload, res *result) (answer, error) {
	c := r.cfg
	dir, err := os.MkdirTemp(c.dir, "onceflow-bench-"+w.name+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	store, err := storage.OpenLocal(dir, storage.LocalOptions{})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	srcs := make([]engine.Source, w.sides())
	var events int64
	for i := range srcs {
		if srcs[i], events, err = newSource(c, w.input); err != nil {
			return nil, err
		}
	}
	if c.preload {
		recs, err := loadRecords(ctx, c, w.input)
		if err != nil {
			return nil, err
		}
		per := c.batchEvents
		if w.input == payments || w.input == intPayments {
			per = c.batchRows
		}
		chunk := inputChunkFor(c, w.input)
		res.PreloadedMB = float64(recordBytes(recs)) / (1 << 20)
		// Every side replays the same records; each memSource holds and
		// releases a reference of its own.
		for i := range srcs {
			if i > 0 {
				for _, r := range recs {
					r.Retain()
				}
			}
			ms := newMemSource(recs, int((per+chunk-1)/chunk))
			defer ms.release()
			srcs[i] = ms
		}
	}
	sink := w.sink(c)
	var batchMs, commitMs []int64
	var inRows int64
	var extra []engine.Option
	if w.pebble {
		b, err := pebblestore.NewBackend(pebblestore.BackendOptions{Dir: filepath.Join(dir, "pebble"), CacheSize: 64 << 20})
		if err != nil {
			return nil, err
		}
		defer b.Close()
		extra = append(extra, engine.WithStateStore(b))
	}
	var stream *engine.Stream
	if w.join != nil {
		stream = w.join(c, srcs[0], srcs[1])
	} else {
		stream = w.stream(srcs[0])
	}
	q, err := engine.NewQuery(stream, append([]engine.Option{
		engine.WithName("bench-" + w.name),
		engine.WithCheckpoint(store),
		engine.WithSink(sink),
		engine.WithTrigger(engine.AvailableNow()),
		engine.WithOutputMode(w.mode),
		engine.WithStatePartitions(c.partitions),
		engine.WithProgressListener(func(p engine.Progress) {
			batchMs = append(batchMs, p.BatchDurationMs)
			if v, ok := p.DurationMs[engine.PhaseStateCommit]; ok {
				commitMs = append(commitMs, v)
			}
			inRows += p.NumInputRows
		})}, extra...)...)
	if err != nil {
		return nil, err
	}
	stopProfile, err := startProfile(c.profilePath(w.name))
	if err != nil {
		return nil, err
	}
	runtime.GC()
	sp := start()
	err = q.Run(ctx)
	wall, cpu := sp.stop()
	stopProfile()
	if err != nil {
		return nil, fmt.Errorf("engine run: %w", err)
	}
	if inRows != res.InputRows {
		return nil, fmt.Errorf("engine read %d rows, the source holds %d", inRows, res.InputRows)
	}
	res.Batches = len(batchMs)
	res.Onceflow = engineStats{
		throughput:       newThroughput(events, wall, cpu),
		BatchP50Ms:       percentile(batchMs, 50),
		BatchP99Ms:       percentile(batchMs, 99),
		StateCommitP50Ms: percentile(commitMs, 50),
		StateCommitP99Ms: percentile(commitMs, 99),
		PeakRSSMB:        peakRSSMB(),
	}
	if c.preload {
		res.Onceflow.NetEventsPerCoreS = res.Onceflow.EventsPerCoreS
	} else if net := cpu.Seconds() - res.SourceOnly.CPUS; net > 0 {
		res.Onceflow.NetEventsPerCoreS = float64(events) / net
	}
	return sink.answer(), nil
}

// duck returns a DuckDB database holding the input, loading it the first
// time.
func (r *runner) duck(ctx context.Context, in input) (*loadedDuck, error) {
	if ld, ok := r.ducks[in]; ok {
		return ld, nil
	}
	d, err := openDuck(ctx)
	if err != nil {
		return nil, err
	}
	next, err := inputRecords(ctx, r.cfg, in)
	if err != nil {
		d.close()
		return nil, err
	}
	sp := start()
	switch in {
	case payments:
		err = d.load(ctx, r.cfg.dir, "payments", next, []int{3, 4}) // key, amount_cents
	case intPayments:
		err = d.load(ctx, r.cfg.dir, "int_payments", next, []int{0, 1}) // k, amount_cents
	case nexmarkEvents:
		all := make([]int, len(nexmark.EventSchema().Fields()))
		for i := range all {
			all[i] = i
		}
		err = d.load(ctx, r.cfg.dir, "events", next, all)
	default:
		err = d.load(ctx, r.cfg.dir, "bids", next, []int{0, 1, 2, 3, 4, 5, 6})
	}
	wall, _ := sp.stop()
	if err != nil {
		d.close()
		return nil, err
	}
	ld := &loadedDuck{d: d, loadS: wall.Seconds()}
	r.ducks[in] = ld
	return ld, nil
}

func printTable(w io.Writer, c *config, results []*result) {
	fmt.Fprintf(w, "onceflow bench — %s, GOMAXPROCS %d, %d Nexmark events, %d payment rows over %d merchants, %d events/batch, %d rows/batch, preload %v\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.GOMAXPROCS(0), c.events, c.rows, c.merchants, c.batchEvents, c.batchRows, c.preload)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "query\tbatches\tev/s\tev/s/core\tnet ev/s/core\tbatch p50/p99 ms\tcommit p50/p99 ms\tpeak MB\tsource-only ev/s/core\treference\tref ev/s\tref ev/s/core\tratio\tratio/core\tnet ratio/core\tload s\tagree\t")
	for _, r := range results {
		o := r.Onceflow
		for i, ref := range r.References {
			lead := fmt.Sprintf("%s\t%d\t%s\t%s\t%s\t%d/%d\t%d/%d\t%.0f\t%s", r.Workload, r.Batches, human(o.EventsPerS), human(o.EventsPerCoreS), human(o.NetEventsPerCoreS),
				o.BatchP50Ms, o.BatchP99Ms, o.StateCommitP50Ms, o.StateCommitP99Ms, o.PeakRSSMB, human(r.SourceOnly.EventsPerCoreS))
			if i > 0 {
				lead = "\t\t\t\t\t\t\t\t"
			}
			agree := "yes"
			if !ref.Agree {
				agree = "NO: " + ref.Diff
			}
			load := "-"
			if ref.LoadS > 0 {
				load = fmt.Sprintf("%.1f", ref.LoadS)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f\t%.2f\t%.2f\t%s\t%s\t\n", lead, ref.Name, human(ref.EventsPerS), human(ref.EventsPerCoreS), ref.Ratio, ref.RatioPerCore, ref.RatioNetPerCore, load, agree)
		}
	}
	tw.Flush()
	for _, r := range results {
		fmt.Fprintf(w, "%s: %s — %s", r.Workload, r.What, r.Answer)
		if r.Preloaded {
			fmt.Fprintf(w, " (input preloaded: %.0f MB of Arrow buffers)", r.PreloadedMB)
		}
		fmt.Fprintln(w)
	}
}

func human(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
