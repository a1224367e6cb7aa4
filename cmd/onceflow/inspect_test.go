package main

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/storage"
)

// inspectJSON is the JSON contract of `checkpoint inspect -o json`, written
// out here (not the command's own type) so a renamed field fails the test.
type inspectJSON struct {
	Location string `json:"location"`
	Metadata struct {
		Version int    `json:"version"`
		ID      string `json:"id"`
		Name    string `json:"name"`
	} `json:"metadata"`
	OffsetBatches []int64 `json:"offsetBatches"`
	CommitBatches []int64 `json:"commitBatches"`
	LastCommitted *int64  `json:"lastCommitted"`
	Uncommitted   *int64  `json:"uncommitted"`
	LatestPlan    *struct {
		BatchID int64 `json:"batchId"`
		Sources []struct {
			Description string          `json:"description"`
			Start       json.RawMessage `json:"start"`
			End         json.RawMessage `json:"end"`
		} `json:"sources"`
		Conf struct {
			StatePartitions int `json:"statePartitions"`
			Operators       []struct {
				ID string `json:"id"`
			} `json:"operators"`
		} `json:"conf"`
	} `json:"latestPlan"`
	LastProgress *struct {
		BatchID      int64 `json:"batchId"`
		NumInputRows int64 `json:"numInputRows"`
	} `json:"lastProgress"`
	StateOperators []struct {
		ID            string `json:"id"`
		Partitions    int    `json:"partitions"`
		Keys          int64  `json:"keys"`
		StateBytes    int64  `json:"stateBytes"`
		NewestVersion int64  `json:"newestVersion"`
	} `json:"stateOperators"`
}

func TestCheckpointInspect(t *testing.T) {
	ctx := context.Background()

	committed := ledgerCheckpoint(t, 40) // batches 0 … 3

	failed := t.TempDir()
	if err := runLedger(t, failed, 40, failAt{memsink.New("out"), 2}); err == nil || !strings.Contains(err.Error(), errInjected.Error()) {
		t.Fatalf("run with a failing sink: %v, want the injected failure", err)
	}

	recovered := t.TempDir()
	if err := runLedger(t, recovered, 40, failAt{memsink.New("out"), 2}); err == nil {
		t.Fatal("run with a failing sink succeeded")
	}
	if err := runLedger(t, recovered, 40, memsink.New("out")); err != nil {
		t.Fatal(err)
	}

	ptr := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		name          string
		dir           string
		offsets       []int64
		commits       []int64
		lastCommitted *int64
		uncommitted   *int64
		lastProgress  int64
		// text lines the human output must contain
		text []string
	}{
		{"all committed", committed, []int64{0, 1, 2, 3}, []int64{0, 1, 2, 3}, ptr(3), nil, 3, []string{
			"offsets        0..3 (4 entries)",
			"commits        0..3 (4 entries)",
			"  source 0     ledger(40): 30 → 40",
			"state totals   2 partitions, 3 keys, ",
			"last progress  batch 3 at ",
		}},
		{"sink failed at batch 2", failed, []int64{0, 1, 2}, []int64{0, 1}, ptr(1), ptr(2), 1, []string{
			"offsets        0..2 (3 entries)",
			"commits        0..1 (2 entries)",
			"uncommitted    batch 2 (re-run on next start)",
			"latest plan    batch 2, ",
			"  source 0     ledger(40): 20 → 30",
			"state totals   2 partitions, 3 keys, ",
			"last progress  batch 1 at ",
		}},
		{"re-run after the failure", recovered, []int64{0, 1, 2, 3}, []int64{0, 1, 2, 3}, ptr(3), nil, 3, []string{
			"commits        0..3 (4 entries)",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(ctx, "checkpoint", "inspect", tc.dir)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, want := range append(tc.text, "checkpoint     file://"+tc.dir, "query          ledger (id ") {
				if !strings.Contains(out, want) {
					t.Errorf("text output lacks %q:\n%s", want, out)
				}
			}
			if tc.uncommitted == nil && strings.Contains(out, "uncommitted") {
				t.Errorf("text output shows an uncommitted batch:\n%s", out)
			}

			code, out, errOut = runCLI(ctx, "checkpoint", "inspect", "-o", "json", tc.dir)
			if code != 0 {
				t.Fatalf("-o json: exit %d: %s", code, errOut)
			}
			var rep inspectJSON
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("-o json output does not parse: %v\n%s", err, out)
			}
			if rep.Location != "file://"+tc.dir || rep.Metadata.Name != "ledger" || len(rep.Metadata.ID) == 0 || rep.Metadata.Version != engine.FormatVersion {
				t.Errorf("location %q, metadata %+v", rep.Location, rep.Metadata)
			}
			if !slices.Equal(rep.OffsetBatches, tc.offsets) || !slices.Equal(rep.CommitBatches, tc.commits) {
				t.Errorf("offsets %v commits %v, want %v %v", rep.OffsetBatches, rep.CommitBatches, tc.offsets, tc.commits)
			}
			if !eqPtr(rep.LastCommitted, tc.lastCommitted) || !eqPtr(rep.Uncommitted, tc.uncommitted) {
				t.Errorf("lastCommitted %v uncommitted %v, want %v %v", show(rep.LastCommitted), show(rep.Uncommitted), show(tc.lastCommitted), show(tc.uncommitted))
			}
			last := tc.offsets[len(tc.offsets)-1]
			if p := rep.LatestPlan; p == nil || p.BatchID != last || p.Conf.StatePartitions != ledgerPartitions ||
				len(p.Conf.Operators) != 1 || p.Conf.Operators[0].ID != ledgerOperator ||
				len(p.Sources) != 1 || string(p.Sources[0].Start) != strconv.FormatInt(last*ledgerStep, 10) {
				t.Errorf("latestPlan %+v, want batch %d with operator %s over %d partitions", p, last, ledgerOperator, ledgerPartitions)
			}
			if p := rep.LastProgress; p == nil || p.BatchID != tc.lastProgress || p.NumInputRows != ledgerStep {
				t.Errorf("lastProgress %+v, want batch %d with %d rows", p, tc.lastProgress, ledgerStep)
			}
			if len(rep.StateOperators) != 1 {
				t.Fatalf("stateOperators %+v, want one", rep.StateOperators)
			}
			op := rep.StateOperators[0]
			// The keys are counted at the last committed version: the
			// failed attempt's state must not count.
			if op.ID != ledgerOperator || op.Partitions != ledgerPartitions || op.Keys != 3 || op.StateBytes <= 0 || op.NewestVersion < *tc.lastCommitted {
				t.Errorf("state operator %+v, want %s with %d partitions, 3 keys, some bytes, newest version >= %d", op, ledgerOperator, ledgerPartitions, *tc.lastCommitted)
			}
		})
	}
}

func eqPtr(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func show(p *int64) string {
	if p == nil {
		return "null"
	}
	return strconv.FormatInt(*p, 10)
}

// progressJSON is the part of a progress line the tests check.
type progressJSON struct {
	ID           string `json:"id"`
	BatchID      int64  `json:"batchId"`
	NumInputRows int64  `json:"numInputRows"`
	Recovered    bool   `json:"recovered"`
	Sinks        []struct {
		NumOutputRows int64 `json:"numOutputRows"`
	} `json:"sinks"`
}

func TestProgress(t *testing.T) {
	ctx := context.Background()
	cp := ledgerCheckpoint(t, 50) // batches 0 … 4

	recovered := t.TempDir()
	if err := runLedger(t, recovered, 30, failAt{memsink.New("out"), 1}); err == nil {
		t.Fatal("run with a failing sink succeeded")
	}
	if err := runLedger(t, recovered, 30, memsink.New("out")); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name      string
		dir       string
		flags     []string
		want      []int64
		recovered []int64
	}{
		{"default", cp, nil, []int64{0, 1, 2, 3, 4}, nil},
		{"-n 2", cp, []string{"-n", "2"}, []int64{3, 4}, nil},
		{"-n 1", cp, []string{"-n", "1"}, []int64{4}, nil},
		{"-n 0 shows all", cp, []string{"-n", "0"}, []int64{0, 1, 2, 3, 4}, nil},
		{"-n above the count", cp, []string{"-n", "99"}, []int64{0, 1, 2, 3, 4}, nil},
		{"re-run batch marked recovered", recovered, nil, []int64{0, 1, 2}, []int64{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(ctx, append(append([]string{"checkpoint", "progress", "-o", "jsonl"}, tc.flags...), tc.dir)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			recs := mustJSONLines[progressJSON](t, out)
			var ids, rec []int64
			for _, r := range recs {
				ids = append(ids, r.BatchID)
				if r.Recovered {
					rec = append(rec, r.BatchID)
				}
				if r.NumInputRows != ledgerStep || r.ID == "" || len(r.Sinks) != 1 || r.Sinks[0].NumOutputRows != 3 {
					t.Errorf("batch %d: %+v, want %d input rows and 3 output rows", r.BatchID, r, ledgerStep)
				}
			}
			if !slices.Equal(ids, tc.want) || !slices.Equal(rec, tc.recovered) {
				t.Errorf("-o jsonl batches %v (recovered %v), want %v (recovered %v)", ids, rec, tc.want, tc.recovered)
			}

			code, out, errOut = runCLI(ctx, append(append([]string{"checkpoint", "progress"}, tc.flags...), tc.dir)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			if h := strings.Fields(lines[0]); len(h) == 0 || h[0] != "batch" || !strings.Contains(lines[0], "input rows") || !strings.Contains(lines[0], "recovered") {
				t.Fatalf("table header %q", lines[0])
			}
			ids, rec = nil, nil
			for _, l := range lines[1:] {
				f := strings.Fields(l)
				id, err := strconv.ParseInt(f[0], 10, 64)
				if err != nil {
					t.Fatalf("table row %q: %v", l, err)
				}
				ids = append(ids, id)
				if f[2] != strconv.Itoa(ledgerStep) {
					t.Errorf("table row %q: input rows %s, want %d", l, f[2], ledgerStep)
				}
				if f[len(f)-1] == "yes" {
					rec = append(rec, id)
				}
			}
			if !slices.Equal(ids, tc.want) || !slices.Equal(rec, tc.recovered) {
				t.Errorf("table batches %v (recovered %v), want %v (recovered %v)\n%s", ids, rec, tc.want, tc.recovered, out)
			}
		})
	}
}

// stateRow is one line of `checkpoint state -o jsonl`.
type stateRow struct {
	Partition int    `json:"partition"`
	Key       string `json:"key"`
	Total     int64  `json:"total"`
	Rows      int64  `json:"rows"`
}

func TestStateDump(t *testing.T) {
	ctx := context.Background()
	const n = 40
	cp := ledgerCheckpoint(t, n) // batches 0 … 3

	dump := func(t *testing.T, flags ...string) []stateRow {
		t.Helper()
		code, out, errOut := runCLI(ctx, append([]string{"checkpoint", "state", cp, "--operator", ledgerOperator, "-o", "jsonl"}, flags...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		return mustJSONLines[stateRow](t, out)
	}
	check := func(t *testing.T, rows []stateRow, version int64) {
		t.Helper()
		want := ledgerTotals(n, version)
		got := map[string]int64{}
		for _, r := range rows {
			if _, dup := got[r.Key]; dup {
				t.Errorf("key %s appears twice", r.Key)
			}
			got[r.Key] = r.Total
			var count int64
			for i := int64(0); i < min(n, (version+1)*ledgerStep); i++ {
				if ledgerKey(i) == r.Key {
					count++
				}
			}
			if r.Rows != count {
				t.Errorf("key %s: rows %d, want %d", r.Key, r.Rows, count)
			}
		}
		if fmtTotals(got) != fmtTotals(want) {
			t.Errorf("state at version %d: %s, want %s", version, fmtTotals(got), fmtTotals(want))
		}
	}

	t.Run("last committed", func(t *testing.T) { check(t, dump(t), 3) })
	for _, v := range []int64{0, 1, 2, 3} {
		t.Run("version "+strconv.FormatInt(v, 10), func(t *testing.T) { check(t, dump(t, "--version", strconv.FormatInt(v, 10)), v) })
	}
	t.Run("partitions", func(t *testing.T) {
		var all []stateRow
		for p := range ledgerPartitions {
			rows := dump(t, "--partition", strconv.Itoa(p))
			for _, r := range rows {
				if r.Partition != p {
					t.Errorf("--partition %d printed a row of partition %d", p, r.Partition)
				}
			}
			all = append(all, rows...)
		}
		check(t, all, 3)
		if len(dump(t)) != len(all) {
			t.Errorf("the partitions hold %d rows, the whole dump %d", len(all), len(dump(t)))
		}
	})
	t.Run("text", func(t *testing.T) {
		code, out, errOut := runCLI(ctx, "checkpoint", "state", cp, "--operator", ledgerOperator, "--version", "1")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		if h := strings.Fields(lines[0]); !slices.Equal(h, []string{"partition", "key", "total", "rows"}) {
			t.Fatalf("header %q", lines[0])
		}
		var rows []stateRow
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			if len(f) != 4 {
				t.Fatalf("row %q", l)
			}
			p, _ := strconv.Atoi(f[0])
			total, _ := strconv.ParseInt(f[2], 10, 64)
			cnt, _ := strconv.ParseInt(f[3], 10, 64)
			rows = append(rows, stateRow{Partition: p, Key: f[1], Total: total, Rows: cnt})
		}
		check(t, rows, 1)
	})
	t.Run("unknown operator lists the ids", func(t *testing.T) {
		for _, args := range [][]string{
			{"checkpoint", "state", cp, "--operator", "totalz"},
			{"checkpoint", "state", cp},
		} {
			code, out, errOut := runCLI(ctx, args...)
			if code != 2 || out != "" || !strings.Contains(errOut, "the checkpoint has: "+ledgerOperator) {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and the operator id", args, code, out, errOut)
			}
		}
	})
	t.Run("dedup operator", func(t *testing.T) {
		two := t.TempDir()
		st, err := storage.OpenLocal(two, storage.LocalOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		stream := engine.ReadStream(ledger{n: 20}).
			DropDuplicates("amount").Stream
		q, err := engine.NewQuery(stream, engine.WithCheckpoint(st), engine.WithSink(memsink.New("out")),
			engine.WithStatePartitions(ledgerPartitions), engine.WithTrigger(engine.AvailableNow()))
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Run(ctx); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runCLI(ctx, "checkpoint", "state", two, "--operator", ledgerOperator)
		if code != 2 || out != "" || !strings.Contains(errOut, "the checkpoint has: dedup-amount") {
			t.Errorf("exit %d, stderr %q; want 2 listing the dedup operator's default id", code, errOut)
		}
		code, out, errOut = runCLI(ctx, "checkpoint", "state", two, "--operator", "dedup-amount", "-o", "jsonl")
		if code != 0 || len(mustJSONLines[map[string]any](t, out)) != 20 {
			t.Errorf("dedup state: exit %d, %d rows, want 20: %s", code, len(mustJSONLines[map[string]any](t, out)), errOut)
		}
	})
}

// TestInspectAndStateShowEveryOperatorOfAChain runs a query with two
// stateful operators (dedup, then totals) and finds both in inspect and in
// state dumps.
func TestInspectAndStateShowEveryOperatorOfAChain(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := storage.OpenLocal(dir, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stream := engine.ReadStream(ledger{n: 40}).
		DropDuplicates("key", "amount").ID("pairs").
		GroupBy("key").ID(ledgerOperator).
		Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("rows"))
	q, err := engine.NewQuery(stream, engine.WithCheckpoint(st), engine.WithSink(memsink.New("out")),
		engine.WithStatePartitions(ledgerPartitions), engine.WithTrigger(engine.AvailableNow()))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Run(ctx); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(ctx, "checkpoint", "inspect", dir, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep inspectJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	var ids []string
	keys := map[string]int64{}
	for _, op := range rep.StateOperators {
		ids = append(ids, op.ID)
		keys[op.ID] = op.Keys
	}
	if strings.Join(ids, ",") != "pairs,"+ledgerOperator || keys["pairs"] != 40 || keys[ledgerOperator] != 3 {
		t.Fatalf("inspect lists operators %v with keys %v; want pairs (40 keys) then %s (3 keys)", ids, keys, ledgerOperator)
	}
	code, out, errOut = runCLI(ctx, "checkpoint", "state", dir, "--operator", "pairs", "-o", "jsonl")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if n := strings.Count(out, "\n"); n != 40 {
		t.Fatalf("state of pairs: %d rows, want 40:\n%s", n, out)
	}
	code, _, errOut = runCLI(ctx, "checkpoint", "state", dir, "--operator", "pairs", "--store", "left")
	if code == 0 || !strings.Contains(errOut, `has no store "left"`) {
		t.Fatalf("--store of an operator with one store: exit %d, %s", code, errOut)
	}
}
