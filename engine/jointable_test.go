package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/memsink"
)

// tRow is one change of a test table: set key to val, or delete it.
type tRow struct {
	key, val string
	del      bool
}

type tSource struct {
	batches [][]tRow
	limit   atomic.Int64
}

var tSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.BinaryTypes.String},
	{Name: "val", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "del", Type: arrow.FixedWidthTypes.Boolean},
}, nil)

func newTSource(batches [][]tRow) *tSource {
	s := &tSource{batches: batches}
	s.limit.Store(int64(len(batches)))
	return s
}

func (s *tSource) Schema() *arrow.Schema { return tSchema }
func (s *tSource) Description() string   { return "table" }
func (s *tSource) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (s *tSource) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	k, _ := strconv.Atoi(string(start))
	return json.RawMessage(strconv.Itoa(min(k+1, int(s.limit.Load())))), nil
}
func (s *tSource) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	a, _ := strconv.Atoi(string(start))
	b, _ := strconv.Atoi(string(end))
	mem := memory.DefaultAllocator
	kb, vb, db := array.NewStringBuilder(mem), array.NewStringBuilder(mem), array.NewBooleanBuilder(mem)
	defer kb.Release()
	defer vb.Release()
	defer db.Release()
	n := 0
	for _, bt := range s.batches[a:b] {
		for _, r := range bt {
			kb.Append(r.key)
			if r.del {
				vb.AppendNull()
			} else {
				vb.Append(r.val)
			}
			db.Append(r.del)
			n++
		}
	}
	cols := []arrow.Array{kb.NewArray(), vb.NewArray(), db.NewArray()}
	rec := array.NewRecordBatch(tSchema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	defer rec.Release()
	return emit(rec)
}

func tScript(rng *rand.Rand, batches int) (stream [][]jRow, table [][]tRow) {
	id := int64(0)
	for b := range batches {
		var s []jRow
		for range rng.IntN(7) {
			id++
			key := string(rune('a' + rng.IntN(6)))
			if rng.IntN(9) == 0 {
				key = ""
			}
			s = append(s, jRow{key: key, sec: int64(b*10 + rng.IntN(10)), id: id})
		}
		var t []tRow
		for range rng.IntN(5) {
			id++
			t = append(t, tRow{key: string(rune('a' + rng.IntN(6))), val: "v" + strconv.FormatInt(id, 10), del: rng.IntN(4) == 0})
		}
		stream, table = append(stream, s), append(table, t)
	}
	return stream, table
}

// tModel applies each batch's table changes in order, then looks each
// stream row of the batch up: per batch, the sorted output rows.
func tModel(kind JoinKind, stream [][]jRow, table [][]tRow) (out [][]string, dropped int64) {
	tbl := map[string]string{}
	for b := range stream {
		for _, c := range table[b] {
			if c.del {
				delete(tbl, c.key)
			} else {
				tbl[c.key] = c.val
			}
		}
		var rows []string
		for _, r := range stream[b] {
			k := r.key
			if k == "" {
				k = "null"
			}
			v, ok := tbl[r.key]
			switch {
			case ok && r.key != "":
				rows = append(rows, fmt.Sprintf("%s %d %d %s %s false", k, r.sec, r.id, r.key, v))
			case kind == LeftOuter:
				rows = append(rows, fmt.Sprintf("%s %d %d null null null", k, r.sec, r.id))
			default:
				dropped++
			}
		}
		sort.Strings(rows)
		out = append(out, rows)
	}
	return out, dropped
}

func tRows(rows [][]any) []string {
	var out []string
	for _, r := range rows {
		s := make([]string, len(r))
		for i, v := range r {
			s[i] = fmt.Sprint(v)
			if v == nil {
				s[i] = "null"
			}
			if ts, ok := v.(time.Time); ok {
				s[i] = strconv.FormatInt(ts.Unix(), 10)
			}
		}
		out = append(out, strings.Join(s, " "))
	}
	sort.Strings(out)
	return out
}

func tableStream(s *jSource, t *tSource, kind JoinKind) *Stream {
	table := ChangelogTable(ReadStream(t), "key").DeleteWhen(batch.Col("del"))
	return ReadStream(s).JoinTable(table, kind, On("key", "key")).ID("t")
}

// TestTableJoinMatchesModel runs Inner and LeftOuter stream-table joins
// over random changelogs (upserts, deletes, repeats of a key in one batch,
// null stream keys) and compares every batch with a reference that applies
// the batch's table changes first, then looks the stream rows up.
func TestTableJoinMatchesModel(t *testing.T) {
	for seed := range 5 {
		for _, kind := range []JoinKind{Inner, LeftOuter} {
			t.Run(fmt.Sprintf("%s/seed%d", kind, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(seed), 3))
				stream, table := tScript(rng, 10)
				sink := memsink.New("out")
				var progress []Progress
				_, err := runQuery(t, tableStream(newJSource("s", stream), newTSource(table), kind), WithCheckpoint(localStore(t)), WithSink(sink),
					WithTrigger(AvailableNow()), WithStatePartitions(3), WithProgressListener(func(p Progress) { progress = append(progress, p) }))
				if err != nil {
					t.Fatal(err)
				}
				want, wantDropped := tModel(kind, stream, table)
				if len(sink.All()) == 0 {
					t.Fatal("no output")
				}
				for b := range want {
					got := tRows(sink.Batch(int64(b)))
					if strings.Join(got, "\n") != strings.Join(want[b], "\n") {
						t.Fatalf("batch %d:\ngot  %v\nwant %v", b, got, want[b])
					}
				}
				dropped := int64(0)
				for _, p := range progress {
					dropped += p.StateOperators[0].CustomMetrics["droppedNoMatch"]
				}
				if dropped != wantDropped {
					t.Errorf("dropped: got %d, want %d", dropped, wantDropped)
				}
			})
		}
	}
}

// TestTableJoinRestartEqualsOneRun stops a stream-table join twice and
// restarts it on its checkpoint (the table reloads from state): every
// batch's output, in order, is the uninterrupted run's.
func TestTableJoinRestartEqualsOneRun(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	stream, table := tScript(rng, 12)
	run := func(stops []int) *memsink.Sink {
		s, tb := newJSource("s", stream), newTSource(table)
		sink := memsink.New("out")
		cp := localStore(t)
		for _, stop := range stops {
			s.limit.Store(int64(stop))
			tb.limit.Store(int64(stop))
			if _, err := runQuery(t, tableStream(s, tb, LeftOuter), WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(3)); err != nil {
				t.Fatal(err)
			}
		}
		return sink
	}
	one, three := run([]int{len(stream)}), run([]int{4, 9, len(stream)})
	if fmt.Sprint(one.BatchIDs()) != fmt.Sprint(three.BatchIDs()) {
		t.Fatalf("batches: %v vs %v", one.BatchIDs(), three.BatchIDs())
	}
	for _, id := range one.BatchIDs() {
		if a, b := fmt.Sprint(one.Batch(id)), fmt.Sprint(three.Batch(id)); a != b {
			t.Fatalf("batch %d differs:\none run  %s\nrestarts %s", id, a, b)
		}
	}
}
