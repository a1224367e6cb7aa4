package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/cockroachdb/pebble/v2"

	"github.com/onceflow/onceflow/statestore"
)

// The time index (Options.TimeIndex): for every row, the key
//
//	't' | uint64(t) XOR 1<<63 (big endian) | the row's key encoding
//
// with an empty value, where t is the raw value of the indexed timestamp
// column (math.MinInt64 for a null), so that the index sorts by time, and
// the rows a watermark expires are one forward range of it. It is kept by
// apply, in the same pebble batches as the rows, so a working copy's index
// always matches its rows; the key 'i' records which column it indexes and
// the version it was last written at: a copy whose 'i' does not name the
// version 'm' holds and the column asked for (a build without the index
// wrote it, or another column was indexed) has its index rebuilt from its
// rows once. The delta files do not carry the index: it is a property of
// the working copy, rebuilt from the rows wherever they come from.
var (
	indexSpecKey = []byte("i")
	indexLower   = []byte("t")
	indexUpper   = []byte("u")
)

const indexPrefix = byte('t')

// timeIndex is a Store's indexed column; col < 0 for none.
type timeIndex struct {
	name string
	col  int // in Schema()
	unit arrow.TimeUnit
}

// bindTimeIndex resolves Options.TimeIndex in schema.
func bindTimeIndex(name string, schema *arrow.Schema) (timeIndex, error) {
	if name == "" {
		return timeIndex{col: -1}, nil
	}
	idx := schema.FieldIndices(name)
	if len(idx) != 1 {
		return timeIndex{}, fmt.Errorf("pebblestore: options: TimeIndex %q is not a column of the state %s", name, schema)
	}
	ts, ok := schema.Field(idx[0]).Type.(*arrow.TimestampType)
	if !ok {
		return timeIndex{}, fmt.Errorf("pebblestore: options: TimeIndex %q is %s, not a timestamp", name, schema.Field(idx[0]).Type)
	}
	return timeIndex{name: name, col: idx[0], unit: ts.Unit}, nil
}

// indexTime is the order-preserving 8 bytes of row i's time in rec's
// column col.
func indexTime(rec arrow.RecordBatch, col, i int) uint64 {
	c := rec.Column(col).(*array.Timestamp)
	if c.IsNull(i) {
		return orderTime(math.MinInt64)
	}
	return orderTime(int64(c.Value(i)))
}

func orderTime(v int64) uint64 { return uint64(v) ^ 1<<63 }

// indexKey appends the index key of time t and data key dk ('d' + key
// encoding).
func indexKey(dst []byte, t uint64, dk []byte) []byte {
	dst = append(dst, indexPrefix)
	dst = binary.BigEndian.AppendUint64(dst, t)
	return append(dst, dk[1:]...)
}

// rowTime reads the indexed column of an encoded row: it skips the
// columns before it.
func (s *Store) rowTime(row []byte) (uint64, error) {
	b := row
	var err error
	for c := 0; c < s.idx.col; c++ {
		if b, err = skipColumn(s.schema.Field(c).Type, b); err != nil {
			return 0, fmt.Errorf("column %q: %w", s.schema.Field(c).Name, err)
		}
	}
	if len(b) < 9 {
		return 0, fmt.Errorf("column %q: %w", s.idx.name, errShortRow)
	}
	if b[0] == 0 {
		return orderTime(math.MinInt64), nil
	}
	return orderTime(int64(binary.LittleEndian.Uint64(b[1:9]))), nil
}

// skipColumn returns b after one encoded column of type dt.
func skipColumn(dt arrow.DataType, b []byte) ([]byte, error) {
	if len(b) < 1 {
		return nil, errShortRow
	}
	valid := b[0] == 1
	b = b[1:]
	switch t := dt.(type) {
	case *arrow.BooleanType:
		if len(b) < 1 {
			return nil, errShortRow
		}
		return b[1:], nil
	case *arrow.StringType, *arrow.LargeStringType, *arrow.BinaryType, *arrow.LargeBinaryType:
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return nil, errShortRow
		}
		return b[k+int(n):], nil
	case *arrow.StructType:
		var err error
		for _, f := range t.Fields() {
			if b, err = skipColumn(f.Type, b); err != nil {
				return nil, err
			}
		}
		return b, nil
	case arrow.ListLikeType:
		if !valid {
			return b, nil
		}
		n, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, errShortRow
		}
		b = b[k:]
		var err error
		for j := uint64(0); j < n; j++ {
			if b, err = skipColumn(t.Elem(), b); err != nil {
				return nil, err
			}
		}
		return b, nil
	case arrow.FixedWidthDataType:
		w := t.BitWidth() / 8
		if len(b) < w {
			return nil, errShortRow
		}
		return b[w:], nil
	}
	return nil, fmt.Errorf("type %s is not in the row encoding", dt)
}

// indexWriter keeps the index within one apply.
type indexWriter struct {
	s   *Store
	key []byte
}

// upsert indexes row i of r (Schema()) whose data key is dk; b is an
// indexed batch when the indexed column is a value column, so that the
// row's previous time (which may differ) is found and unindexed.
func (w *indexWriter) upsert(b *pebble.Batch, r arrow.RecordBatch, i int, dk []byte) error {
	s := w.s
	t := indexTime(r, s.idx.col, i)
	if s.idx.col >= s.nkeys {
		if err := w.unindexOld(b, dk, &t); err != nil {
			return err
		}
	}
	w.key = indexKey(w.key[:0], t, dk)
	return b.Set(w.key, nil, nil)
}

// remove unindexes the row of key row i of r (KeySchema()) whose data key
// is dk.
func (w *indexWriter) remove(b *pebble.Batch, r arrow.RecordBatch, i int, dk []byte) error {
	s := w.s
	if s.idx.col < s.nkeys {
		w.key = indexKey(w.key[:0], indexTime(r, s.idx.col, i), dk)
		return b.Delete(w.key, nil)
	}
	return w.unindexOld(b, dk, nil)
}

// unindexOld deletes the index entry of dk's stored row, unless its time
// is keep's.
func (w *indexWriter) unindexOld(b *pebble.Batch, dk []byte, keep *uint64) error {
	old, closer, err := b.Get(dk)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	t, err := w.s.rowTime(old)
	closer.Close()
	if err != nil {
		return fmt.Errorf("the stored row of key %x does not decode (%w)", dk[1:], err)
	}
	if keep != nil && *keep == t {
		return nil
	}
	w.key = indexKey(w.key[:0], t, dk)
	return b.Delete(w.key, nil)
}

func (s *Store) indexSpecValue(version int64) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(version))
	return append(b, s.idx.name...)
}

// checkIndex makes the working copy's time index match Options.TimeIndex
// at the version it holds, rebuilding it from the rows when it does not
// (s.mu is held, s.mu.db open). The rebuild reads every row once.
func (s *Store) checkIndex(ctx context.Context) error {
	db := s.mu.db
	want := s.indexSpecValue(s.mu.version)
	val, closer, err := db.Get(indexSpecKey)
	switch {
	case err == nil:
		ok := bytes.Equal(val, want)
		closer.Close()
		if ok {
			return nil
		}
	case !errors.Is(err, pebble.ErrNotFound):
		return fmt.Errorf("read the time index's metadata: %w", err)
	}
	b := db.NewBatch()
	defer func() { b.Close() }()
	if err := b.DeleteRange(indexLower, indexUpper, nil); err != nil {
		return err
	}
	if s.idx.col >= 0 {
		it, err := db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: dataLower, UpperBound: dataUpper})
		if err != nil {
			return err
		}
		var key []byte
		rows := 0
		for ok := it.First(); ok; ok = it.Next() {
			t, err := s.rowTime(it.Value())
			if err != nil {
				return errors.Join(fmt.Errorf("rebuild the time index: key %x does not decode (%w)", it.Key()[1:], err), it.Close())
			}
			key = indexKey(key[:0], t, it.Key())
			if err := b.Set(key, nil, nil); err != nil {
				return errors.Join(err, it.Close())
			}
			if rows++; rows == applyRows {
				if err := db.Apply(b, pebble.NoSync); err != nil {
					return errors.Join(err, it.Close())
				}
				b.Close()
				b, rows = db.NewBatch(), 0
			}
		}
		if err := it.Close(); err != nil {
			return fmt.Errorf("rebuild the time index: %w", err)
		}
	}
	if err := b.Set(indexSpecKey, want, nil); err != nil {
		return err
	}
	if err := db.Apply(b, pebble.NoSync); err != nil {
		return fmt.Errorf("rebuild the time index: %w", err)
	}
	return nil
}

// rawBound is the smallest raw value of the indexed column whose time in
// Unix ms (rounded down) is at least ms.
func (s *Store) rawBound(ms int64) int64 {
	mul := func(f int64) int64 {
		switch {
		case ms > math.MaxInt64/f:
			return math.MaxInt64
		case ms < math.MinInt64/f:
			return math.MinInt64
		}
		return ms * f
	}
	switch s.idx.unit {
	case arrow.Second:
		q := ms / 1000
		if ms%1000 > 0 {
			q++
		}
		return q
	case arrow.Millisecond:
		return ms
	case arrow.Microsecond:
		return mul(1000)
	}
	return mul(1000_000)
}

// ScanBefore calls fn with the rows (Schema()) whose indexed column
// (Options.TimeIndex), in Unix ms rounded down, is below boundMs, or null,
// in ascending time order, at most rows rows per record (default 64Ki).
// Its cost is the rows it returns, not the state's size: the eviction of
// an operator whose groups expire by a watermark. fn must not keep the
// record past its return without Retain. A Store without a TimeIndex
// refuses.
func (s *Store) ScanBefore(ctx context.Context, boundMs int64, rows int, fn func(arrow.RecordBatch) error) (err error) {
	if s.idx.col < 0 {
		return fmt.Errorf("pebblestore: scan of %s by time: the store has no time index (Options.TimeIndex)", s.st.URL())
	}
	if rows <= 0 {
		rows = 64 << 10
	}
	upper := binary.BigEndian.AppendUint64([]byte{indexPrefix}, orderTime(s.rawBound(boundMs)))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.db == nil {
		return fmt.Errorf("pebblestore: scan of %s by time: the working copy is not restored (call Restore first)", s.st.URL())
	}
	it, err := s.mu.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: indexLower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("pebblestore: scan of %s by time: %w", s.st.URL(), err)
	}
	defer func() {
		if cerr := it.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("pebblestore: scan of %s by time: %w", s.st.URL(), cerr)
		}
	}()
	dec := newRowDecoder(s.schema)
	emit := func() error {
		rec := dec.record()
		defer rec.Release()
		return fn(rec)
	}
	dk := []byte{dataPrefix}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) < 9 {
			return fmt.Errorf("pebblestore: working copy %s: index key %x is short; delete the directory to restore it from %s", s.dbDir(), k, s.st.URL())
		}
		dk = append(dk[:1], k[9:]...)
		val, closer, err := s.mu.db.Get(dk)
		if err != nil {
			return fmt.Errorf("pebblestore: working copy %s: the index names key %x, which does not read (%w); delete the directory to restore it from %s", s.dbDir(), dk[1:], err, s.st.URL())
		}
		err = dec.add(val)
		closer.Close()
		if err != nil {
			return fmt.Errorf("pebblestore: working copy %s: key %x does not decode (%w); delete the directory to restore it from %s", s.dbDir(), dk[1:], err, s.st.URL())
		}
		if dec.n == rows {
			if err := emit(); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	if dec.n > 0 {
		return emit()
	}
	return nil
}

var _ statestore.IndexedStore = (*Store)(nil)
