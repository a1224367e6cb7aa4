package rate

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/onceflow/onceflow/contract"
	"github.com/onceflow/onceflow/source/internal/offset"
	"github.com/onceflow/onceflow/source/internal/pace"
)

// Column names of the schema, in order.
const (
	ColTimestamp   = "timestamp"
	ColValue       = "value"
	ColPartition   = "partition"
	ColKey         = "key"
	ColAmountCents = "amount_cents"
)

// Schema returns the schema of every record a rate source emits.
func Schema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: ColTimestamp, Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: ColValue, Type: arrow.PrimitiveTypes.Int64},
		{Name: ColPartition, Type: arrow.PrimitiveTypes.Int32},
		{Name: ColKey, Type: arrow.BinaryTypes.String},
		{Name: ColAmountCents, Type: arrow.PrimitiveTypes.Int64},
	}, nil)
}

var (
	_ contract.Source             = (*Source)(nil)
	_ contract.AvailableNowSource = (*Source)(nil)
	_ contract.Describer          = (*Source)(nil)
)

// Source is a deterministic row generator. See the package documentation.
type Source struct {
	cfg         config
	schema      *arrow.Schema
	startMicros int64
	keyWidth    int // bytes of the longest key

	mu struct {
		sync.Mutex
		pace    pace.Pace // frozen by PrepareAvailableNow
		capRows int64     // unbounded mode: the cap, -1 until set
	}
}

// offsets is the codec of {"rows":N}.
func offsets() offset.Codec {
	return offset.Codec{Field: "rows", Min: 0, Var: "N", Err: ErrBadOffset}
}

// New returns a rate source configured by opts.
func New(opts ...Option) (*Source, error) {
	cfg := defaults()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Source{
		cfg:         cfg,
		schema:      Schema(),
		startMicros: cfg.start.UnixMicro(),
		keyWidth:    len("k-") + len(strconv.FormatInt(cfg.keys-1, 10)),
	}
	s.mu.pace = pace.New(cfg.rowsPerSecond, cfg.Clock)
	s.mu.capRows = -1
	return s, nil
}

// Schema implements the source contract.
func (s *Source) Schema() *arrow.Schema { return s.schema }

// Description implements the engine's Describer.
func (s *Source) Description() string {
	if s.cfg.unbounded {
		return fmt.Sprintf("rate[unbounded,%d/trigger]", s.step())
	}
	return fmt.Sprintf("rate[%d/s]", s.cfg.rowsPerSecond)
}

// InitialOffset implements the source contract: {"rows":0}.
func (s *Source) InitialOffset(context.Context) (json.RawMessage, error) {
	return EncodeOffset(0), nil
}

// EncodeOffset returns the offset JSON of the position rows (the number of
// rows before it).
func EncodeOffset(rows int64) json.RawMessage { return offsets().Encode(rows) }

// DecodeOffset parses an offset written by EncodeOffset.
func DecodeOffset(off json.RawMessage) (int64, error) { return offsets().Decode(off) }

func (s *Source) step() int64 {
	if s.cfg.maxPerTrigger > 0 {
		return s.cfg.maxPerTrigger
	}
	return s.cfg.rowsPerSecond
}

// LatestOffset implements the source contract. Rows become available at
// the configured rate from the moment New was called, appended after the
// start of the first LatestOffset call; see the package documentation.
func (s *Source) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	from, err := DecodeOffset(start)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var end int64
	if s.cfg.unbounded {
		end = from + s.step()
		if s.mu.pace.Frozen() {
			if s.mu.capRows < 0 {
				s.mu.capRows = end
			}
			end = min(end, s.mu.capRows)
		}
	} else {
		end = s.mu.pace.Reach(from)
		if s.cfg.maxPerTrigger > 0 {
			end = min(end, from+s.cfg.maxPerTrigger)
		}
	}
	if end <= from {
		return start, nil
	}
	return EncodeOffset(end), nil
}

// PrepareAvailableNow implements the engine's AvailableNowSource: from now
// on LatestOffset reaches no further than the rows the clock allows at this
// call (in unbounded mode: one more trigger's worth beyond the next start).
func (s *Source) PrepareAvailableNow(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.pace.Freeze()
	s.mu.capRows = -1
	return nil
}

// EventTime returns the event time of the row at offset, in microseconds
// since the Unix epoch: start time + offset/rowsPerSecond seconds.
func (s *Source) EventTime(offset int64) int64 {
	r := s.cfg.rowsPerSecond
	return s.startMicros + (offset/r)*1_000_000 + (offset%r)*1_000_000/r
}

// Amount returns the amount_cents of the row with the given value: a fixed
// hash of the value (splitmix64), between 1 and 100000 inclusive.
func Amount(value int64) int64 {
	z := uint64(value) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return int64(z%100_000) + 1
}

// Read implements the source contract: it emits the rows at offsets
// [start, end) in offset order, in records of at most the batch size. Each
// record is released after emit returns.
func (s *Source) Read(ctx context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	from, to, err := offsets().Range(start, end)
	if err != nil {
		return err
	}
	mem := s.cfg.Mem
	tsB := array.NewTimestampBuilder(mem, s.schema.Field(0).Type.(*arrow.TimestampType))
	defer tsB.Release()
	valB := array.NewInt64Builder(mem)
	defer valB.Release()
	partB := array.NewInt32Builder(mem)
	defer partB.Release()
	keyB := array.NewStringBuilder(mem)
	defer keyB.Release()
	amtB := array.NewInt64Builder(mem)
	defer amtB.Release()

	var key []byte
	parts, keys := int64(s.cfg.partitions), s.cfg.keys
	for o := from; o < to; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(int64(s.cfg.BatchSize), to-o)
		tsB.Reserve(int(n))
		valB.Reserve(int(n))
		partB.Reserve(int(n))
		amtB.Reserve(int(n))
		keyB.Reserve(int(n))
		keyB.ReserveData(int(n) * s.keyWidth)
		for v := o; v < o+n; v++ {
			tsB.UnsafeAppend(arrow.Timestamp(s.EventTime(v)))
			valB.UnsafeAppend(v)
			partB.UnsafeAppend(int32(v % parts))
			key = strconv.AppendInt(append(key[:0], "k-"...), v%keys, 10)
			keyB.UnsafeAppend(key)
			amtB.UnsafeAppend(Amount(v))
		}
		o += n
		if err := s.emitRecord(n, emit, tsB, valB, partB, keyB, amtB); err != nil {
			return err
		}
	}
	return nil
}

func (s *Source) emitRecord(n int64, emit func(arrow.RecordBatch) error, bs ...array.Builder) error {
	cols := make([]arrow.Array, len(bs))
	for i, b := range bs {
		cols[i] = b.NewArray()
	}
	rec := array.NewRecordBatch(s.schema, cols, n)
	for _, c := range cols {
		c.Release()
	}
	defer rec.Release()
	return emit(rec)
}
