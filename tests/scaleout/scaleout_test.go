package scaleout

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/audit"
	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/foreachbatch/postgres"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/storage"
	"github.com/onceflow/onceflow/storage/s3store"
)

var (
	seedFlag  = flag.Uint64("scaleout.seed", 0, "random seed of the kills (0: from the clock, logged)")
	killsFlag = flag.Int("scaleout.kills", 2, "SIGKILLs of random workers (each followed by a replacement joining)")
)

const (
	partitions = 12
	merchants  = 48
	customers  = 30
)

// customerPartition is the repartition topic's partition of customer c-n
// (workerprog's stage 1 writes n mod the partition count), and so which
// stage-2 task owns its key.
func customerPartition(key string) int32 {
	n, _ := strconv.Atoi(strings.TrimPrefix(key, "c-"))
	return int32(n % partitions)
}

// merchantPartition is where merchant m's payments go, and so which task
// owns its settlement key.
func merchantPartition(key string) int32 {
	n, _ := strconv.Atoi(strings.TrimPrefix(key, "m-"))
	return int32(n % partitions)
}

// bins are the programs, built once.
var bins struct {
	once           sync.Once
	err            error
	dir            string
	broker, worker string
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if bins.dir != "" {
		_ = os.RemoveAll(bins.dir)
	}
	os.Exit(code)
}

func programs(t *testing.T) (broker, worker string) {
	t.Helper()
	bins.once.Do(func() {
		if bins.dir, bins.err = os.MkdirTemp("", "onceflow-scaleout-"); bins.err != nil {
			return
		}
		build := func(pkg string) string {
			bin := filepath.Join(bins.dir, filepath.Base(pkg))
			args := []string{"build", "-o", bin}
			if raceEnabled {
				args = append(args, "-race")
			}
			cmd := exec.Command("go", append(args, pkg)...)
			cmd.Stderr = os.Stderr
			if err := cmd.Run(); err != nil && bins.err == nil {
				bins.err = fmt.Errorf("build %s: %w", pkg, err)
			}
			return bin
		}
		bins.broker = build("github.com/onceflow/onceflow/tests/scaleout/brokerprog")
		bins.worker = build("github.com/onceflow/onceflow/tests/scaleout/workerprog")
	})
	if bins.err != nil {
		t.Fatal(bins.err)
	}
	return bins.broker, bins.worker
}

// cluster is the test's view of the group: the worker processes and what
// their lines say.
type cluster struct {
	t      *testing.T
	prog   string
	prefix string // of worker names
	stage  string // workerprog's -stage
	args   []string
	env    []string
	began  time.Time
	nextID int

	mu      sync.Mutex
	procs   map[string]*proc
	owns    map[string]map[int32]bool // alive worker → tasks it runs
	commits []commit
	lastEnd [partitions]int64
	spans   map[int32][]span // task → run spans, by worker
}

type proc struct {
	name   string
	cmd    *exec.Cmd
	done   chan struct{}
	err    error
	mu     sync.Mutex
	output strings.Builder
	alive  bool
	exited int64 // Unix ms when the test saw it exit after kill
}

type commit struct {
	ms     int64
	worker string
	task   int32
	batch  int64
	run    string
}

// span is one worker's run of a task: from its start to its stop, or to
// the worker's death (end 0 while it runs).
type span struct {
	worker     string
	start, end int64
}

func (c *cluster) start() string {
	c.t.Helper()
	c.nextID++
	name := fmt.Sprintf("%s%d", c.prefix, c.nextID)
	cmd := exec.Command(c.prog, append([]string{"-name", name}, c.args...)...)
	cmd.Env = append(os.Environ(), c.env...)
	out, err := cmd.StderrPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), alive: true}
	c.mu.Lock()
	c.procs[name] = p
	c.owns[name] = map[int32]bool{}
	c.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.output.WriteString(line + "\n")
			p.mu.Unlock()
			c.parse(name, line)
		}
		_, _ = io.Copy(io.Discard, out)
		p.err = cmd.Wait()
		close(p.done)
	}()
	c.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return name
}

func fields(line string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}

func (c *cluster) parse(worker, line string) {
	kind, _, _ := strings.Cut(line, " ")
	if kind != "scaleout-event" && kind != "scaleout-batch" {
		return
	}
	f := fields(line)
	ms, _ := strconv.ParseInt(f["ms"], 10, 64)
	task64, _ := strconv.ParseInt(f["task"], 10, 32)
	task := int32(task64)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch kind {
	case "scaleout-batch":
		b, _ := strconv.ParseInt(f["batch"], 10, 64)
		end, _ := strconv.ParseInt(f["end"], 10, 64)
		c.commits = append(c.commits, commit{ms: ms, worker: worker, task: task, batch: b, run: f["run"]})
		c.lastEnd[task] = max(c.lastEnd[task], end)
	case "scaleout-event":
		switch f["kind"] {
		case "started":
			if c.owns[worker] != nil {
				c.owns[worker][task] = true
			}
			c.spans[task] = append(c.spans[task], span{worker: worker, start: ms})
		case "stopped":
			delete(c.owns[worker], task)
			c.endSpan(task, worker, ms)
		}
	}
}

// endSpan closes worker's open span of task at ms. Under c.mu.
func (c *cluster) endSpan(task int32, worker string, ms int64) {
	for i := range c.spans[task] {
		if s := &c.spans[task][i]; s.worker == worker && s.end == 0 {
			s.end = ms
		}
	}
}

// kill sends sig to worker; SIGKILL ends its spans at once, SIGTERM waits
// for its exit.
func (c *cluster) kill(name string, sig syscall.Signal) int64 {
	c.mu.Lock()
	p := c.procs[name]
	c.mu.Unlock()
	now := time.Now().UnixMilli()
	if err := p.cmd.Process.Signal(sig); err != nil {
		c.t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		c.t.Fatalf("%s did not exit within 60s of %s", name, sig)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p.exited = time.Now().UnixMilli()
	p.alive = false
	for task := range c.spans {
		c.endSpan(task, name, time.Now().UnixMilli())
	}
	delete(c.owns, name)
	if sig == syscall.SIGTERM && p.err != nil {
		c.t.Errorf("%s exited with %v after SIGTERM:\n%s", name, p.err, p.tail())
	}
	return now
}

func (p *proc) tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.output.String()
	if len(s) > 4000 {
		s = s[len(s)-4000:]
	}
	return s
}

// alive lists the workers running, by name.
func (c *cluster) alive() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ns []string
	for n := range c.owns {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

// balanced reports whether the alive workers run all tasks, as evenly as
// they can.
func (c *cluster) balanced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	total, lo, hi := 0, partitions, 0
	for _, ts := range c.owns {
		total += len(ts)
		lo, hi = min(lo, len(ts)), max(hi, len(ts))
	}
	return len(c.owns) > 0 && total == partitions && hi-lo <= 1
}

// resumedAfter reports when every task in tasks has committed a batch
// after ms, or 0.
func (c *cluster) resumedAfter(ms int64, tasks []int32) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var last int64
	for _, task := range tasks {
		first := int64(0)
		for _, cm := range c.commits {
			if cm.task == task && cm.ms > ms {
				first = cm.ms
				break
			}
		}
		if first == 0 {
			return 0
		}
		last = max(last, first)
	}
	return last
}

func (c *cluster) tasksOf(name string) []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ts []int32
	for task := range c.owns[name] {
		ts = append(ts, task)
	}
	return ts
}

func (c *cluster) waitFor(what string, limit time.Duration, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			c.mu.Lock()
			owns := fmt.Sprint(c.owns)
			var tails []string
			for _, p := range c.procs {
				if p.alive {
					tails = append(tails, p.name+":\n"+p.tail())
				}
			}
			c.mu.Unlock()
			c.t.Fatalf("timed out after %s waiting for %s; ownership %s\n%s", limit, what, owns, strings.Join(tails, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// producer writes payments until stopped, counting them per partition.
type producer struct {
	cl   *kgo.Client
	mu   sync.Mutex
	sent [partitions]int64
	n    int
	// byCustomer is the sum of amount_cents per customer produced.
	byCustomer map[string]int64
}

func (p *producer) burst(ctx context.Context, rng *rand.Rand, n int) error {
	recs := make([]*kgo.Record, 0, n)
	type sale struct {
		customer string
		amount   int64
	}
	sales := make([]sale, 0, n)
	p.mu.Lock()
	for range n {
		m := rng.IntN(merchants)
		key := fmt.Sprintf("m-%02d", m)
		cust := fmt.Sprintf("c-%02d", rng.IntN(customers))
		amount := 1 + rng.IntN(10000)
		v, _ := json.Marshal(map[string]any{"payment_id": fmt.Sprint("p-", p.n), "merchant_id": key, "customer_id": cust, "amount_cents": amount})
		p.n++
		recs = append(recs, &kgo.Record{Topic: "payments", Partition: merchantPartition(key), Key: []byte(key), Value: v})
		sales = append(sales, sale{cust, int64(amount)})
	}
	p.mu.Unlock()
	if err := p.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return err
	}
	p.mu.Lock()
	for i, r := range recs {
		p.sent[r.Partition]++
		p.byCustomer[sales[i].customer] += sales[i].amount
	}
	p.mu.Unlock()
	return nil
}

// TestScaleOutKillsJoinsAndLeaves is the multi-process test of issue #20:
// three workers of the settlement query on a 12-partition payments topic
// (kfake in its own process), checkpoints on S3 (versitygw), the Kafka and
// PostgreSQL sinks. Workers are SIGKILLed at random and replaced, a fourth
// joins, one leaves with SIGTERM; then every task is audited (0
// differences on both outputs), each batch of each task was committed
// once, by the run that planned it, and no task ran on two workers at
// once. The rebalance times are logged (README "Scale-out").
func TestScaleOutKillsJoinsAndLeaves(t *testing.T) {
	loc := testenv.S3Bucket(t)
	pgURL := testenv.PGURL(t)
	brokerBin, workerBin := programs(t)
	ctx := context.Background()
	rng, seed := newRand(t)
	brokers := startBroker(t, brokerBin, "payments", "settlements")
	pool := pgTables(t, pgURL, "totals", "merchant_id")
	c := newCluster(t, workerBin, "w", "settle", brokers, loc, pgURL)
	prod, stopProducing := startProducer(t, brokers, seed)
	defer stopProducing()

	var figures []string
	for range 3 {
		c.start()
	}
	c.waitFor("3 workers balanced", 60*time.Second, c.balanced)
	figures = append(figures, fmt.Sprintf("3 workers start → balanced: %s", time.Since(c.began).Round(10*time.Millisecond)))

	pause := func() { time.Sleep(time.Duration(500+rng.IntN(2000)) * time.Millisecond) }
	for k := range *killsFlag {
		pause()
		alive := c.alive()
		victim := alive[rng.IntN(len(alive))]
		tasks := c.tasksOf(victim)
		killed := c.kill(victim, syscall.SIGKILL)
		c.waitFor(fmt.Sprintf("the tasks of SIGKILLed %s to resume", victim), 60*time.Second, func() bool { return c.resumedAfter(killed, tasks) > 0 })
		figures = append(figures, fmt.Sprintf("SIGKILL %d of %s (%d tasks) → resumed elsewhere: %dms", k+1, victim, len(tasks), c.resumedAfter(killed, tasks)-killed))
		c.waitFor("balanced after the kill", 60*time.Second, c.balanced)
		joined := time.Now()
		name := c.start()
		c.waitFor(name+" to join and balance", 60*time.Second, func() bool { return len(c.tasksOf(name)) > 0 && c.balanced() })
		figures = append(figures, fmt.Sprintf("%s joins 2 workers → balanced: %s", name, time.Since(joined).Round(10*time.Millisecond)))
	}
	pause()
	joined := time.Now()
	fourth := c.start()
	c.waitFor("a 4th worker to join and balance", 60*time.Second, func() bool { return len(c.tasksOf(fourth)) == 3 && c.balanced() })
	figures = append(figures, fmt.Sprintf("%s joins 3 workers → balanced (3 tasks each): %s", fourth, time.Since(joined).Round(10*time.Millisecond)))

	pause()
	alive := c.alive()
	leaver := alive[rng.IntN(len(alive))]
	tasks := c.tasksOf(leaver)
	left := c.kill(leaver, syscall.SIGTERM)
	c.waitFor("the tasks of "+leaver+" to resume", 60*time.Second, func() bool { return c.resumedAfter(left, tasks) > 0 })
	figures = append(figures, fmt.Sprintf("SIGTERM of %s (%d tasks) → exited after %dms, resumed elsewhere after %dms", leaver, len(tasks),
		c.procs[leaver].exited-left, c.resumedAfter(left, tasks)-left))

	stopProducing()
	c.waitFor("every task to read all its payments", 60*time.Second, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for p := range partitions {
			if c.lastEnd[p] != prod.sent[p] {
				return false
			}
		}
		return true
	})
	for _, name := range c.alive() {
		c.kill(name, syscall.SIGTERM)
	}
	for _, f := range figures {
		t.Log(f)
	}
	t.Logf("%d payments, %d batches committed in %s", prod.n, len(c.commits), time.Since(c.began).Round(time.Second))

	root := c.root(ctx, loc)
	checkCommitsOnce(t, c, root)
	checkNoOverlap(t, c)
	checkProgressRows(t, root, pool, "settle")
	auditTasks(t, root, brokers, "payments", pool, merchantPartition, "merchant_id", "settlements", "totals")
}

// checkProgressRows checks that each task has its own PostgreSQL progress
// row (job <stage>-t<p>), at the task's last committed batch.
func checkProgressRows(t *testing.T, root storage.Store, pool *pgxpool.Pool, stage string) {
	ctx := context.Background()
	rows, err := pool.Query(ctx, "SELECT job, batch_id FROM onceflow_progress")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for rows.Next() {
		var job string
		var b int64
		if err := rows.Scan(&job, &b); err != nil {
			t.Fatal(err)
		}
		got[job] = b
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != partitions {
		t.Errorf("progress rows %v, want one per task (%d)", got, partitions)
	}
	for p := range partitions {
		ids, err := checkpoint.NewReader(storage.Sub(root, fmt.Sprintf("tasks/%d", p))).CommitIDs(ctx)
		if err != nil || len(ids) == 0 {
			t.Fatalf("task %d commits: %v %v", p, ids, err)
		}
		job := fmt.Sprintf("%s-t%d", stage, p)
		if b, ok := got[job]; !ok || b != ids[len(ids)-1] {
			t.Errorf("progress row of %s: batch %d (present %v), want the task's last commit %d", job, b, ok, ids[len(ids)-1])
		}
	}
}

func newRand(t *testing.T) (*rand.Rand, uint64) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -scaleout.seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x5ca1e)), seed
}

// startBroker runs brokerprog with the topics, 12 partitions each, and
// returns its address.
func startBroker(t *testing.T, bin string, topics ...string) string {
	var spec []string
	for _, tp := range topics {
		spec = append(spec, fmt.Sprintf("%s:%d", tp, partitions))
	}
	bcmd := exec.Command(bin, "-topics", strings.Join(spec, ","))
	bout, err := bcmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	bcmd.Stderr = os.Stderr
	if err := bcmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bcmd.Process.Signal(syscall.SIGTERM); _ = bcmd.Wait() })
	line, err := bufio.NewReader(bout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "kafka ") {
		t.Fatalf("broker did not start: %q %v", line, err)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, "kafka "))
}

// pgTables creates the progress table and the totals table keyed by key,
// before any worker starts (workers of one process would race to create
// them), and returns a pool on the test's schema.
func pgTables(t *testing.T, pgURL, table, key string) *pgxpool.Pool {
	ctx := context.Background()
	pool, err := postgres.Connect(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for _, ddl := range []string{
		"CREATE TABLE onceflow_progress (job text PRIMARY KEY, batch_id bigint NOT NULL, updated_at timestamptz NOT NULL, query_id text)",
		"CREATE TABLE " + table + " (" + key + " text NOT NULL PRIMARY KEY, amount_cents bigint, payments bigint, total_cents bigint, batch_id bigint)",
	} {
		if _, err := pool.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	return pool
}

// newCluster is the view of one stage's workers, named prefix1, prefix2, …,
// with checkpoints under the bucket's folder named after the stage.
func newCluster(t *testing.T, bin, prefix, stage, brokers string, loc testenv.S3Location, pgURL string) *cluster {
	cpURL := strings.Replace(loc.URL, "?", "/"+stage+"?", 1)
	return &cluster{t: t, prog: bin, prefix: prefix, stage: stage, env: loc.Env, began: time.Now(),
		args:  []string{"-stage", stage, "-brokers", brokers, "-checkpoint", cpURL, "-pg", pgURL},
		procs: map[string]*proc{}, owns: map[string]map[int32]bool{}, spans: map[int32][]span{}}
}

// root opens the stage's checkpoint root, closed when the test ends.
func (c *cluster) root(ctx context.Context, loc testenv.S3Location) storage.Store {
	root, err := s3store.New(ctx, loc.Bucket, c.stage, loc.Options)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = root.Close() })
	return root
}

// startProducer produces payment bursts until the returned stop, which
// waits for the producer and fails the test on a produce error.
func startProducer(t *testing.T, brokers string, seed uint64) (*producer, func()) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	prod := &producer{cl: cl, byCustomer: map[string]int64{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var perr error
	prng := rand.New(rand.NewPCG(seed+1, seed+2))
	wg.Go(func() {
		for ctx.Err() == nil {
			if err := prod.burst(context.Background(), prng, 120); err != nil {
				perr = err
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	var once sync.Once
	return prod, func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			if perr != nil {
				t.Errorf("produce: %v", perr)
			}
		})
	}
}

// checkCommitsOnce checks, per task, that each committed batch was
// committed by the run that planned it (or, for the first batch a run
// commits, recovered from a run that died), that a run never came back
// after another had taken over, and that the workers printed each batch's
// commit once.
func checkCommitsOnce(t *testing.T, c *cluster, root storage.Store) {
	ctx := context.Background()
	for p := range partitions {
		cp := checkpoint.NewReader(storage.Sub(root, fmt.Sprintf("tasks/%d", p)))
		ids, err := cp.CommitIDs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) == 0 {
			t.Errorf("task %d committed nothing", p)
			continue
		}
		var runs []string
		for _, id := range ids {
			ce, err := cp.Commit(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			oe, err := cp.Offsets(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			takeover := len(runs) == 0 || runs[len(runs)-1] != ce.RunID
			// A batch planned by one run and committed by another is the
			// recovery of a run that died after offsets/N: only the first
			// batch a run commits may be one.
			if ce.RunID != oe.RunID && !takeover {
				t.Errorf("task %d batch %d: planned by run %s, committed by run %s, which had committed batch %d already", p, id, oe.RunID, ce.RunID, id-1)
			}
			if takeover {
				if slices.Contains(runs, ce.RunID) {
					t.Errorf("task %d: run %s committed batch %d after another run had taken over (runs so far %v)", p, ce.RunID, id, runs)
				}
				runs = append(runs, ce.RunID)
			}
		}
		if ids[len(ids)-1] != int64(len(ids)-1) {
			t.Errorf("task %d: commits %d..%d are not contiguous from 0 (%d files)", p, ids[0], ids[len(ids)-1], len(ids))
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[[2]int64]commit{}
	for _, cm := range c.commits {
		k := [2]int64{int64(cm.task), cm.batch}
		if prev, ok := seen[k]; ok {
			t.Errorf("task %d batch %d committed twice: by %s (run %s) and %s (run %s)", cm.task, cm.batch, prev.worker, prev.run, cm.worker, cm.run)
		}
		seen[k] = cm
	}
}

// checkNoOverlap checks that no task ran on two workers at once.
func checkNoOverlap(t *testing.T, c *cluster) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for task, ss := range c.spans {
		for i, a := range ss {
			for _, b := range ss[i+1:] {
				if a.worker == b.worker {
					continue
				}
				aEnd, bEnd := a.end, b.end
				if aEnd == 0 {
					aEnd = 1 << 62
				}
				if bEnd == 0 {
					bEnd = 1 << 62
				}
				if a.start < bEnd && b.start < aEnd {
					t.Errorf("task %d ran on %s [%d, %d] and %s [%d, %d] at once", task, a.worker, a.start, a.end, b.worker, b.start, b.end)
				}
			}
		}
	}
}

// auditTasks audits each task's checkpoint against both outputs (the
// Kafka topic outTopic and the PostgreSQL table outTable), restricted to
// the output keys whose partition (part) is the task's.
func auditTasks(t *testing.T, root storage.Store, brokers, input string, pool *pgxpool.Pool, part func(string) int32, key, outTopic, outTable string) {
	ctx := context.Background()
	for p := range int32(partitions) {
		keys := func(k string) bool { return part(k) == p }
		cp := storage.Sub(root, fmt.Sprintf("tasks/%d", p))
		for _, out := range []struct {
			name string
			cfg  audit.Config
		}{
			{"kafka", audit.Config{Output: audit.KafkaOutput([]string{brokers}, outTopic), OutputValue: "amount_cents", BatchColumn: "batch_id"}},
			{"postgres", audit.Config{Output: audit.PostgresOutput(pool, outTable), OutputValue: "total_cents"}},
		} {
			cfg := out.cfg
			cfg.Checkpoint, cfg.Input, cfg.Key, cfg.Value, cfg.Keys = cp, audit.KafkaInput([]string{brokers}, input), key, "amount_cents", keys
			rep, err := audit.Run(ctx, cfg)
			if err != nil {
				t.Fatalf("audit task %d %s: %v", p, out.name, err)
			}
			if !rep.OK() || len(rep.DuplicateBatches) > 0 {
				b, _ := json.MarshalIndent(rep, "", "  ")
				t.Errorf("audit task %d %s: %d differences:\n%s", p, out.name, rep.Differences(), b)
			} else if p == 0 {
				t.Logf("audit %s task 0 %s: %d keys match, %d input rows, batch %d", input, out.name, rep.Matching, rep.InputRows, rep.MatchedBatch)
			}
		}
	}
}
