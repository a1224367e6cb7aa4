package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/storage"
)

// seqSource emits rows i = 0, 1, 2, … with key "k<i%keys>" and amount
// i%10; avail says how many exist, perTrigger caps a batch.
type seqSource struct {
	avail      atomic.Int64
	perTrigger int64
	keys       int64
	reads      atomic.Int64
}

var seqSchema = arrow.NewSchema([]arrow.Field{
	{Name: "i", Type: arrow.PrimitiveTypes.Int64},
	{Name: "key", Type: arrow.BinaryTypes.String},
	{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
}, nil)

func newSeq(avail, perTrigger, keys int64) *seqSource {
	s := &seqSource{perTrigger: perTrigger, keys: keys}
	s.avail.Store(avail)
	return s
}

func (s *seqSource) Schema() *arrow.Schema { return seqSchema }
func (s *seqSource) Description() string   { return "seq" }
func (s *seqSource) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage(`0`), nil
}
func (s *seqSource) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	n, err := strconv.ParseInt(string(start), 10, 64)
	if err != nil {
		return nil, err
	}
	end := s.avail.Load()
	if s.perTrigger > 0 {
		end = min(end, n+s.perTrigger)
	}
	end = max(end, n)
	return json.RawMessage(strconv.FormatInt(end, 10)), nil
}
func (s *seqSource) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	s.reads.Add(1)
	a, _ := strconv.ParseInt(string(start), 10, 64)
	b, _ := strconv.ParseInt(string(end), 10, 64)
	mem := memory.DefaultAllocator
	ib, kb, ab := array.NewInt64Builder(mem), array.NewStringBuilder(mem), array.NewInt64Builder(mem)
	defer ib.Release()
	defer kb.Release()
	defer ab.Release()
	for i := a; i < b; i++ {
		ib.Append(i)
		kb.Append("k" + strconv.FormatInt(i%s.keys, 10))
		ab.Append(i % 10)
	}
	cols := []arrow.Array{ib.NewArray(), kb.NewArray(), ab.NewArray()}
	rec := array.NewRecordBatch(seqSchema, cols, b-a)
	for _, c := range cols {
		c.Release()
	}
	defer rec.Release()
	return emit(rec)
}

func localStore(t *testing.T) storage.Store {
	t.Helper()
	s, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func runQuery(t *testing.T, stream *Stream, opts ...Option) (*Query, error) {
	t.Helper()
	q, err := NewQuery(stream, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return q, q.Run(ctx)
}

func TestStatelessAvailableNow(t *testing.T) {
	src := newSeq(25, 10, 3)
	sink := memsink.New("out")
	cp := localStore(t)
	stream := ReadStream(src).
		Where(batch.Gt(batch.Col("amount"), batch.Lit(int64(4)))).
		Select(batch.As(batch.Col("i"), "i"), batch.As(batch.Mul(batch.Col("amount"), batch.Lit(int64(100))), "cents"))
	if _, err := runQuery(t, stream, WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow())); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(sink.BatchIDs()); got != "[0 1 2]" {
		t.Fatalf("batches %s, want [0 1 2]", got)
	}
	var want [][]any
	for i := int64(0); i < 25; i++ {
		if i%10 > 4 {
			want = append(want, []any{i, (i % 10) * 100})
		}
	}
	if got := fmt.Sprint(sink.All()); got != fmt.Sprint(want) {
		t.Fatalf("rows\n got %v\nwant %v", got, want)
	}
	// A second AvailableNow run with nothing new runs no batch.
	src.avail.Store(25)
	if _, err := runQuery(t, stream, WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow())); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(sink.BatchIDs()); got != "[0 1 2]" {
		t.Fatalf("after idle run: batches %s", got)
	}
}

func totals(rows [][]any) map[string]string {
	m := map[string]string{}
	for _, r := range rows {
		m[r[0].(string)] = fmt.Sprint(r[1:])
	}
	return m
}

func TestAggregateUpdateAndComplete(t *testing.T) {
	for _, mode := range []OutputMode{Update, Complete} {
		t.Run(mode.String(), func(t *testing.T) {
			src := newSeq(100, 30, 4)
			sink := memsink.New("out")
			stream := ReadStream(src).GroupBy("key").Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"))
			if _, err := runQuery(t, stream, WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow()), WithOutputMode(mode), WithStatePartitions(3)); err != nil {
				t.Fatal(err)
			}
			ids := sink.BatchIDs()
			if len(ids) != 4 {
				t.Fatalf("batches %v", ids)
			}
			// The last value per key across batches is the total.
			final := map[string]string{}
			for _, id := range ids {
				b := sink.Batch(id)
				if mode == Complete && len(b) != 4 {
					t.Fatalf("complete mode batch %d has %d rows, want 4", id, len(b))
				}
				for k, v := range totals(b) {
					final[k] = v
				}
			}
			want := map[string]string{}
			sum, n := map[string]int64{}, map[string]int64{}
			for i := int64(0); i < 100; i++ {
				k := "k" + strconv.FormatInt(i%4, 10)
				sum[k] += i % 10
				n[k]++
			}
			for k := range sum {
				want[k] = fmt.Sprint([]any{sum[k], n[k]})
			}
			if fmt.Sprint(final) != fmt.Sprint(want) {
				t.Fatalf("totals\n got %v\nwant %v", final, want)
			}
		})
	}
}

// failingSink fails batch failAt once.
type failingSink struct {
	*memsink.Sink
	failAt int64
	failed bool
}

func (f *failingSink) AddBatch(ctx context.Context, id int64, s *arrow.Schema, r []arrow.RecordBatch) error {
	if id == f.failAt && !f.failed {
		f.failed = true
		return errors.New("injected sink failure")
	}
	return f.Sink.AddBatch(ctx, id, s, r)
}

func TestRecoveryRerunsThePlannedBatch(t *testing.T) {
	cp := localStore(t)
	src := newSeq(50, 10, 5)
	sink := &failingSink{Sink: memsink.New("out"), failAt: 2}
	stream := ReadStream(src).GroupBy("key").Agg(batch.Sum(batch.Col("amount")).As("total"))
	_, err := runQuery(t, stream, WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()))
	if err == nil || !strings.Contains(err.Error(), "injected sink failure") {
		t.Fatalf("want the sink failure, got %v", err)
	}
	offsets := offsetlog.New[OffsetsEntry](cp, checkpoint.OffsetsDir)
	plan, err := offsets.Get(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	// More data arrives; the re-run must still read exactly [20, 30).
	src.avail.Store(1000)
	src2 := newSeq(1000, 10, 5)
	stream2 := ReadStream(src2).GroupBy("key").Agg(batch.Sum(batch.Col("amount")).As("total"))
	q, err := runQuery(t, stream2, WithCheckpoint(cp), WithSink(sink), WithTrigger(Once()))
	if err != nil {
		t.Fatal(err)
	}
	if string(plan.Sources[0].Start) != "20" || string(plan.Sources[0].End) != "30" {
		t.Fatalf("plan of batch 2: %s..%s", plan.Sources[0].Start, plan.Sources[0].End)
	}
	// Once: the recovered batch 2, then one new batch 3.
	if got := fmt.Sprint(sink.BatchIDs()); got != "[0 1 2 3]" {
		t.Fatalf("batches %s", got)
	}
	if p := q.LastProgress(); p == nil || p.BatchID != 3 || string(p.Sources[0].StartOffset) != "30" {
		t.Fatalf("last progress %+v", p)
	}
	// Batch 2's totals: state from batches 0-1 plus rows 20..29 once.
	got := totals(sink.Batch(2))
	want := map[string]string{}
	for k := int64(0); k < 5; k++ {
		var s int64
		for i := int64(0); i < 30; i++ {
			if i%5 == k {
				s += i % 10
			}
		}
		want["k"+strconv.FormatInt(k, 10)] = fmt.Sprint([]any{s})
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("batch 2 after recovery\n got %v\nwant %v", got, want)
	}
}

// blockingSink blocks in AddBatch until released.
type blockingSink struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingSink) AddBatch(ctx context.Context, _ int64, _ *arrow.Schema, _ []arrow.RecordBatch) error {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func TestSecondDriverFailsAtOnce(t *testing.T) {
	cp := localStore(t)
	bs := &blockingSink{entered: make(chan struct{}, 1), release: make(chan struct{})}
	q1, err := NewQuery(ReadStream(newSeq(10, 0, 2)), WithCheckpoint(cp), WithSink(bs), WithTrigger(Once()))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- q1.Run(context.Background()) }()
	<-bs.entered
	q2, err := NewQuery(ReadStream(newSeq(10, 0, 2)), WithCheckpoint(cp), WithSink(memsink.New("b")), WithTrigger(Once()))
	if err != nil {
		t.Fatal(err)
	}
	err = q2.Run(context.Background())
	if !errors.Is(err, ErrConcurrentDriver) {
		t.Fatalf("second driver: %v, want ErrConcurrentDriver", err)
	}
	close(bs.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestIncompatibleRestart(t *testing.T) {
	base := func(src Source) *Stream {
		return ReadStream(src).GroupBy("key").ID("totals").Agg(batch.Sum(batch.Col("amount")))
	}
	cases := []struct {
		name    string
		stream  func(Source) *Stream
		opts    []Option
		wantErr string // empty: allowed
	}{
		{"partition count", base, []Option{WithStatePartitions(5)}, "state partitions changed from 3 to 5"},
		{"grouping key", func(s Source) *Stream {
			return ReadStream(s).GroupBy("i").ID("totals").Agg(batch.Sum(batch.Col("amount")))
		}, nil, `operator "totals" grouping key changed`},
		{"operator removed", func(s Source) *Stream { return ReadStream(s) }, nil, `stateful operator "totals" was removed`},
		{"added filter", func(s Source) *Stream {
			return ReadStream(s).Where(batch.Ge(batch.Col("amount"), batch.Lit(int64(0)))).GroupBy("key").ID("totals").Agg(batch.Sum(batch.Col("amount")))
		}, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cp := localStore(t)
			sink := memsink.New("out")
			if _, err := runQuery(t, base(newSeq(20, 10, 3)), WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(3)); err != nil {
				t.Fatal(err)
			}
			before, _ := cp.List(context.Background(), "")
			opts := append([]Option{WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(3)}, tc.opts...)
			_, err := runQuery(t, tc.stream(newSeq(30, 10, 3)), opts...)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("allowed change refused: %v", err)
				}
				// State intact: batch 2 continues the totals.
				got := totals(sink.Batch(2))
				if got["k0"] != fmt.Sprint([]any{int64(0 + 3 + 6 + 9 + 2 + 5 + 8 + 1 + 4 + 7)}) {
					t.Fatalf("state lost across allowed change: %v", got)
				}
				return
			}
			if !errors.Is(err, ErrIncompatibleRestart) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want ErrIncompatibleRestart mentioning %q", err, tc.wantErr)
			}
			after, _ := cp.List(context.Background(), "")
			if len(before) != len(after) {
				t.Fatalf("refused restart changed the checkpoint: %d files before, %d after", len(before), len(after))
			}
		})
	}
}

func TestStopFinishesTheBatchInFlight(t *testing.T) {
	cp := localStore(t)
	sink := memsink.New("out")
	src := newSeq(1<<40, 100, 3)
	var q *Query
	var n atomic.Int64
	q, err := NewQuery(ReadStream(src), WithCheckpoint(cp), WithSink(sink), WithTrigger(Every(0)),
		WithProgressListener(func(p Progress) {
			if n.Add(1) == 3 {
				q.Stop()
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	ids, _ := offsetlog.New[CommitEntry](cp, checkpoint.CommitsDir).List(context.Background())
	plans, _ := offsetlog.New[OffsetsEntry](cp, checkpoint.OffsetsDir).List(context.Background())
	if len(ids) != 3 || len(plans) != 3 {
		t.Fatalf("after Stop: %d commits, %d plans; want 3 and 3 (nothing left to re-run)", len(ids), len(plans))
	}
}

func TestPurgeKeepsTheRetention(t *testing.T) {
	cp := localStore(t)
	stream := ReadStream(newSeq(200, 10, 3)).GroupBy("key").Agg(batch.CountRows())
	if _, err := runQuery(t, stream, WithCheckpoint(cp), WithSink(memsink.New("o")), WithTrigger(AvailableNow()), WithMinBatchesToRetain(4), WithSnapshotEvery(3)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, dir := range []string{checkpoint.OffsetsDir, checkpoint.CommitsDir, checkpoint.ProgressDir} {
		ids, err := offsetlog.New[json.RawMessage](cp, dir).List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(ids) != "[16 17 18 19]" {
			t.Errorf("%s keeps %v, want [16 17 18 19]", dir, ids)
		}
	}
	// A restart still loads the state and continues.
	sink := memsink.New("o2")
	if _, err := runQuery(t, ReadStream(newSeq(203, 10, 3)).GroupBy("key").Agg(batch.CountRows()), WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()), WithMinBatchesToRetain(4)); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"k0": "[68]", "k1": "[68]", "k2": "[67]"}
	if got := totals(sink.Batch(20)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("batch 20 after restart: %v, want %v", got, want)
	}
}

func TestBatchIDColumn(t *testing.T) {
	sink := memsink.New("out")
	stream := ReadStream(newSeq(30, 10, 3)).GroupBy("key").Agg(batch.Sum(batch.Col("amount")).PerBatch().As("batch_sum")).WithBatchIDColumn("batch_id")
	if _, err := runQuery(t, stream, WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow())); err != nil {
		t.Fatal(err)
	}
	for _, id := range sink.BatchIDs() {
		for _, r := range sink.Batch(id) {
			if r[2] != id {
				t.Fatalf("batch %d row %v carries batch id %v", id, r, r[2])
			}
		}
	}
	if len(sink.BatchIDs()) != 3 {
		t.Fatalf("batches %v", sink.BatchIDs())
	}
}

// aheadSink claims to have applied batches up to last.
type aheadSink struct {
	*memsink.Sink
	last int64
}

func (a *aheadSink) LastBatchID(context.Context) (int64, bool, error) {
	return a.last, a.last >= 0, nil
}

func TestSinkAheadOfCheckpointIsRefused(t *testing.T) {
	cp := localStore(t)
	src := newSeq(30, 10, 3)
	if _, err := runQuery(t, ReadStream(src), WithCheckpoint(cp), WithSink(memsink.New("a")), WithTrigger(AvailableNow())); err != nil {
		t.Fatal(err)
	}
	// The checkpoint planned batches 0..2. A sink at 3 (batch 3 applied
	// from a newer copy of the checkpoint) must stop the query; a sink at 2
	// is in step.
	_, err := runQuery(t, ReadStream(src), WithCheckpoint(cp), WithSink(&aheadSink{Sink: memsink.New("b"), last: 3}), WithTrigger(AvailableNow()))
	if !errors.Is(err, ErrIncompatibleRestart) || !strings.Contains(err.Error(), "has applied batch 3") {
		t.Fatalf("sink ahead of the checkpoint: %v", err)
	}
	if _, err := runQuery(t, ReadStream(src), WithCheckpoint(cp), WithSink(&aheadSink{Sink: memsink.New("c"), last: 2}), WithTrigger(AvailableNow())); err != nil {
		t.Fatalf("sink in step with the checkpoint: %v", err)
	}
}
