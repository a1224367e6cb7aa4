package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/internal/fault/faulttest"
)

var long = flag.Bool("e2e.long", false, "more kills per fault point and more random kills")

// killsPerPoint is how many times each fault point kills the process.
func killsPerPoint() int {
	if *long {
		return 6
	}
	return 2
}

// randomKills is how many SIGKILLs land at random moments.
func randomKills() int {
	if *long {
		return 40
	}
	return 8
}

var builds struct {
	sync.Mutex
	dir  string
	bins map[string]string
}

// buildProg compiles pkg once per test binary (with the fault points
// compiled in, and -race when the test binary has it) and returns the
// program's path.
func buildProg(t *testing.T, pkg string) string {
	t.Helper()
	builds.Lock()
	defer builds.Unlock()
	if bin, ok := builds.bins[pkg]; ok {
		return bin
	}
	if builds.dir == "" {
		d, err := os.MkdirTemp("", "onceflow-e2e-")
		if err != nil {
			t.Fatal(err)
		}
		builds.dir = d
		builds.bins = map[string]string{}
	}
	bin := filepath.Join(builds.dir, filepath.Base(pkg))
	args := []string{"build", "-tags", fault.Tag, "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("build %s: %v", pkg, err)
	}
	builds.bins[pkg] = bin
	return bin
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if builds.dir != "" {
		_ = os.RemoveAll(builds.dir)
	}
	os.Exit(code)
}

// proc is one example program with its arguments and extra environment.
type proc struct {
	bin  string
	args []string
	env  []string
}

// outcome is how one run of a proc ended.
type outcome struct {
	killed bool // by SIGKILL (a fault point or the test)
	code   int  // exit code when not killed
	stderr string
}

// run starts the program once with the fault spec ("" for none), kills it
// after killAfter when that is positive, and waits for it.
func (p proc) run(t *testing.T, spec string, killAfter time.Duration) outcome {
	t.Helper()
	if spec != "" {
		faulttest.Require(t)
	}
	cmd := exec.Command(p.bin, p.args...)
	var eb bytes.Buffer
	cmd.Stderr = &eb
	cmd.Env = append(append(os.Environ(), p.env...), fault.EnvVar+"="+spec)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var timer *time.Timer
	if killAfter > 0 {
		timer = time.AfterFunc(killAfter, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
	}
	err := cmd.Wait()
	if timer != nil {
		timer.Stop()
	}
	if err == nil {
		return outcome{stderr: eb.String()}
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("%s: %v", p.bin, err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		return outcome{killed: true, stderr: eb.String()}
	}
	return outcome{code: ee.ExitCode(), stderr: eb.String()}
}

// mustRun runs p like run and fails the test on a non-zero exit.
func (p proc) mustRun(t *testing.T, spec string, killAfter time.Duration) outcome {
	t.Helper()
	o := p.run(t, spec, killAfter)
	if !o.killed && o.code != 0 {
		t.Fatalf("%s %s (fault %q) exited %d:\n%s", filepath.Base(p.bin), strings.Join(p.args, " "), spec, o.code, o.stderr)
	}
	return o
}

// payment is a landed payment as the test knows it, independent of the
// examples' code.
type payment struct {
	PaymentID   string `json:"payment_id"`
	MerchantID  string `json:"merchant_id"`
	AmountCents int64  `json:"amount_cents"`
	TS          string `json:"ts"`
}

// lander writes landing files of random payments into a directory and
// remembers every payment it landed. One goroutine at a time may use it.
type lander struct {
	t    *testing.T
	dir  string
	rng  *rand.Rand
	next int // next payment number
	file int // next file number
	all  map[string]payment
}

func newLander(t *testing.T, dir string, seed uint64) *lander {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &lander{t: t, dir: dir, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), all: map[string]payment{}}
}

var epoch = time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)

// land writes files files of per payments each (temp name, then rename)
// and returns the payments.
func (l *lander) land(files, per int) []payment {
	l.t.Helper()
	var out []payment
	for f := 0; f < files; f++ {
		var b bytes.Buffer
		for i := 0; i < per; i++ {
			p := payment{
				PaymentID:   fmt.Sprintf("p-%07d", l.next),
				MerchantID:  fmt.Sprintf("m-%02d", l.rng.IntN(17)),
				AmountCents: 1 + l.rng.Int64N(250_000),
				// Spread over three UTC days (three lake partitions).
				TS: epoch.Add(time.Duration(l.rng.Int64N(int64(50 * time.Hour)))).Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z"),
			}
			l.next++
			line, _ := json.Marshal(p) // plain strings and ints always encode
			b.Write(line)
			b.WriteByte('\n')
			l.all[p.PaymentID] = p
			out = append(out, p)
		}
		l.write(fmt.Sprintf("pay-%05d.json", l.file), b.Bytes())
		l.file++
	}
	return out
}

// write lands raw bytes as name: written as .name.tmp, then renamed. It
// may run off the test goroutine, so a failure is reported with Errorf.
func (l *lander) write(name string, data []byte) {
	l.t.Helper()
	tmp := filepath.Join(l.dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		l.t.Errorf("land %s: %v", name, err)
		return
	}
	if err := os.Rename(tmp, filepath.Join(l.dir, name)); err != nil {
		l.t.Errorf("land %s: %v", name, err)
	}
}

// crashPlan drives a program through kills at fault points and random
// moments, landing more files before each run.
type crashPlan struct {
	p       proc
	l       *lander
	files   int // files landed before each run
	per     int // payments per file
	kills   map[string]int
	runs    int
	started time.Time
}

// atPoint kills the program want times at point, landing files before
// each run. hits are the hit numbers to arm, in turn (a per-batch point at
// its 1st hit dies in the first batch of a run, often the recovery of the
// batch the previous kill interrupted; at its 2nd or 3rd, after batches
// committed in the same run). It gives up on the point after a few runs
// that never reach it.
func (c *crashPlan) atPoint(t *testing.T, point string, want int, hits ...int) {
	t.Helper()
	misses := 0
	for k := 0; c.kills[point] < want && misses < 3; k++ {
		c.l.land(c.files, c.per)
		o := c.p.mustRun(t, fmt.Sprintf("%s@%d", point, hits[k%len(hits)]), 0)
		c.runs++
		if !o.killed {
			misses++
			continue
		}
		if !strings.Contains(o.stderr, "onceflow-fault: "+point) {
			t.Fatalf("killed without reaching %s:\n%s", point, o.stderr)
		}
		c.kills[point]++
	}
}

// atRandom kills the program n times at random moments within span,
// landing files before each run and more while it runs.
func (c *crashPlan) atRandom(t *testing.T, n int, rng *rand.Rand, span time.Duration) {
	t.Helper()
	for tries := 0; c.kills["random"] < n && tries < 4*n; tries++ {
		c.l.land(c.files, c.per)
		var wg sync.WaitGroup
		wg.Add(1)
		landAfter := time.Duration(rng.Int64N(int64(span)))
		go func() {
			defer wg.Done()
			time.Sleep(landAfter)
			c.l.land(1, c.per)
		}()
		o := c.p.mustRun(t, "", 20*time.Millisecond+time.Duration(rng.Int64N(int64(span))))
		wg.Wait()
		c.runs++
		if o.killed {
			c.kills["random"]++
		}
	}
}

// finish lands a last round and runs the program without faults until it
// exits 0.
func (c *crashPlan) finish(t *testing.T) {
	t.Helper()
	c.l.land(c.files, c.per)
	if o := c.p.mustRun(t, "", 0); o.killed {
		t.Fatalf("clean run was killed:\n%s", o.stderr)
	}
	c.runs++
}

// expectKills fails the test for each point that never killed the program.
func (c *crashPlan) expectKills(t *testing.T, points []string) {
	t.Helper()
	for _, p := range points {
		if c.kills[p] == 0 {
			t.Errorf("fault point %s never killed the program", p)
		}
	}
	t.Logf("%d payments in %d files, %d runs, %s; kills: %v", len(c.l.all), c.l.file, c.runs, time.Since(c.started).Round(time.Millisecond), c.kills)
}
