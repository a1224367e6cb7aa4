package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/audit"
	"github.com/onceflow/onceflow/foreachbatch/postgres"
	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/internal/fault/faulttest"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/storage"
	"github.com/onceflow/onceflow/storage/s3store"
)

// bins are the programs the tests run, built once by TestMain.
var bins struct {
	once     sync.Once
	err      error
	dir      string
	onceflow string
	prog     string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bins.dir != "" {
		_ = os.RemoveAll(bins.dir)
	}
	os.Exit(code)
}

// programs returns the onceflow command and chaosprog, built on first use
// (with -race when the tests run with it).
func programs(t *testing.T) (onceflow, prog string) {
	t.Helper()
	bins.once.Do(func() {
		bins.dir, bins.err = os.MkdirTemp("", "onceflow-chaos-")
		if bins.err != nil {
			return
		}
		if bins.onceflow, bins.err = buildOnceflow(bins.dir); bins.err != nil {
			return
		}
		bins.prog, bins.err = build(bins.dir, "github.com/onceflow/onceflow/tests/chaos/chaosprog")
	})
	if bins.err != nil {
		t.Fatal(bins.err)
	}
	return bins.onceflow, bins.prog
}

// build compiles pkg into dir with the fault points compiled in.
func build(dir, pkg string) (string, error) {
	bin := filepath.Join(dir, filepath.Base(pkg))
	args := []string{"build", "-tags", fault.Tag, "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s: %w", pkg, err)
	}
	return bin, nil
}

// buildOnceflow builds the onceflow command.
func buildOnceflow(dir string) (string, error) {
	return build(dir, "github.com/onceflow/onceflow/cmd/onceflow")
}

// startBroker runs `onceflow dev kafka` as its own process.
func startBroker(t *testing.T, onceflow string, topics string) string {
	t.Helper()
	_, addr := startBrokerCmd(t, onceflow, topics)
	return addr
}

// startBrokerCmd is startBroker returning the process too.
func startBrokerCmd(t *testing.T, onceflow string, topics string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(onceflow, "dev", "kafka", "-port", "0", "-topics", topics)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("broker did not start: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	i := strings.LastIndex(line, " ")
	return cmd, strings.TrimSpace(line[i+1:])
}

// sinkKind names the four outputs.
type sinkKind string

const (
	sinkKafka sinkKind = "kafka"
	sinkLake  sinkKind = "lake"
	sinkPG    sinkKind = "postgres"
	sinkLines sinkKind = "foreachBatch"
)

// harness is one pipeline: a checkpoint, its four outputs, and the
// program that connects them.
type harness struct {
	t        *testing.T
	onceflow string
	prog     string
	broker   string
	dir      string
	pgURL    string
	pool     *pgxpool.Pool
	sinks    []sinkKind
	extra    []string
	cpLoc    string     // the checkpoint's location; a directory unless set
	lakeLoc  string     // the file sink's table; a directory unless set
	env      []string   // more environment for the program (S3 credentials)
	rng      *rand.Rand // the test's choices; one goroutine

	mu   sync.Mutex
	prng *rand.Rand // payments; under mu
	sent int        // payments produced; under mu
}

func newHarness(t *testing.T, onceflow, prog, broker string, seed uint64, sinks ...sinkKind) *harness {
	t.Helper()
	h := &harness{t: t, onceflow: onceflow, prog: prog, broker: broker, dir: t.TempDir(), rng: rand.New(rand.NewPCG(seed, seed+1)), prng: rand.New(rand.NewPCG(seed+2, seed+3))}
	for _, s := range sinks {
		if s == sinkPG {
			if os.Getenv(testenv.PGEnvVar) == "" {
				t.Logf("no PostgreSQL (%s unset; see scripts/pg-setup.sh): the PostgreSQL sink sits this run out", testenv.PGEnvVar)
				continue
			}
			h.pgURL = testenv.PGURL(t)
			pool, err := postgres.Connect(context.Background(), h.pgURL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			h.pool = pool
		}
		h.sinks = append(h.sinks, s)
	}
	return h
}

func (h *harness) checkpoint() string {
	if h.cpLoc != "" {
		return h.cpLoc
	}
	return filepath.Join(h.dir, "checkpoint")
}

func (h *harness) lake() string {
	if h.lakeLoc != "" {
		return h.lakeLoc
	}
	return filepath.Join(h.dir, "lake")
}

func (h *harness) lines() string { return filepath.Join(h.dir, "lines.jsonl") }

func (h *harness) args() []string {
	a := []string{"-brokers", h.broker, "-checkpoint", h.checkpoint(), "-payments-topic", "payments"}
	for _, s := range h.sinks {
		switch s {
		case sinkKafka:
			a = append(a, "-settlements-topic", "settlements")
		case sinkLake:
			a = append(a, "-lake", h.lake())
		case sinkPG:
			a = append(a, "-pg", h.pgURL)
		case sinkLines:
			a = append(a, "-fb", h.lines())
		}
	}
	return append(a, h.extra...)
}

// run starts the program with fault spec ("" for none), kills it after
// killAfter if that is positive, and reports whether SIGKILL ended it.
func (h *harness) run(spec string, killAfter time.Duration) (killed bool, stderr string) {
	return h.runFor(spec, killAfter, 2*time.Minute)
}

// runFor is run with a watchdog: after limit the program gets SIGQUIT (a
// goroutine dump) and the test fails. A program that exits with an error
// fails the test too.
func (h *harness) runFor(spec string, killAfter, limit time.Duration) (killed bool, stderr string) {
	h.t.Helper()
	r := h.start(runSpec{point: spec, killAfter: killAfter, limit: limit})
	if r.err != nil {
		h.t.Fatalf("%s (fault %q): %v\n%s", h.prog, spec, r.err, r.stderr)
	}
	return r.killed, r.stderr
}

// runSpec is one run of the program.
type runSpec struct {
	point     string        // internal/fault spec ("" for none)
	killAfter time.Duration // SIGKILL after this long, if positive
	limit     time.Duration // watchdog: SIGQUIT and fail the test after this long (0: 2 minutes)
	args      []string      // more flags, for this run only
	// during is called once the program started, on its own goroutine,
	// with a context that ends when the program exits; the run waits for
	// it to return.
	during func(ctx context.Context, pid int, stderr *syncBuffer)
}

// runResult is how a run ended: killed by SIGKILL, exited 0 (neither
// killed nor err), or exited with err (the program's message in stderr).
type runResult struct {
	killed bool
	err    error
	stderr string
	took   time.Duration
}

// start runs the program once as spec says and waits for it.
func (h *harness) start(spec runSpec) runResult {
	t := h.t
	t.Helper()
	if spec.point != "" {
		faulttest.Require(t)
	}
	limit := spec.limit
	if limit == 0 {
		limit = 2 * time.Minute
	}
	cmd := exec.Command(h.prog, append(h.args(), spec.args...)...)
	var eb syncBuffer
	cmd.Stderr = &eb
	cmd.Env = append(append(os.Environ(), h.env...), fault.EnvVar+"="+spec.point)
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var timer *time.Timer
	if spec.killAfter > 0 {
		timer = time.AfterFunc(spec.killAfter, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
	}
	var wg sync.WaitGroup
	ctx, exited := context.WithCancel(context.Background())
	defer exited()
	if spec.during != nil {
		wg.Go(func() { spec.during(ctx, cmd.Process.Pid, &eb) })
	}
	watchdog := time.AfterFunc(limit, func() { _ = cmd.Process.Signal(syscall.SIGQUIT) })
	err := cmd.Wait()
	took := time.Since(began)
	exited()
	watchdog.Stop()
	if timer != nil {
		timer.Stop()
	}
	wg.Wait()
	if err == nil {
		return runResult{stderr: eb.String(), took: took}
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			switch ws.Signal() {
			case syscall.SIGKILL:
				return runResult{killed: true, stderr: eb.String(), took: took}
			case syscall.SIGQUIT:
				t.Fatalf("%s hung for %s (the watchdog's SIGQUIT ended it):\n%s", h.prog, limit, eb.String())
			}
		}
	}
	return runResult{err: err, stderr: eb.String(), took: took}
}

// syncBuffer is a bytes.Buffer a process writes while a test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func (h *harness) sentCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sent
}

// produce writes n payments with ids following the ones already sent.
func (h *harness) produce(cl *kgo.Client, n int) {
	h.mu.Lock()
	from := h.sent
	recs := make([]*kgo.Record, 0, n)
	for i := from; i < from+n; i++ {
		m := fmt.Sprint("m-", h.prng.IntN(37))
		v, _ := json.Marshal(map[string]any{"payment_id": fmt.Sprint("p-", i), "merchant_id": m, "amount_cents": 1 + h.prng.Int64N(99999), "ts": "2026-11-30T10:00:00.123Z"})
		recs = append(recs, &kgo.Record{Topic: "payments", Key: []byte(m), Value: v})
	}
	h.sent += n
	h.mu.Unlock()
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		h.t.Errorf("produce payments: %v", err)
	}
}

func (h *harness) client() *kgo.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.broker))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(cl.Close)
	return cl
}

// keepProducing produces a few payments every interval until stop is
// called, which waits for the producer to finish.
func (h *harness) keepProducing(n int, every time.Duration) (stop func()) {
	cl := h.client()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				h.produce(cl, n)
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// audit reconciles one sink with the payments topic through the API.
func (h *harness) audit(ctx context.Context, s sinkKind) *audit.Report {
	h.t.Helper()
	rep, err := h.tryAudit(ctx, s)
	if err != nil {
		h.t.Fatal(err)
	}
	return rep
}

// tryAudit is audit returning its error; safe to call from any goroutine.
func (h *harness) tryAudit(ctx context.Context, s sinkKind) (*audit.Report, error) {
	cp, err := openLocation(ctx, h.checkpoint())
	if err != nil {
		return nil, err
	}
	defer cp.Close()
	cfg := audit.Config{Checkpoint: cp, Input: audit.KafkaInput([]string{h.broker}, "payments"),
		Key: "merchant_id", Value: "amount_cents", BatchColumn: "batch_id"}
	switch s {
	case sinkKafka:
		cfg.Output = audit.KafkaOutput([]string{h.broker}, "settlements")
	case sinkLake:
		table, err := openLocation(ctx, h.lake())
		if err != nil {
			return nil, err
		}
		defer table.Close()
		cfg.Output = audit.LakeOutput(table)
	case sinkPG:
		cfg.Output = audit.PostgresOutput(h.pool, "totals")
	case sinkLines:
		cfg.Output = audit.JSONLinesOutput(h.lines())
	}
	rep, err := audit.Run(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("audit %s: %w", s, err)
	}
	return rep, nil
}

// auditAll audits every sink, side by side.
func (h *harness) auditAll(ctx context.Context) map[sinkKind]*audit.Report {
	h.t.Helper()
	reps := make([]*audit.Report, len(h.sinks))
	errs := make([]error, len(h.sinks))
	var wg sync.WaitGroup
	for i, s := range h.sinks {
		wg.Go(func() { reps[i], errs[i] = h.tryAudit(ctx, s) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		h.t.Fatal(err)
	}
	out := map[sinkKind]*audit.Report{}
	for i, s := range h.sinks {
		out[s] = reps[i]
	}
	return out
}

// auditCLI runs `onceflow audit` on one sink and returns its exit code
// and output.
func (h *harness) auditCLI(s sinkKind) (int, string) {
	t := h.t
	t.Helper()
	out := map[sinkKind]string{
		sinkKafka: "kafka://" + h.broker + "/settlements",
		sinkLake:  "lake:" + h.lake(),
		sinkPG:    withParam(h.pgURL, "table=totals"),
		sinkLines: "jsonl:" + h.lines(),
	}[s]
	cmd := exec.Command(h.onceflow, "audit", "--checkpoint", h.checkpoint(), "--input", "kafka://"+h.broker+"/payments",
		"--output", out, "--key", "merchant_id", "--value", "amount_cents")
	b, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(b)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(b)
	}
	t.Fatalf("onceflow audit: %v", err)
	return 0, ""
}

// openLocation opens a directory or an s3:// location.
func openLocation(ctx context.Context, loc string) (storage.Store, error) {
	return storage.Open(ctx, loc, map[string]storage.Opener{"s3": s3store.Open})
}

func withParam(u, p string) string {
	if strings.Contains(u, "?") {
		return u + "&" + p
	}
	return u + "?" + p
}
