package engine

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/internal/kernel"
	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

// op is a stateless step bound to its input schema: batch.Projection and
// batch.Filter.
type op interface {
	Apply(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error)
}

// executor runs one micro-batch of a bound stream. It owns the stateful
// operator's in-memory state between batches.
type executor struct {
	mem       memory.Allocator
	inSchema  *arrow.Schema
	pre       []op
	agg       *aggOperator
	post      []op
	outSchema *arrow.Schema
	mode      OutputMode
	wm        *watermarkStep
	wmIdx     int // index of the event-time column in the records leaving pre; -1 without a watermark

	// per batch
	batchID   int64
	watermark int64 // in force for this batch, Unix ms; 0 for none
	curSource int
	out       []arrow.RecordBatch
	late      []arrow.RecordBatch
	inRows    []int64 // per source
	outRows   int64
	lateRows  int64
	batchMax  []int64 // per source: newest event time in this batch (ms), 0 for none
	ev        eventStats
}

type eventStats struct {
	min, max, sum, n int64
}

type aggOperator struct {
	step *aggregateStep
	// exprs appends the inputs of the aggregates over expressions (nil:
	// every aggregate reads a column as it is).
	exprs       *batch.Projection
	window      *kernel.WindowAssigner
	inSchema    *arrow.Schema // entering the operator (the late rows' schema)
	keyIdx      []int         // in the GroupBy's input
	parts       []*aggPartition
	keySchema   *arrow.Schema
	stateSchema *arrow.Schema
	outSchema   *arrow.Schema

	// eviction by the watermark: the value (ms) of column evictCol — a
	// key column when evictInKeys, else an output column — is compared with
	// the watermark by expired.
	evictCol    int
	evictInKeys bool
	expired     func(v, watermark int64) bool
	// prune lists the input columns the operator needs (nil: all), and
	// pruned is their schema.
	prune  []int
	pruned *arrow.Schema
	// session windows
	session *sessionState
	// dedup: how the GroupBy's output becomes the rows first seen
	dedup *kernel.Dedup
}

type aggPartition struct {
	gb      *kernel.GroupBy
	store   *statestore.Store
	pending []arrow.RecordBatch
	updated int64
	removed int64
}

// batchIDOp appends the batch id as a constant column.
type batchIDOp struct {
	ex  *executor
	out *arrow.Schema
}

func (b *batchIDOp) Apply(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	ib := array.NewInt64Builder(b.ex.mem)
	defer ib.Release()
	n := int(rec.NumRows())
	ib.Reserve(n)
	for i := 0; i < n; i++ {
		ib.UnsafeAppend(b.ex.batchID)
	}
	col := ib.NewArray()
	defer col.Release()
	cols := append(append([]arrow.Array(nil), rec.Columns()...), col)
	return array.NewRecordBatch(b.out, cols, rec.NumRows()), nil
}

// bindStream checks a stream against its sources' schemas and builds the
// operators. State stores are opened later, by openState, once the
// checkpoint's configuration has been checked.
func bindStream(s *Stream, cfg *config) (*executor, error) {
	if len(s.sources) == 0 {
		return nil, fmt.Errorf("%w: the stream has no source", ErrInvalidQuery)
	}
	schema := s.sources[0].Schema()
	for i, src := range s.sources[1:] {
		if !src.Schema().Equal(schema) {
			return nil, fmt.Errorf("%w: source %d (%s) has schema %s, but source 0 (%s) has %s; unioned sources need one schema",
				ErrInvalidQuery, i+1, describe(src), src.Schema(), describe(s.sources[0]), schema)
		}
	}
	ex := &executor{mem: cfg.mem, inSchema: schema, inRows: make([]int64, len(s.sources)), batchMax: make([]int64, len(s.sources)), wmIdx: -1}
	cur := &ex.pre
	var preSchema *arrow.Schema
	for i, st := range s.steps {
		switch st.kind {
		case stepSelect:
			p, err := batch.NewProjection(cfg.mem, schema, st.cols)
			if err != nil {
				return nil, fmt.Errorf("%w: step %d: %w", ErrInvalidQuery, i+1, err)
			}
			*cur = append(*cur, p)
			schema = p.Schema()
		case stepWithColumn, stepDrop:
			cols, err := keptColumns(schema, st)
			if err != nil {
				return nil, fmt.Errorf("%w: step %d: %w", ErrInvalidQuery, i+1, err)
			}
			p, err := batch.NewProjection(cfg.mem, schema, cols)
			if err != nil {
				return nil, fmt.Errorf("%w: step %d: %w", ErrInvalidQuery, i+1, err)
			}
			*cur = append(*cur, p)
			schema = p.Schema()
		case stepWhere:
			f, err := batch.NewFilter(cfg.mem, schema, st.pred)
			if err != nil {
				return nil, fmt.Errorf("%w: step %d: %w", ErrInvalidQuery, i+1, err)
			}
			*cur = append(*cur, f)
		case stepBatchID:
			if len(schema.FieldIndices(st.name)) > 0 {
				return nil, fmt.Errorf("%w: step %d: batch id column %q exists already", ErrInvalidQuery, i+1, st.name)
			}
			b := &batchIDOp{ex: ex, out: arrow.NewSchema(append(append([]arrow.Field(nil), schema.Fields()...), arrow.Field{Name: st.name, Type: arrow.PrimitiveTypes.Int64}), nil)}
			*cur = append(*cur, b)
			schema = b.out
		case stepWatermark:
			if ex.agg != nil {
				return nil, fmt.Errorf("%w: step %d: a watermark must come before the stateful step %q", ErrInvalidQuery, i+1, ex.agg.step.id)
			}
			if ex.wm != nil {
				return nil, fmt.Errorf("%w: step %d: a second watermark (on %q after %q)", ErrInvalidQuery, i+1, st.wm.col, ex.wm.col)
			}
			if err := checkTimestampCol(schema, st.wm.col); err != nil {
				return nil, fmt.Errorf("%w: step %d: watermark: %w", ErrInvalidQuery, i+1, err)
			}
			if st.wm.delay < 0 {
				return nil, fmt.Errorf("%w: step %d: watermark delay %s is negative", ErrInvalidQuery, i+1, st.wm.delay)
			}
			ex.wm = st.wm
		case stepAggregate, stepDedup:
			if ex.agg != nil {
				return nil, fmt.Errorf("%w: step %d: a second stateful step after %q is not supported", ErrInvalidQuery, i+1, ex.agg.step.id)
			}
			a, err := newAggOperator(cfg, schema, st.agg, ex.wm)
			if err != nil {
				return nil, fmt.Errorf("%w: step %d (%s): %w", ErrInvalidQuery, i+1, st.agg.id, err)
			}
			ex.agg = a
			preSchema = schema
			schema = a.outSchema
			cur = &ex.post
		}
	}
	if preSchema == nil {
		preSchema = schema
	}
	if ex.wm != nil {
		idx := preSchema.FieldIndices(ex.wm.col)
		if len(idx) != 1 {
			return nil, fmt.Errorf("%w: the watermark column %q does not reach the stateful step (schema %s)", ErrInvalidQuery, ex.wm.col, preSchema)
		}
		ex.wmIdx = idx[0]
	}
	ex.outSchema = schema
	mode := cfg.mode
	if mode == 0 {
		mode = Append
		if ex.agg != nil && ex.agg.step.dedup == notDedup {
			mode = Update
		}
	}
	isAgg := ex.agg != nil && ex.agg.step.dedup == notDedup
	switch {
	case isAgg && ex.agg.session != nil && mode == Update:
		return nil, fmt.Errorf("%w: session windows support append and complete output modes (in update mode a merged session would leave its parts behind in the sink)", ErrInvalidQuery)
	case isAgg && ex.agg.session != nil && mode == Append && ex.wm == nil:
		return nil, fmt.Errorf("%w: append output mode with session windows needs a watermark (WithWatermark)", ErrInvalidQuery)
	case isAgg && mode == Append && (ex.agg.step.window == nil || ex.wm == nil):
		return nil, fmt.Errorf("%w: append output mode with an aggregation needs an event-time window (GroupByWindow) and a watermark (WithWatermark); use update or complete", ErrInvalidQuery)
	case !isAgg && mode == Complete:
		return nil, fmt.Errorf("%w: complete output mode needs an aggregation (a query without one would output every row ever seen)", ErrInvalidQuery)
	case !isAgg && mode == Update:
		mode = Append // the same thing without an aggregation, as in Spark
	}
	ex.mode = mode
	return ex, nil
}

// keptColumns is the projection of a WithColumn or Drop step over schema:
// every column of schema as it is, but for the one WithColumn sets (in
// place, or appended) and the ones Drop removes.
func keptColumns(schema *arrow.Schema, st step) ([]batch.Named, error) {
	drop := map[string]bool{}
	switch st.kind {
	case stepWithColumn:
		if st.name == "" {
			return nil, fmt.Errorf("withColumn: the column needs a name")
		}
		if n := len(schema.FieldIndices(st.name)); n > 1 {
			return nil, fmt.Errorf("withColumn(%s): %d columns of that name in %s; replace one of them with Select", st.name, n, schema)
		}
	case stepDrop:
		for _, c := range st.names {
			if len(schema.FieldIndices(c)) == 0 {
				return nil, fmt.Errorf("drop(%s): column %q is not in %s", strings.Join(st.names, ", "), c, schema)
			}
			drop[c] = true
		}
	}
	var cols []batch.Named
	set := false
	for _, f := range schema.Fields() {
		switch {
		case drop[f.Name]:
		case st.kind == stepWithColumn && f.Name == st.name:
			cols = append(cols, batch.As(st.pred, st.name))
			set = true
		default:
			cols = append(cols, batch.As(batch.Col(f.Name), f.Name))
		}
	}
	if st.kind == stepWithColumn && !set {
		cols = append(cols, batch.As(st.pred, st.name))
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("drop(%s) leaves no column", strings.Join(st.names, ", "))
	}
	return cols, nil
}

func checkTimestampCol(s *arrow.Schema, col string) error {
	idx := s.FieldIndices(col)
	if len(idx) != 1 {
		return fmt.Errorf("column %q is not in %s", col, s)
	}
	if _, ok := s.Field(idx[0]).Type.(*arrow.TimestampType); !ok {
		return fmt.Errorf("column %q is %s, not a timestamp", col, s.Field(idx[0]).Type)
	}
	return nil
}

// bindAggs compiles the user's aggregates into the kernel's, which read
// columns. An aggregate over a bare column reads it; one over another
// expression reads a column that the returned projection appends to in,
// named after the expression (so the kernel's errors name it) and shared by
// the aggregates over the same expression. The projection is nil when every
// aggregate reads a bare column. An aggregate's name, and so its state
// column, is the user's either way.
func bindAggs(mem memory.Allocator, in *arrow.Schema, aggs []batch.Agg) (*batch.Projection, []kernel.Agg, error) {
	out := make([]kernel.Agg, len(aggs))
	var extra []batch.Named
	byExpr := map[string]string{}
	taken := map[string]bool{}
	for _, f := range in.Fields() {
		taken[f.Name] = true
	}
	for i, a := range aggs {
		if k, ok := kernel.FromAgg(a); ok {
			out[i] = k
			continue
		}
		e := a.Input()
		text := e.String()
		col, ok := byExpr[text]
		if !ok {
			col = text
			for n := 2; taken[col]; n++ {
				col = fmt.Sprintf("%s#%d", text, n)
			}
			taken[col] = true
			byExpr[text] = col
			extra = append(extra, batch.As(e, col))
		}
		out[i] = kernel.Agg{Func: a.Func(), Column: col, Name: a.Name(), PerBatch: a.IsPerBatch()}
	}
	if len(extra) == 0 {
		return nil, out, nil
	}
	cols := make([]batch.Named, 0, in.NumFields()+len(extra))
	for _, f := range in.Fields() {
		cols = append(cols, batch.As(batch.Col(f.Name), f.Name))
	}
	p, err := batch.NewProjection(mem, in, append(cols, extra...))
	if err != nil {
		return nil, nil, fmt.Errorf("aggregate input: %w", err)
	}
	return p, out, nil
}

func newAggOperator(cfg *config, in *arrow.Schema, st *aggregateStep, wm *watermarkStep) (*aggOperator, error) {
	exprs, aggs, err := bindAggs(cfg.mem, in, st.aggs)
	if err != nil {
		return nil, err
	}
	gbIn := in
	if exprs != nil {
		gbIn = exprs.Schema()
	}
	if st.window != nil && st.window.gap > 0 {
		a, err := newSessionOperator(cfg, gbIn, st, aggs, wm)
		if err != nil {
			return nil, err
		}
		a.exprs, a.inSchema = exprs, in
		return a, nil
	}
	a := &aggOperator{step: st, exprs: exprs, inSchema: in, evictCol: -1}
	keys := st.keys
	if st.dedup == notDedup {
		// Only the keys, the aggregates' columns and the window's column
		// go on: partitioning and windowing copy every column they get.
		need := map[string]bool{}
		for _, k := range keys {
			need[k] = true
		}
		for _, ag := range aggs {
			need[ag.Column] = true
		}
		if st.window != nil {
			need[st.window.col] = true
		}
		var fields []arrow.Field
		var idx []int
		for i, f := range gbIn.Fields() {
			if need[f.Name] {
				fields = append(fields, f)
				idx = append(idx, i)
			}
		}
		if len(idx) < gbIn.NumFields() && len(idx) > 0 {
			gbIn = arrow.NewSchema(fields, nil)
			a.prune, a.pruned = idx, gbIn
		}
	}
	if st.window != nil {
		w, err := kernel.NewWindowAssigner(cfg.mem, gbIn, st.window.col, st.window.size, st.window.slide)
		if err != nil {
			return nil, err
		}
		a.window = w
		gbIn = w.Schema()
		keys = append([]string{batch.WindowStart, batch.WindowEnd}, keys...)
		if wm != nil {
			a.evictCol, a.evictInKeys = 1, true
			a.expired = func(end, w int64) bool { return end <= w }
		}
	}
	if st.dedup != notDedup {
		d, err := kernel.NewDedup(in, keys)
		if err != nil {
			return nil, err
		}
		if st.dedup == dedupWithinWatermark && wm == nil {
			return nil, fmt.Errorf("DropDuplicatesWithinWatermark needs a watermark (WithWatermark before it)")
		}
		a.dedup, aggs = d, d.Aggs()
	}
	for _, k := range keys {
		idx := gbIn.FieldIndices(k)
		if len(idx) != 1 {
			return nil, fmt.Errorf("key %q is not a column of %s", k, gbIn)
		}
		a.keyIdx = append(a.keyIdx, idx[0])
	}
	a.parts = make([]*aggPartition, cfg.partitions)
	for p := range a.parts {
		gb, err := kernel.NewGroupBy(cfg.mem, gbIn, keys, aggs)
		if err != nil {
			a.release()
			return nil, err
		}
		a.parts[p] = &aggPartition{gb: gb}
	}
	g := a.parts[0].gb
	a.keySchema, a.stateSchema, a.outSchema = g.KeySchema(), g.StateSchema(), g.OutputSchema()
	if st.dedup != notDedup {
		out := g.OutputSchema()
		if err := a.dedup.Bind(out); err != nil {
			a.release()
			return nil, err
		}
		a.outSchema = in
		if wm != nil {
			delay := wm.delay.Milliseconds()
			switch {
			case st.dedup == dedupAll:
				for i, k := range keys {
					if k == wm.col {
						a.evictCol, a.evictInKeys = i, true
						a.expired = func(t, w int64) bool { return t < w }
					}
				}
			default: // within the watermark: expires when first time + delay < watermark
				idx := out.FieldIndices(wm.col)
				a.evictCol, a.evictInKeys = idx[0], false
				a.expired = func(t, w int64) bool { return t+delay < w }
			}
		}
	}
	return a, nil
}

func (a *aggOperator) release() {
	for _, p := range a.parts {
		if p == nil {
			continue
		}
		for _, r := range p.pending {
			r.Release()
		}
		p.pending = nil
		if p.gb != nil {
			p.gb.Release()
		}
	}
}

func (a *aggOperator) kind() string {
	switch a.step.dedup {
	case dedupAll:
		return "dropDuplicates"
	case dedupWithinWatermark:
		return "dropDuplicatesWithinWatermark"
	}
	if a.session != nil {
		return "sessionWindowAggregate"
	}
	if a.window != nil {
		return "windowAggregate"
	}
	return "groupBy"
}

func (a *aggOperator) conf() OperatorConf {
	return OperatorConf{ID: a.step.id, Kind: a.kind(), Keys: a.step.keys, KeySchema: a.keySchema.String(), StateSchema: a.stateSchema.String()}
}

// evicts reports whether the operator drops state by the watermark.
func (a *aggOperator) evicts() bool { return a.expired != nil }

// openState opens every partition's state store and loads version
// committed (-1: empty).
func (a *aggOperator) openState(ctx context.Context, cfg *config, committed int64) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for p, part := range a.parts {
		g.Go(func() error {
			st, err := statestore.Open(ctx, storage.Sub(cfg.checkpoint, stateDir(a.step.id, p)), statestore.Options{
				KeySchema:           a.keySchema,
				ValueSchema:         a.stateSchema,
				SnapshotEvery:       cfg.snapshotEvery,
				MinVersionsToRetain: cfg.minBatchesToRetain,
				Allocator:           cfg.mem,
				UniqueUpserts:       true, // a group-by's changes hold each key once
			})
			if err != nil {
				return fmt.Errorf("operator %s partition %d: %w", a.step.id, p, err)
			}
			part.store = st
			if committed < 0 {
				return nil
			}
			recs, err := st.Load(ctx, committed)
			if err != nil {
				return fmt.Errorf("operator %s partition %d: %w", a.step.id, p, err)
			}
			defer func() {
				for _, r := range recs {
					r.Release()
				}
			}()
			for _, r := range recs {
				if err := part.gb.Load(r); err != nil {
					return fmt.Errorf("operator %s partition %d: load state version %d: %w", a.step.id, p, committed, err)
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// consume takes one source record through the stateless steps and into the
// stateful operator's partitions or the output.
func (ex *executor) consume(ctx context.Context, rec arrow.RecordBatch) error {
	rec.Retain()
	cur := rec
	for _, o := range ex.pre {
		next, err := o.Apply(ctx, cur)
		cur.Release()
		if err != nil {
			return err
		}
		cur = next
	}
	defer func() { cur.Release() }()
	if cur.NumRows() == 0 {
		return nil
	}
	if ex.wmIdx >= 0 {
		var err error
		if cur, err = ex.eventTime(ctx, cur); err != nil {
			return err
		}
		if cur.NumRows() == 0 {
			return nil
		}
	}
	if ex.agg == nil {
		return ex.emit(ctx, cur)
	}
	if a := ex.agg; a.exprs != nil {
		next, err := a.exprs.Apply(ctx, cur)
		if err != nil {
			return err
		}
		cur.Release()
		cur = next
	}
	if a := ex.agg; a.prune != nil {
		cols := make([]arrow.Array, len(a.prune))
		for i, c := range a.prune {
			cols[i] = cur.Column(c)
		}
		next := array.NewRecordBatch(a.pruned, cols, cur.NumRows())
		cur.Release()
		cur = next
	}
	if w := ex.agg.window; w != nil {
		next, err := w.Apply(ctx, cur)
		if err != nil {
			return err
		}
		cur.Release()
		cur = next
		if ex.wm != nil && ex.watermark > 0 {
			// A row of a sliding window can fall in windows the watermark
			// has closed (and emitted) as well as open ones: keep only the
			// open ones, or a closed window would be emitted twice.
			ends, _, err := kernel.EventTimesMillis(cur, int(cur.NumCols()-1))
			if err != nil {
				return err
			}
			keep := make([]bool, len(ends))
			for i, e := range ends {
				keep[i] = e > ex.watermark
			}
			next, err := kernel.FilterRows(ctx, ex.mem, cur, keep)
			if err != nil {
				return err
			}
			cur.Release()
			cur = next
		}
	}
	parts, err := kernel.Partition(ex.mem, cur, ex.agg.keyIdx, len(ex.agg.parts))
	if err != nil {
		return err
	}
	for p, r := range parts {
		if r == nil {
			continue
		}
		if r.NumRows() == 0 {
			r.Release()
			continue
		}
		ex.agg.parts[p].pending = append(ex.agg.parts[p].pending, r)
	}
	return nil
}

// eventTime records the batch's event-time figures and, before a stateful
// step, takes out the rows older than the watermark in force. It returns
// the record to go on with (cur itself, or a filtered copy after releasing
// cur).
func (ex *executor) eventTime(ctx context.Context, cur arrow.RecordBatch) (arrow.RecordBatch, error) {
	ms, valid, err := kernel.EventTimesMillis(cur, ex.wmIdx)
	if err != nil {
		return cur, err
	}
	late := 0
	for i, t := range ms {
		if !valid[i] {
			if ex.agg != nil {
				return cur, fmt.Errorf("event-time column %q is null in row %d: a row without an event time cannot be placed against the watermark", ex.wm.col, i)
			}
			continue
		}
		if ex.ev.n == 0 || t < ex.ev.min {
			ex.ev.min = t
		}
		if ex.ev.n == 0 || t > ex.ev.max {
			ex.ev.max = t
		}
		ex.ev.sum += t
		ex.ev.n++
		if t > ex.batchMax[ex.curSource] {
			ex.batchMax[ex.curSource] = t
		}
		if t < ex.watermark {
			late++
		}
	}
	if late == 0 || ex.agg == nil {
		return cur, nil
	}
	keep := make([]bool, len(ms))
	drop := make([]bool, len(ms))
	for i, t := range ms {
		keep[i] = !valid[i] || t >= ex.watermark
		drop[i] = !keep[i]
	}
	ex.lateRows += int64(late)
	lateRec, err := kernel.FilterRows(ctx, ex.mem, cur, drop)
	if err != nil {
		return cur, err
	}
	ex.late = append(ex.late, lateRec)
	next, err := kernel.FilterRows(ctx, ex.mem, cur, keep)
	if err != nil {
		return cur, err
	}
	cur.Release()
	return next, nil
}

// emit takes a record after the stateful step through the remaining steps
// into the batch output.
func (ex *executor) emit(ctx context.Context, rec arrow.RecordBatch) error {
	rec.Retain()
	cur := rec
	ops := ex.post
	if ex.agg == nil {
		ops = nil
	}
	for _, o := range ops {
		next, err := o.Apply(ctx, cur)
		cur.Release()
		if err != nil {
			return err
		}
		cur = next
	}
	if cur.NumRows() == 0 {
		cur.Release()
		return nil
	}
	ex.out = append(ex.out, cur)
	ex.outRows += cur.NumRows()
	return nil
}

// finishState merges the buffered rows into each partition's state (in
// parallel), evicts what the watermark passed, writes state version
// batchID, and emits the output rows in partition order.
func (ex *executor) finishState(ctx context.Context, batchID int64) (commitTime time.Duration, err error) {
	if ex.agg == nil {
		return 0, nil
	}
	a := ex.agg
	outs := make([]arrow.RecordBatch, len(a.parts))
	defer func() {
		for _, o := range outs {
			if o != nil {
				o.Release()
			}
		}
	}()
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for p, part := range a.parts {
		g.Go(func() error {
			out, err := ex.finishPartition(gctx, batchID, part)
			if err != nil {
				return fmt.Errorf("operator %s partition %d: %w", a.step.id, p, err)
			}
			outs[p] = out
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	commitTime = time.Since(start)
	for _, o := range outs {
		if o == nil || o.NumRows() == 0 {
			continue
		}
		if err := ex.emit(ctx, o); err != nil {
			return 0, err
		}
	}
	return commitTime, nil
}

func (ex *executor) finishPartition(ctx context.Context, batchID int64, part *aggPartition) (arrow.RecordBatch, error) {
	a := ex.agg
	if a.session != nil {
		return ex.finishSession(ctx, batchID, part)
	}
	defer func() {
		for _, r := range part.pending {
			r.Release()
		}
		part.pending = part.pending[:0]
	}()
	for _, r := range part.pending {
		if err := part.gb.Merge(r); err != nil {
			return nil, err
		}
	}
	evict := a.evicts() && ex.watermark > 0 && ex.mode != Complete
	var out arrow.RecordBatch
	var err error
	switch {
	case a.step.dedup != notDedup:
		out, err = ex.dedupOutput(ctx, part)
	case ex.mode == Append:
		// Emit the windows the watermark closed, once: they are evicted
		// below in the same state version.
		all := part.gb.Output(false)
		out, err = ex.filterExpired(ctx, all, a.evictCol, true)
		all.Release()
		if err == nil {
			out, err = ex.sortByKeys(ctx, out)
		}
	case ex.mode == Complete:
		out, err = ex.sortByKeys(ctx, part.gb.Output(false))
	default:
		// Update: groups in order of first touch in this batch, a
		// function of the batch's input alone.
		out = part.gb.Output(true)
	}
	if err != nil {
		return nil, err
	}
	changes := part.gb.Changes()
	defer changes.Release()
	part.updated = changes.NumRows()
	var removed arrow.RecordBatch
	part.removed = 0
	if evict {
		if removed, err = ex.evict(part); err != nil {
			out.Release()
			return nil, err
		}
		defer removed.Release()
		part.removed = removed.NumRows()
		if removed.NumRows() > 0 && changes.NumRows() > 0 {
			// A group changed in this batch and expired in it too (a
			// duplicate of an expiring key): the version records its
			// removal only.
			kept, err := withoutKeys(ctx, ex.mem, changes, removed)
			if err != nil {
				out.Release()
				return nil, err
			}
			defer kept.Release()
			changes = kept
		}
	}
	if err := part.store.Commit(ctx, batchID, changes, removed); err != nil {
		out.Release()
		return nil, fmt.Errorf("commit state version %d: %w", batchID, err)
	}
	part.gb.ClearChanges()
	return out, nil
}

// sortByKeys orders rec (an aggregation output, keys first) by its key
// columns and releases rec. Groups live in the hash table in insertion
// order, which differs between a run and its restart from a state
// snapshot; sorting makes what reaches the sink a function of the state
// alone, so a re-run batch is byte-for-byte its first attempt.
func (ex *executor) sortByKeys(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	defer rec.Release()
	if rec.NumRows() < 2 {
		rec.Retain()
		return rec, nil
	}
	nk := len(ex.agg.keyIdx)
	if ex.agg.session != nil {
		nk += 2 // window_start, window_end, then the keys
	}
	keys := make(compute.SortOptions, nk)
	for i := range keys {
		keys[i] = compute.DefaultSortKey()
		keys[i].ColumnIndex = i
	}
	d, err := compute.CallFunction(compute.WithAllocator(ctx, ex.mem), "sort", keys, compute.NewDatum(rec))
	if err != nil {
		return nil, fmt.Errorf("sort output by key: %w", err)
	}
	defer d.Release()
	out := d.(*compute.RecordDatum).Value
	out.Retain()
	return out, nil
}

// withoutKeys returns the rows of rec whose key columns (the first
// columns, as many as keys has) match no row of keys.
func withoutKeys(ctx context.Context, mem memory.Allocator, rec, keys arrow.RecordBatch) (arrow.RecordBatch, error) {
	nk := int(keys.NumCols())
	gone := make(map[string]struct{}, keys.NumRows())
	for i := 0; i < int(keys.NumRows()); i++ {
		gone[keyString(keys.Columns(), i)] = struct{}{}
	}
	keep := make([]bool, rec.NumRows())
	cols := rec.Columns()[:nk]
	for i := range keep {
		_, drop := gone[keyString(cols, i)]
		keep[i] = !drop
	}
	return kernel.FilterRows(ctx, mem, rec, keep)
}

// filterExpired keeps the rows of rec whose column col holds a time the
// watermark has expired (want=true) or not (want=false).
func (ex *executor) filterExpired(ctx context.Context, rec arrow.RecordBatch, col int, want bool) (arrow.RecordBatch, error) {
	ms, _, err := kernel.EventTimesMillis(rec, col)
	if err != nil {
		return nil, err
	}
	keep := make([]bool, len(ms))
	for i, t := range ms {
		keep[i] = ex.watermark > 0 && ex.agg.expired(t, ex.watermark) == want
	}
	return kernel.FilterRows(ctx, ex.mem, rec, keep)
}

// evict removes the groups the watermark expired and returns their keys.
func (ex *executor) evict(part *aggPartition) (arrow.RecordBatch, error) {
	a := ex.agg
	if a.evictInKeys {
		var ferr error
		removed, err := part.gb.Remove(func(keys []arrow.Array, out []bool) {
			ts, ok := keys[a.evictCol].(*array.Timestamp)
			if !ok {
				ferr = fmt.Errorf("eviction column %d is %s", a.evictCol, keys[a.evictCol].DataType())
				return
			}
			unit := ts.DataType().(*arrow.TimestampType).Unit
			for i, v := range ts.TimestampValues() {
				out[i] = !a.expired(kernel.TimestampMillis(int64(v), unit), ex.watermark)
			}
		})
		if ferr != nil {
			if removed != nil {
				removed.Release()
			}
			return nil, ferr
		}
		return removed, err
	}
	all := part.gb.Output(false)
	ms, _, err := kernel.EventTimesMillis(all, a.evictCol)
	all.Release()
	if err != nil {
		return nil, err
	}
	return part.gb.Remove(func(_ []arrow.Array, out []bool) {
		for i, t := range ms {
			out[i] = !a.expired(t, ex.watermark)
		}
	})
}

// dedupOutput returns the rows of keys first seen in this batch, as the
// operator's input rows (the first row of each key).
func (ex *executor) dedupOutput(ctx context.Context, part *aggPartition) (arrow.RecordBatch, error) {
	o := part.gb.Output(true)
	defer o.Release()
	return ex.agg.dedup.FirstSeen(ctx, ex.mem, o)
}

// reset releases the batch's output and clears the batch's figures.
func (ex *executor) reset() {
	for _, r := range ex.out {
		r.Release()
	}
	for _, r := range ex.late {
		r.Release()
	}
	ex.out, ex.late = ex.out[:0], ex.late[:0]
	ex.outRows, ex.lateRows = 0, 0
	ex.ev = eventStats{}
	for i := range ex.inRows {
		ex.inRows[i] = 0
		ex.batchMax[i] = 0
	}
	if ex.agg != nil {
		for _, p := range ex.agg.parts {
			for _, r := range p.pending {
				r.Release()
			}
			p.pending = p.pending[:0]
		}
	}
}

func (ex *executor) release() {
	ex.reset()
	if ex.agg != nil {
		ex.agg.release()
	}
}

func describe(v any) string {
	if d, ok := v.(Describer); ok {
		return d.Description()
	}
	return fmt.Sprintf("%T", v)
}
