package monitor

import (
	"context"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/contract"
	"github.com/onceflow/onceflow/storage"
)

// seqSource emits rows i = 0, 1, 2, … with key "k<i%keys>" and amount
// i%10; avail says how many exist, perTrigger caps a batch.
type seqSource struct {
	avail      atomic.Int64
	perTrigger int64
	keys       int64
}

var _ contract.Source = (*seqSource)(nil)

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
	return json.RawMessage(strconv.FormatInt(max(end, n), 10)), nil
}
func (s *seqSource) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
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

// blockingSink blocks in AddBatch until released.
type blockingSink struct {
	entered chan struct{}
	release chan struct{}
}

var _ contract.Sink = (*blockingSink)(nil)

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

// fakeNow is a settable clock for the listener.
type fakeNow struct{ ns atomic.Int64 }

func (f *fakeNow) now() time.Time      { return time.Unix(0, f.ns.Load()) }
func (f *fakeNow) add(d time.Duration) { f.ns.Add(int64(d)) }
func newFakeNow() *fakeNow {
	f := &fakeNow{}
	f.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return f
}
