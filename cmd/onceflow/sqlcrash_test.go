package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/filesink"
	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/internal/fault/faulttest"
	"github.com/onceflow/onceflow/storage"
)

const sqlCrashArgsEnv = "ONCEFLOW_SQL_CRASH_ARGS"

// TestSQLCrashChild is the process the crash test kills: onceflow run
// with the arguments in ONCEFLOW_SQL_CRASH_ARGS (tab-separated). It does
// nothing in a normal test run.
func TestSQLCrashChild(t *testing.T) {
	args := os.Getenv(sqlCrashArgsEnv)
	if args == "" {
		t.Skip("the child of TestSQLRunCrashAtEngineFaultPoints")
	}
	os.Exit(run(context.Background(), strings.Split(args, "\t"), os.Stdout, os.Stderr))
}

// crashSQL is a stateful query into a files table: per-minute windows per
// merchant under a watermark, one input file per batch, state snapshots and
// log purges every few batches, so every engine fault point is reached.
const crashSQL = `
CREATE SOURCE landing (payment_id text, merchant_id text, amount_cents bigint, ts timestamp,
  WATERMARK FOR ts AS ts - INTERVAL '5 seconds')
  WITH (connector = 'files', path = '${CRASH_INPUT}', max_files_per_trigger = '1');
CREATE SINK windows WITH (connector = 'files', path = '${CRASH_TABLE}', output_mode = 'append',
  snapshot_every = '3', min_batches_to_retain = '2', state_partitions = '2') AS
SELECT window_start, window_end, merchant_id, count(*) AS payments, sum(amount_cents) AS total_cents
FROM TUMBLE(landing, ts, INTERVAL '1 minute')
GROUP BY window_start, window_end, merchant_id;
`

// runSQLChild runs onceflow run in a child process; fault arms a fault
// point ("" for none). It reports whether the child was killed at it.
func runSQLChild(t *testing.T, file, in, table, root, faultSpec string) (killed bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSQLCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		sqlCrashArgsEnv+"="+strings.Join([]string{"run", "-trigger", "available-now", "-checkpoint-root", root, file}, "\t"),
		"CRASH_INPUT="+in, "CRASH_TABLE="+table, fault.EnvVar+"="+faultSpec)
	out, err := cmd.CombinedOutput()
	if err == nil {
		return false
	}
	var ee *exec.ExitError
	if faultSpec != "" && errors.As(err, &ee) && strings.Contains(string(out), "onceflow-fault: ") {
		return true
	}
	t.Fatalf("onceflow run (fault %q): %v\n%s", faultSpec, err, out)
	return false
}

func tableRows(t *testing.T, dir string) []string {
	t.Helper()
	st, err := storage.OpenLocal(dir, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var rows []string
	err = filesink.ReadRows(context.Background(), st, func(_ filesink.File, _ []string, row []any) error {
		rows = append(rows, fmt.Sprint(row...))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rows)
	return rows
}

// TestSQLRunCrashAtEngineFaultPoints SIGKILLs onceflow run at every
// engine fault point (its second hit), restarts it, and checks that the
// table holds exactly what a run without crashes wrote.
func TestSQLRunCrashAtEngineFaultPoints(t *testing.T) {
	faulttest.Require(t)
	in := t.TempDir()
	writePaymentFiles(t, in, 0, makePayments(0, 480, 4), 40)
	file := filepath.Join(t.TempDir(), "crash.sql")
	if err := os.WriteFile(file, []byte(crashSQL), 0o644); err != nil {
		t.Fatal(err)
	}
	baseTable := t.TempDir()
	if runSQLChild(t, file, in, baseTable, t.TempDir(), "") {
		t.Fatal("the run without faults died")
	}
	want := tableRows(t, baseTable)
	if len(want) == 0 {
		t.Fatal("the run without faults wrote nothing")
	}
	for _, point := range fault.EnginePoints() {
		t.Run(point, func(t *testing.T) {
			table, root := t.TempDir(), t.TempDir()
			if !runSQLChild(t, file, in, table, root, point+"@2") {
				t.Fatalf("the run never reached %s twice", point)
			}
			if runSQLChild(t, file, in, table, root, "") {
				t.Fatal("the restart died")
			}
			if got := tableRows(t, table); !slices.Equal(got, want) {
				t.Fatalf("after a kill at %s the table has %d rows, want %d as without crashes:\ngot  %v\nwant %v", point, len(got), len(want), got, want)
			}
		})
	}
}
