package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/storage"
)

// The tests here drive the command line in-process through run, on
// checkpoints and tables written by real queries in the test.

var ledgerSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.BinaryTypes.String},
	{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// ledger emits rows 0 … n-1, ledgerStep rows a batch; row i has key
// "k-<i%3>" and amount i+1, so the totals are easy to compute (ledgerTotals).
type ledger struct{ n int64 }

const ledgerStep = 10

func (l ledger) Schema() *arrow.Schema { return ledgerSchema }
func (l ledger) Description() string   { return "ledger(" + strconv.FormatInt(l.n, 10) + ")" }
func (l ledger) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (l ledger) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	s, err := strconv.ParseInt(string(start), 10, 64)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(strconv.FormatInt(min(s+ledgerStep, l.n), 10)), nil
}
func (l ledger) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	a, err := strconv.ParseInt(string(start), 10, 64)
	if err != nil {
		return err
	}
	b, err := strconv.ParseInt(string(end), 10, 64)
	if err != nil {
		return err
	}
	keys := array.NewStringBuilder(memory.DefaultAllocator)
	defer keys.Release()
	amounts := array.NewInt64Builder(memory.DefaultAllocator)
	defer amounts.Release()
	for i := a; i < b; i++ {
		keys.Append(ledgerKey(i))
		amounts.Append(i + 1)
	}
	kc, ac := keys.NewArray(), amounts.NewArray()
	defer kc.Release()
	defer ac.Release()
	rec := array.NewRecordBatch(ledgerSchema, []arrow.Array{kc, ac}, b-a)
	defer rec.Release()
	return emit(rec)
}

func ledgerKey(i int64) string { return "k-" + strconv.FormatInt(i%3, 10) }

// ledgerTotals is the sum of amount per key over the rows of batches
// 0 … upTo.
func ledgerTotals(n, upTo int64) map[string]int64 {
	out := map[string]int64{}
	for i := int64(0); i < min(n, (upTo+1)*ledgerStep); i++ {
		out[ledgerKey(i)] += i + 1
	}
	return out
}

// failAt is a sink that refuses batch `batch`, leaving it planned but
// uncommitted in the checkpoint.
type failAt struct {
	*memsink.Sink
	batch int64
}

var errInjected = errors.New("injected sink failure")

func (f failAt) AddBatch(ctx context.Context, id int64, schema *arrow.Schema, recs []arrow.RecordBatch) error {
	if id == f.batch {
		return errInjected
	}
	return f.Sink.AddBatch(ctx, id, schema, recs)
}

const (
	ledgerOperator   = "totals"
	ledgerPartitions = 2
)

// runLedger runs the per-key totals of ledger{n} on the checkpoint at dir
// until the input is exhausted (or the sink fails) and returns Run's error.
func runLedger(t *testing.T, dir string, n int64, sink engine.Sink, opts ...engine.Option) error {
	t.Helper()
	return runLedgerSrc(t, dir, ledger{n: n}, sink, opts...)
}

// runLedgerSrc is runLedger over src, a ledger that may misbehave.
func runLedgerSrc(t *testing.T, dir string, src engine.Source, sink engine.Sink, opts ...engine.Option) error {
	t.Helper()
	st, err := storage.OpenLocal(dir, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stream := engine.ReadStream(src).
		GroupBy("key").ID(ledgerOperator).
		Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("rows"))
	q, err := engine.NewQuery(stream, append([]engine.Option{
		engine.WithName("ledger"),
		engine.WithCheckpoint(st),
		engine.WithSink(sink),
		engine.WithStatePartitions(ledgerPartitions),
		engine.WithTrigger(engine.AvailableNow()),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return q.Run(context.Background())
}

// ledgerCheckpoint returns a checkpoint with batches 0 … n/ledgerStep-1
// committed.
func ledgerCheckpoint(t *testing.T, n int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := runLedger(t, dir, n, memsink.New("out")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runCLI runs the command line with args and returns its exit code,
// stdout and stderr.
func runCLI(ctx context.Context, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestUsageAndExitCodes(t *testing.T) {
	ctx := context.Background()
	cp := ledgerCheckpoint(t, 20)
	empty := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		code int
		// stderr must contain every one of these.
		stderr []string
	}{
		{"no command", nil, 2, []string{"usage: onceflow COMMAND", "checkpoint inspect", "checkpoint progress", "checkpoint state", "lake files", "demo", "dev kafka", "version"}},
		{"unknown command", []string{"frobnicate"}, 2, []string{`onceflow: unknown command "frobnicate"`, "usage: onceflow COMMAND"}},
		{"checkpoint without subcommand", []string{"checkpoint"}, 2, []string{"usage: onceflow checkpoint COMMAND", "checkpoint inspect", "checkpoint fork"}},
		{"checkpoint unknown subcommand", []string{"checkpoint", "explode", cp}, 2, []string{`onceflow checkpoint: unknown command "explode"`, "checkpoint inspect"}},
		{"inspect without dir", []string{"checkpoint", "inspect"}, 2, []string{"got 0 arguments", "usage: onceflow checkpoint inspect [-o table|json|jsonl] DIR"}},
		{"inspect two dirs", []string{"checkpoint", "inspect", cp, cp}, 2, []string{"got 2 arguments", "usage: onceflow checkpoint inspect [-o table|json|jsonl] DIR"}},
		{"inspect unknown flag", []string{"checkpoint", "inspect", "--yaml", cp}, 2, []string{"flag provided but not defined: -yaml"}},
		{"inspect unknown output", []string{"checkpoint", "inspect", "-o", "yaml", cp}, 2, []string{`invalid value "yaml" for flag -o: want table, json or jsonl`}},
		{"state without dir", []string{"checkpoint", "state", "--operator", ledgerOperator}, 2, []string{"usage: onceflow checkpoint state [-o table|json|jsonl] [--partition P] [--version N] [--store NAME] --operator ID DIR"}},
		{"state bad version", []string{"checkpoint", "state", cp, "--operator", ledgerOperator, "--version", "x"}, 2, []string{"invalid value"}},
		{"old state without dump", []string{"state", cp}, 2, []string{"unknown command"}},
		{"progress without dir", []string{"checkpoint", "progress"}, 2, []string{"checkpoint progress [-o table|json|jsonl] [-n N] DIR"}},
		{"progress bad -n", []string{"checkpoint", "progress", "-n", "many", cp}, 2, []string{"invalid value"}},
		{"lake without subcommand", []string{"lake"}, 2, []string{"usage: onceflow lake COMMAND", "lake files", "lake query", "lake vacuum"}},
		{"lake unknown subcommand", []string{"lake", "drain", cp}, 2, []string{`onceflow lake: unknown command "drain"`}},
		{"lake files without dir", []string{"lake", "files"}, 2, []string{"lake files [-o table|json|jsonl] DIR"}},
		{"lake query bad limit", []string{"lake", "query", "--limit", "ten", cp}, 2, []string{"invalid value"}},
		{"lake vacuum without dir", []string{"lake", "vacuum", "--delete"}, 2, []string{"lake vacuum [-o table|json|jsonl] [--older-than D] [--delete] DIR"}},
		{"audit without flags", []string{"audit"}, 2, []string{"give --checkpoint, --input, --output, --key, --value"}},
		{"demo bad trigger", []string{"demo", "-trigger", "sometimes"}, 2, []string{`trigger "sometimes"`}},
		{"demo unknown flag", []string{"demo", "-speed", "9"}, 2, []string{"flag provided but not defined: -speed"}},
		{"demo takes no arguments", []string{"demo", "now"}, 2, []string{"got 1 arguments"}},
		{"kafka bad topic", []string{"dev", "kafka", "-port", "0", "-topics", "payments:0"}, 2, []string{`topic "payments:0": partitions must be a positive number`}},
		{"version unknown output", []string{"version", "-o", "xml"}, 2, []string{"want table, json or jsonl"}},

		// Not usage errors: the command line is fine, the thing it names is not.
		{"inspect a directory that is no checkpoint", []string{"checkpoint", "inspect", empty}, 1, []string{"onceflow checkpoint inspect: "}},
		{"state of a directory that is no checkpoint", []string{"checkpoint", "state", empty, "--operator", ledgerOperator}, 1, []string{"has no batches"}},
		{"state of a version never written", []string{"checkpoint", "state", cp, "--operator", ledgerOperator, "--version", "7"}, 1, []string{"onceflow checkpoint state: "}},
		{"lake query of a file, not a table", []string{"lake", "query", filepath.Join(cp, "offsets", "00000000000000000000")}, 1, []string{"onceflow lake query: "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(ctx, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			for _, want := range tc.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr does not contain %q:\n%s", want, stderr)
				}
			}
			if code != 0 && stdout != "" && tc.code == 2 {
				t.Errorf("a usage error printed to stdout:\n%s", stdout)
			}
		})
	}
}

func TestFlagsAfterPositional(t *testing.T) {
	ctx := context.Background()
	cp := ledgerCheckpoint(t, 30)
	// The same command with the flags before and after DIR prints the same.
	for _, pair := range [][2][]string{
		{{"checkpoint", "inspect", "-o", "json", cp}, {"checkpoint", "inspect", cp, "-o=json"}},
		{{"checkpoint", "progress", "-o", "jsonl", "-n", "1", cp}, {"checkpoint", "progress", cp, "-n", "1", "-o", "jsonl"}},
		{{"checkpoint", "state", "--operator", ledgerOperator, "-o", "jsonl", cp}, {"checkpoint", "state", cp, "-o", "jsonl", "--operator=" + ledgerOperator}},
	} {
		c1, out1, err1 := runCLI(ctx, pair[0]...)
		c2, out2, err2 := runCLI(ctx, pair[1]...)
		if c1 != 0 || c2 != 0 {
			t.Fatalf("%v: exit %d %s; %v: exit %d %s", pair[0], c1, err1, pair[1], c2, err2)
		}
		if out1 != out2 {
			t.Errorf("%v printed\n%s\n%v printed\n%s", pair[0], out1, pair[1], out2)
		}
		if !strings.HasPrefix(out1, "{") {
			t.Errorf("%v: not JSON:\n%s", pair[0], out1)
		}
	}
}

// mustJSONLines decodes each line of out into a T.
func mustJSONLines[T any](t *testing.T, out string) []T {
	t.Helper()
	var recs []T
	for i, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var r T
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %d %q: %v", i+1, line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

func fmtTotals(m map[string]int64) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s=%d ", k, m[k])
	}
	return b.String()
}
