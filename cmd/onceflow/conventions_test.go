package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/filesink"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/storage"
)

// commandPaths lists every command below c, groups and leaves, hidden
// ones too, as argument lists.
func commandPaths(c *command, prefix []string) [][]string {
	var out [][]string
	for _, s := range c.subs {
		p := append(append([]string(nil), prefix...), s.name)
		out = append(out, p)
		out = append(out, commandPaths(s, p)...)
	}
	return out
}

// leaf returns the leaf command at path, nil for a group.
func leaf(root *command, path []string) *command {
	c := root
	for _, n := range path {
		c = c.find(n)
	}
	if c.subs != nil {
		return nil
	}
	return c
}

// TestHelpExitsZero asks every command, the old names too, for help in
// each spelling: usage and flags go to stdout, nothing to stderr, exit 0.
// Regression: "-h" printed "flag: help requested" and exited 2; now it
// prints the usage and exits 0.
func TestHelpExitsZero(t *testing.T) {
	ctx := context.Background()
	root := commands()
	paths := append([][]string{nil}, commandPaths(root, nil)...)
	if len(paths) < 15 {
		t.Fatalf("only %d commands found", len(paths))
	}
	for _, p := range paths {
		invocations := [][]string{append(slices.Clone(p), "-h"), append(slices.Clone(p), "--help"), append([]string{"help"}, p...)}
		if c := leaf(root, p); c != nil {
			// -h after arguments, as someone adds it to a line they
			// are writing.
			invocations = append(invocations, append(slices.Clone(p), "DIR", "-h"))
		}
		for _, args := range invocations {
			code, out, errOut := runCLI(ctx, args...)
			want := strings.TrimSpace("usage: onceflow " + strings.Join(p, " "))
			if code != 0 || !strings.HasPrefix(out, want) || errOut != "" {
				t.Errorf("%q: exit %d, stdout %q, stderr %q; want 0 and stdout starting %q", args, code, out, errOut, want)
			}
		}
	}
	_, out, _ := runCLI(ctx, "checkpoint", "inspect", "-h")
	for _, want := range []string{"-o format", "(default table)", "-json", "deprecated: use -o json"} {
		if !strings.Contains(out, want) {
			t.Errorf("checkpoint inspect -h lacks %q:\n%s", want, out)
		}
	}
	_, out, _ = runCLI(ctx, "-h")
	if strings.Contains(out, "  progress ") || strings.Contains(out, "  kafka ") {
		t.Errorf("the old names are listed:\n%s", out)
	}
}

// TestOldNamesStillRun: "progress", "state dump" and "kafka", the names
// before the grouping, run the same commands.
func TestOldNamesStillRun(t *testing.T) {
	ctx := context.Background()
	cp := ledgerCheckpoint(t, 30)
	for _, pair := range [][2][]string{
		{{"progress", "-o", "jsonl", cp}, {"checkpoint", "progress", "-o", "jsonl", cp}},
		{{"state", "dump", cp, "--operator", ledgerOperator}, {"checkpoint", "state", cp, "--operator", ledgerOperator}},
		{{"kafka", "-port", "0", "-topics", "x:0"}, {"dev", "kafka", "-port", "0", "-topics", "x:0"}},
	} {
		c1, out1, err1 := runCLI(ctx, pair[0]...)
		c2, out2, err2 := runCLI(ctx, pair[1]...)
		if c1 != c2 || out1 != out2 || (c1 == 0) != (out1 != "") {
			t.Errorf("%q: exit %d %q %q; %q: exit %d %q %q", pair[0], c1, out1, err1, pair[1], c2, out2, err2)
		}
	}
}

// TestSplitFlagsAsksTheFlagSet: whether a flag takes the next argument
// comes from its flag.Value (IsBoolFlag), not from a list kept by hand.
func TestSplitFlagsAsksTheFlagSet(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Bool("delete", false, "")
	fs.Int("n", 0, "")
	var f format
	fs.Var(legacyJSON{&f, formatJSON}, "json", "") // a custom boolean Value
	fs.Var(formatValue{&f}, "o", "")
	for _, tc := range []struct{ in, want []string }{
		{[]string{"DIR", "--delete", "-n", "3"}, []string{"--delete", "-n", "3", "DIR"}},
		{[]string{"DIR", "--json", "OTHER"}, []string{"--json", "DIR", "OTHER"}},
		{[]string{"DIR", "-o", "json", "OTHER"}, []string{"-o", "json", "DIR", "OTHER"}},
		{[]string{"-n=3", "DIR", "--", "-o"}, []string{"-n=3", "DIR", "-o"}},
		{[]string{"DIR", "--unknown", "OTHER"}, []string{"--unknown", "DIR", "OTHER"}},
		{[]string{"DIR", "-h"}, []string{"-h", "DIR"}},
		{[]string{"-", "-n"}, []string{"-n", "-"}},
	} {
		if got := splitFlags(fs, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("splitFlags(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestVersion(t *testing.T) {
	ctx := context.Background()
	code, out, errOut := runCLI(ctx, "version")
	if code != 0 || !regexp.MustCompile(`(?m)^go +`+regexp.QuoteMeta(runtime.Version())+`$`).MatchString(out) || !strings.Contains(out, "module ") {
		t.Errorf("version: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(ctx, "version", "-o", "json")
	var v struct {
		Module    string `json:"module"`
		Version   string `json:"version"`
		GoVersion string `json:"goVersion"`
	}
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || v.GoVersion != runtime.Version() || v.Module == "" {
		t.Errorf("version -o json: exit %d, %v, %+v\n%s%s", code, err, v, out, errOut)
	}

	// What a binary built from a git checkout carries.
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/onceflow/onceflow", Version: "v0.4.0"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "ba14c187d147"},
			{Key: "vcs.time", Value: "2026-11-30T09:15:00+01:00"}, {Key: "vcs.modified", Value: "true"}}}
	var b bytes.Buffer
	if err := printVersion(&b, buildVersion(bi)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"onceflow   v0.4.0\n", "module     github.com/onceflow/onceflow\n",
		"revision   ba14c187d147 (with uncommitted changes)\n", "committed  2026-11-30T08:15:00Z\n", "go         go1.26.8\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("version table lacks %q:\n%s", want, b.String())
		}
	}
	j, _ := json.Marshal(buildVersion(bi))
	if want := `{"module":"github.com/onceflow/onceflow","version":"v0.4.0","revision":"ba14c187d147","revisionTime":"2026-11-30T09:15:00+01:00","modified":true,"goVersion":"go1.26.8"}`; string(j) != want {
		t.Errorf("version JSON %s, want %s", j, want)
	}
}

// TestOutputFlag runs every command that prints a report with -o table,
// json and jsonl: json is one document (a list is one array), jsonl holds
// the same values one a line, the table is not JSON, and no -o prints the
// command's default.
func TestOutputFlag(t *testing.T) {
	ctx := context.Background()
	cp := ledgerCheckpoint(t, 30)
	landing, auditCP, table, _ := auditFixture(t)
	for _, tc := range []struct {
		name string
		args []string
		list bool
		def  format
	}{
		{"checkpoint inspect", []string{"checkpoint", "inspect", cp}, false, formatTable},
		{"checkpoint progress", []string{"checkpoint", "progress", cp}, true, formatTable},
		{"checkpoint state", []string{"checkpoint", "state", cp, "--operator", ledgerOperator}, true, formatTable},
		{"lake files", []string{"lake", "files", table}, true, formatTable},
		{"lake query", []string{"lake", "query", table}, true, formatJSONL},
		{"lake vacuum", []string{"lake", "vacuum", table}, false, formatTable},
		{"audit", []string{"audit", "--checkpoint", auditCP, "--input", "files:" + landing, "--key", "key", "--value", "amount", "--output", "lake:" + table}, false, formatTable},
		{"version", []string{"version"}, false, formatTable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outs := map[format]string{}
			for _, f := range []format{formatTable, formatJSON, formatJSONL, ""} {
				args := tc.args
				if f != "" {
					args = append(slices.Clone(args), "-o", string(f))
				}
				code, out, errOut := runCLI(ctx, args...)
				if code != 0 {
					t.Fatalf("%q: exit %d: %s", args, code, errOut)
				}
				outs[f] = out
			}
			if outs[""] != outs[tc.def] {
				t.Errorf("without -o it printed\n%s\nwant what -o %s prints:\n%s", outs[""], tc.def, outs[tc.def])
			}
			if tb := strings.TrimSpace(outs[formatTable]); tb == "" || strings.HasPrefix(tb, "{") || strings.HasPrefix(tb, "[") {
				t.Errorf("-o table printed no table:\n%s", outs[formatTable])
			}
			var doc any
			if err := json.Unmarshal([]byte(outs[formatJSON]), &doc); err != nil {
				t.Fatalf("-o json is not one JSON document: %v\n%s", err, outs[formatJSON])
			}
			var lines []any
			for i, l := range strings.Split(strings.TrimSuffix(outs[formatJSONL], "\n"), "\n") {
				var v any
				if err := json.Unmarshal([]byte(l), &v); err != nil {
					t.Fatalf("-o jsonl line %d: %v\n%s", i+1, err, l)
				}
				lines = append(lines, v)
			}
			if !tc.list {
				if len(lines) != 1 || !reflect.DeepEqual(lines[0], doc) {
					t.Errorf("-o jsonl printed %d lines, want the -o json document on one line:\n%s\n%s", len(lines), outs[formatJSONL], outs[formatJSON])
				}
				return
			}
			arr, ok := doc.([]any)
			if !ok || len(arr) == 0 || !reflect.DeepEqual(arr, lines) {
				t.Errorf("-o json is not the array of the -o jsonl lines:\n%s\n%s", outs[formatJSON], outs[formatJSONL])
			}
		})
	}
}

// TestDeprecatedJSONFlag: the --json tests and docs used before -o still
// prints what the matching -o prints.
func TestDeprecatedJSONFlag(t *testing.T) {
	ctx := context.Background()
	cp := ledgerCheckpoint(t, 30)
	landing, auditCP, table, _ := auditFixture(t)
	audit := []string{"audit", "--checkpoint", auditCP, "--input", "files:" + landing, "--key", "key", "--value", "amount", "--output", "lake:" + table}
	for _, tc := range []struct {
		args []string
		to   format
	}{
		{[]string{"checkpoint", "inspect", cp}, formatJSON},
		{audit, formatJSON},
		{[]string{"checkpoint", "progress", cp}, formatJSONL},
		{[]string{"checkpoint", "state", cp, "--operator", ledgerOperator}, formatJSONL},
		{[]string{"lake", "files", table}, formatJSONL},
	} {
		c1, out1, err1 := runCLI(ctx, append(slices.Clone(tc.args), "--json")...)
		c2, out2, err2 := runCLI(ctx, append(slices.Clone(tc.args), "-o", string(tc.to))...)
		if c1 != 0 || c2 != 0 || out1 != out2 {
			t.Errorf("%q: --json exit %d %s%s\n-o %s exit %d %s%s", tc.args, c1, out1, err1, tc.to, c2, out2, err2)
		}
	}
}

var stampSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.BinaryTypes.String},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}},
}, nil)

// stampBase is the event time of row 0; row i is i seconds later.
var stampBase = time.Date(2026, 11, 30, 10, 0, 0, 250e6, time.UTC)

// stamps emits rows 0 … n-1, 4 a batch, keys "a" and "b".
type stamps struct{ n int64 }

func (s stamps) Schema() *arrow.Schema { return stampSchema }
func (s stamps) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (s stamps) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	var a int64
	if err := json.Unmarshal(start, &a); err != nil {
		return nil, err
	}
	return json.Marshal(min(a+4, s.n))
}
func (s stamps) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	var a, b int64
	if err := json.Unmarshal(start, &a); err != nil {
		return err
	}
	if err := json.Unmarshal(end, &b); err != nil {
		return err
	}
	keys := array.NewStringBuilder(memory.DefaultAllocator)
	defer keys.Release()
	ts := array.NewTimestampBuilder(memory.DefaultAllocator, stampSchema.Field(1).Type.(*arrow.TimestampType))
	defer ts.Release()
	for i := a; i < b; i++ {
		keys.Append(string(rune('a' + i%2)))
		ts.Append(arrow.Timestamp(stampBase.Add(time.Duration(i) * time.Second).UnixMilli()))
	}
	kc, tc := keys.NewArray(), ts.NewArray()
	defer kc.Release()
	defer tc.Release()
	rec := array.NewRecordBatch(stampSchema, []arrow.Array{kc, tc}, b-a)
	defer rec.Release()
	return emit(rec)
}

// TestTablesShowRFC3339 runs a query with event times, a watermark and a
// fixed clock, and reads its checkpoint, state and file-sink table as
// tables: every instant is RFC 3339 in UTC, none is Unix milliseconds.
// Regression: checkpoint inspect printed "timestamp 1796040000123,
// watermark 1796032806250"; now it prints the instants.
func TestTablesShowRFC3339(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	cpDir, tableDir := filepath.Join(root, "cp"), filepath.Join(root, "table")
	cp, err := storage.OpenLocal(cpDir, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	ts, err := storage.OpenLocal(tableDir, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	lake, err := filesink.New(ts, filesink.WithClock(func() time.Time { return stampBase.Add(time.Hour) }))
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 11, 30, 12, 0, 0, 123e6, time.UTC)
	stream := engine.ReadStream(stamps{n: 12}).WithWatermark("ts", time.Second).
		GroupBy("key").ID("latest").Agg(batch.Max(batch.Col("ts")).As("latest"))
	q, err := engine.NewQuery(stream, engine.WithName("stamps"), engine.WithCheckpoint(cp), engine.WithSink(lake), engine.WithSink(memsink.New("out")),
		engine.WithOutputMode(engine.Update), engine.WithClock(func() time.Time { return clock }), engine.WithTrigger(engine.AvailableNow()))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Run(ctx); err != nil {
		t.Fatal(err)
	}

	rfc3339 := `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`
	millis := regexp.MustCompile(`\b1\d{12}\b`) // Unix milliseconds of this century
	for _, tc := range []struct {
		args []string
		want []string // regular expressions the output must match
	}{
		{[]string{"checkpoint", "inspect", cpDir}, []string{
			`latest plan +batch 2, timestamp 2026-11-30T12:00:00.123Z, watermark 2026-11-30T10:00:06.25Z, `,
			`query +\S+ \(id \S+, created ` + rfc3339 + `, `,
			`last progress +batch 2 at 2026-11-30T12:00:00.123Z: `,
		}},
		{[]string{"checkpoint", "progress", cpDir}, []string{`(?m)^ *2 +2026-11-30T12:00:00.123Z `}},
		{[]string{"checkpoint", "state", cpDir, "--operator", "latest"}, []string{
			`(?m)^\d +a +2026-11-30T10:00:10.25Z`, `(?m)^\d +b +2026-11-30T10:00:11.25Z`,
		}},
		{[]string{"lake", "files", tableDir}, []string{`(?m) 2 +2026-11-30T11:00:00.25Z$`}},
		{[]string{"lake", "query", "-o", "table", tableDir}, []string{`(?m)^key +latest`, `(?m)^b +2026-11-30T10:00:11.25Z`}},
	} {
		code, out, errOut := runCLI(ctx, tc.args...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", tc.args, code, errOut)
		}
		for _, re := range tc.want {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("%q: output does not match %s:\n%s", tc.args, re, out)
			}
		}
		if m := millis.FindString(out); m != "" {
			t.Errorf("%q: output holds Unix milliseconds %s:\n%s", tc.args, m, out)
		}
	}
	// JSON keeps its fields: the plan's timestamp stays Unix milliseconds.
	_, out, _ := runCLI(ctx, "checkpoint", "inspect", "-o", "json", cpDir)
	if !strings.Contains(out, `"timestampMs": 1796040000123`) {
		t.Errorf("inspect -o json lost timestampMs:\n%s", out)
	}
}
