package engine

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/batch"
)

var rewriteOpConf = flag.Bool("rewrite-opconf", false, "rewrite testdata/operator-conf.golden")

// TestOperatorConfGolden pins what a restart compares (the OperatorConf
// recorded in offsets/N: id, kind, keys, key and state schemas) and the
// output and late-row schemas of a set of queries. A checkpoint written by
// an earlier version of onceflow is refused on restart when these change,
// so a refactor of the aggregation code must leave them byte-identical.
func TestOperatorConfGolden(t *testing.T) {
	wm := func() *Stream { return ReadStream(&scriptSource{}).WithWatermark("ts", 5*time.Second) }
	cases := []struct {
		name   string
		stream *Stream
	}{
		{"groupby named", ReadStream(newSeq(0, 0, 1)).GroupBy("key").Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"))},
		{"groupby default names", ReadStream(newSeq(0, 0, 1)).GroupBy("key").ID("every").Agg(
			batch.CountRows(), batch.Count(batch.Col("amount")), batch.Sum(batch.Col("amount")), batch.Avg(batch.Col("amount")),
			batch.Min(batch.Col("i")), batch.Max(batch.Col("key")), batch.First(batch.Col("key")), batch.Last(batch.Col("amount")), batch.CountDistinct(batch.Col("key")),
			batch.Sum(batch.Col("i")).PerBatch(), batch.CountRows().PerBatch().As("batch_n"))},
		{"groupby two keys", ReadStream(newSeq(0, 0, 1)).GroupBy("key", "amount").Agg(batch.Max(batch.Col("i")).As("latest"))},
		{"tumbling window", wm().GroupByWindow(TumblingWindow("ts", time.Minute), "key").Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"))},
		{"sliding window", wm().GroupByWindow(SlidingWindow("ts", time.Minute, 20*time.Second), "key").ID("slide").Agg(batch.Avg(batch.Col("amount")), batch.Min(batch.Col("ts")))},
		{"session window", wm().GroupByWindow(SessionWindow("ts", 10*time.Second), "key").Agg(
			batch.CountRows(), batch.Sum(batch.Col("amount")).As("total"), batch.Avg(batch.Col("amount")), batch.Min(batch.Col("amount")), batch.Max(batch.Col("ts")))},
		{"dedup", ReadStream(newSeq(0, 0, 1)).DropDuplicates("key").Stream},
		{"dedup named", ReadStream(newSeq(0, 0, 1)).DropDuplicates("key", "amount").ID("ids")},
		{"dedup within watermark", wm().DropDuplicatesWithinWatermark("key").Stream},
		{"dedup with time key", wm().DropDuplicates("key", "ts").Stream},
	}
	var b strings.Builder
	for _, tc := range cases {
		cfg := defaultConfig()
		cfg.partitions = 1
		if strings.HasPrefix(tc.name, "session") {
			cfg.mode = Append // sessions refuse the default, update
		}
		ex, err := bindStream(tc.stream, &cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		// Params is new (compared at restart only when the checkpoint
		// recorded it), so checkpoints written without it restart.
		oc := ex.ops[0].op.conf()
		oc.Params = ""
		conf, err := json.MarshalIndent(oc, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "== %s\nconf %s\noutput %s\nlate rows %s\n", tc.name, conf, ex.outSchema, ex.ops[0].op.inputSchema(0))
		ex.release()
	}
	path := filepath.Join("testdata", "operator-conf.golden")
	if *rewriteOpConf {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -rewrite-opconf once to create it)", err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("operator descriptions changed; a restart of an existing checkpoint would be refused.\ngot:\n%s\nwant:\n%s", got, want)
	}
}
