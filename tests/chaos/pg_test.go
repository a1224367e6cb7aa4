package chaos

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/pgfault"
	"github.com/onceflow/onceflow/internal/testenv"
)

// The cluster TestPGRestart creates, restarts and stops: its own, so the
// restarts disturb no other test using the shared server.
const (
	pgVersion      = "15"
	pgChaosCluster = "onceflow-chaos"
)

const pgRestartHowTo = "TestPGRestart restarts a PostgreSQL cluster of its own (" + pgVersion + "/" + pgChaosCluster +
	", created on first use with scripts/pg-setup.sh and stopped when the test ends): run the tests as root " +
	"on a machine with the Debian PostgreSQL packages (pg_ctlcluster, pg_lsclusters; scripts/pg-setup.sh installs them)"

// chaosCluster starts the test's own PostgreSQL cluster, creating it the
// first time, and returns its URL; the cluster is stopped when the test
// ends. It skips the test when that cannot be done here.
func chaosCluster(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip(pgRestartHowTo + " (not root)")
	}
	for _, tool := range []string{"pg_ctlcluster", "pg_lsclusters", "pg_createcluster", "runuser"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(pgRestartHowTo + " (" + tool + " not found)")
		}
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "pg-setup.sh"))
	if err != nil {
		t.Fatal(err)
	}
	port := ""
	out, err := exec.Command("pg_lsclusters", "-h").Output()
	if err != nil {
		t.Fatalf("pg_lsclusters: %v", err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == pgVersion && f[1] == pgChaosCluster {
			port = f[2]
		}
	}
	if port == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
		_ = ln.Close()
	}
	cmd := exec.Command("bash", script)
	cmd.Env = append(os.Environ(), "PG_VERSION="+pgVersion, "PG_CLUSTER="+pgChaosCluster, "PG_PORT="+port)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("scripts/pg-setup.sh for cluster %s/%s on port %s: %v\n%s", pgVersion, pgChaosCluster, port, err, stderr.String())
	}
	t.Cleanup(func() { _ = exec.Command("pg_ctlcluster", pgVersion, pgChaosCluster, "stop").Run() })
	var dsn string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "export "+testenv.PGEnvVar+"="); ok {
			dsn = strings.Trim(v, "'")
		}
	}
	if dsn == "" {
		t.Fatal("scripts/pg-setup.sh printed no URL")
	}
	return dsn
}

// TestPGRestart restarts the PostgreSQL server (pg_ctlcluster restart)
// in the middle of batches of the four-sink program, so the PostgreSQL
// sink meets a server shutting down (57P01), refusing connections and
// starting up (57P03). The sink retries, or the program stops with an
// error naming the database failure; after a restart with the server up,
// every sink reconciles with the input.
func TestPGRestart(t *testing.T) {
	dsn := chaosCluster(t)
	t.Setenv(testenv.PGEnvVar, dsn) // the harness's schema lives there
	onceflow, prog := programs(t)
	broker := startBroker(t, onceflow, "payments:4,settlements:4")
	h := newHarness(t, onceflow, prog, broker, 51, sinkKafka, sinkLake, sinkPG, sinkLines)
	h.extra = []string{"-max-offsets-per-trigger", "60"}
	cl := h.client()
	table := newFaultTable(t, fmt.Sprintf("go test -race ./tests/chaos/ -run TestPGRestart -chaos.rounds=%d", *chaosRounds))
	row := table.row("PostgreSQL restarted mid-batch", h.sinks)
	for range *chaosRounds {
		h.produce(cl, 400+h.rng.IntN(200))
		wait := 1 + h.rng.IntN(4) // committed batches before the restart
		pause := h.rng.IntN(150)  // ms into the next batch
		var restarted atomic.Int64
		var restartErr atomic.Value
		r := h.start(runSpec{during: func(ctx context.Context, _ int, stderr *syncBuffer) {
			if !waitFor(ctx, stderr, "chaosprog: batch ", wait) {
				return
			}
			time.Sleep(time.Duration(pause) * time.Millisecond)
			if out, err := exec.Command("pg_ctlcluster", pgVersion, pgChaosCluster, "restart").CombinedOutput(); err != nil {
				restartErr.Store(fmt.Sprintf("%v: %s", err, out))
				return
			}
			restarted.Add(1)
		}})
		if e := restartErr.Load(); e != nil {
			t.Fatalf("pg_ctlcluster %s %s restart: %s", pgVersion, pgChaosCluster, e)
		}
		row.runs++
		row.injected += int(restarted.Load())
		switch {
		case r.killed:
			t.Fatalf("killed without a kill:\n%s", r.stderr)
		case r.err == nil:
			row.rode++
			t.Logf("restart after batch %d + %dms: rode through in %s", wait, pause, r.took.Round(time.Millisecond))
		default:
			row.stopped++
			msg := lastError(r.stderr)
			if !strings.Contains(msg, "postgres") {
				t.Errorf("the run stopped with an error that does not name the database: %s", msg)
			}
			if strings.Contains(msg, "onceflow-test") {
				t.Errorf("the error shows the database password")
			}
			t.Logf("restart after batch %d + %dms: stopped after %s: %s", wait, pause, r.took.Round(time.Millisecond), msg)
		}
		if r.err == nil {
			continue
		}
		if r := h.start(runSpec{}); r.err != nil || r.killed {
			t.Fatalf("the restart of the program did not finish: %v\n%s", r.err, r.stderr)
		}
	}
	row.settle(h)
}

// TestPGLostCommit puts a proxy (internal/pgfault) between the four-sink
// program and PostgreSQL that forwards the sink's COMMIT, lets the server
// commit, and resets the connection before the answer arrives. The sink
// cannot know that the batch committed; its retry must find the progress
// row at the batch and skip it, so nothing is applied twice.
func TestPGLostCommit(t *testing.T) {
	t.Parallel() // its own broker, checkpoint and outputs; see doc.go
	if os.Getenv(testenv.PGEnvVar) == "" {
		testenv.SkipMissing(t, "TestPGLostCommit needs PostgreSQL: run scripts/pg-setup.sh as root and export "+testenv.PGEnvVar+" as it prints")
	}
	onceflow, prog := programs(t)
	broker := startBroker(t, onceflow, "payments:4,settlements:4")
	h := newHarness(t, onceflow, prog, broker, 61, sinkKafka, sinkLake, sinkPG, sinkLines)
	h.extra = []string{"-max-offsets-per-trigger", "60"}
	u, err := url.Parse(h.pgURL)
	if err != nil {
		t.Fatal("bad PostgreSQL URL") // it holds a password: do not print it
	}
	proxy, err := pgfault.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	u.Host = proxy.Addr()
	h.pgURL = u.String() // the program (and onceflow audit) go through the proxy; the audit's pool does not
	cl := h.client()
	table := newFaultTable(t, fmt.Sprintf("go test -race ./tests/chaos/ -run TestPGLostCommit -chaos.rounds=%d", *chaosRounds))
	row := table.row("PostgreSQL COMMIT answer lost", h.sinks)
	for range 2 * *chaosRounds {
		h.produce(cl, 300+h.rng.IntN(200))
		before := proxy.Lost()
		proxy.LoseCommits(1+h.rng.IntN(3), 1+h.rng.IntN(3))
		r := h.start(runSpec{})
		proxy.LoseCommits(0, 0)
		n := proxy.Lost() - before
		row.runs++
		row.injected += n
		switch {
		case r.killed:
			t.Fatalf("killed without a kill:\n%s", r.stderr)
		case r.err == nil:
			row.rode++
			t.Logf("%d COMMIT answers lost: rode through in %s", n, r.took.Round(time.Millisecond))
		default:
			row.stopped++
			msg := lastError(r.stderr)
			t.Logf("%d COMMIT answers lost: stopped after %s: %s", n, r.took.Round(time.Millisecond), msg)
			if r := h.start(runSpec{}); r.err != nil || r.killed {
				t.Fatalf("the restart did not finish: %v\n%s", r.err, r.stderr)
			}
		}
	}
	t.Logf("%d COMMITs through the proxy, %d answers lost", proxy.Commits(), proxy.Lost())
	row.settle(h)
}

// waitFor waits until s holds n lines containing marker, or ctx ends.
func waitFor(ctx context.Context, s *syncBuffer, marker string, n int) bool {
	for {
		if count(s.String(), marker) >= n {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}
