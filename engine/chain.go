package engine

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/internal/kernel"
	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

// executor runs one micro-batch of a bound stream: the stateless steps
// before the first stateful operator (pre), then the chain of operators,
// each followed by its own stateless steps. It owns the operators' state
// between batches.
type executor struct {
	mem       memory.Allocator
	inSchema  *arrow.Schema
	pre       []op
	ops       []*chainOp
	outSchema *arrow.Schema
	mode      OutputMode
	wm        *watermarkStep
	wmIdx     int // index of the event-time column in the records leaving pre; -1 without a watermark
	// branches are the second inputs of two-input operators (join.go):
	// srcBranch[i] is the branch source i feeds, -1 for the main chain.
	branches  []*branch
	srcBranch []int
	combine   combineKnobs // test knob: partial aggregation (combine.go)

	// per batch
	batchID       int64
	watermark     int64 // in force for this batch (eviction; the first operator's late rows), Unix ms; 0 for none
	lateWatermark int64 // the previous batch's: rows below it are late for the operators after the first
	timestampMs   int64
	curSource     int
	out           []arrow.RecordBatch
	late          []arrow.RecordBatch // the first operator's late rows, for WithLateRows
	inRows        []int64             // per source
	outRows       int64
	lateRows      int64 // the first operator's
	batchMax      []int64
	ev            eventStats
}

type eventStats struct {
	min, max, sum, n int64
}

// chainOp is one operator of the chain with its partitions, its state
// stores and the stateless steps that follow it.
type chainOp struct {
	op    operator
	post  []op         // stateless steps after the operator
	evIn  eventTimeCol // the event time of input 0, for the late filter
	specs []storeSpec
	// parts are the working partitions: one per state partition, or one
	// for all of them when single.
	parts []opPartition
	// nParts is the number of state partitions (P): the stores of st.
	nParts int
	// single: one working table holds every state partition's groups (an
	// in-memory hash aggregation, whole.go): the batch's rows reach it
	// unpartitioned, and only its state changes are split by partition,
	// for the stores.
	single bool
	// wpt is the single table's partitioning scratch, wmem the allocator
	// of the pieces it splits (whole.go).
	wpt  kernel.Partitioner
	wmem *recycler
	st   [][]stateStore // per state partition, per spec
	// groups holds each spec's partitions' folders (per spec), so that a
	// batch's deltas of every partition are written as one bundle file.
	groups []*statestore.Group
	disk   bool // st holds DiskStores: partitions hold only the batch's groups
	// pending holds each partition's input rows of this batch, in order.
	pending [][]pendingRec
	// pt is the partitioning scratch of the rows fed in input order
	// (executor.feed), kept between batches.
	pt kernel.Partitioner
	// comb is the operator's partial aggregation (combine.go), nil
	// without one; combChecked says whether it was looked for.
	comb        *combiner
	combChecked bool

	// per batch figures
	late       atomic.Int64
	updated    []int64 // per partition
	removed    []int64
	custom     []map[string]int64
	commitTime time.Duration
}

type pendingRec struct {
	side int
	rec  arrow.RecordBatch
	// partial: rec holds partial states of groups (a combiner's), not
	// input rows.
	partial bool
}

// stateful reports whether the query has a stateful operator.
func (ex *executor) stateful() bool { return len(ex.ops) > 0 }

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// first is the chain's first operator (nil without one).
func (ex *executor) first() *chainOp {
	if len(ex.ops) == 0 {
		return nil
	}
	return ex.ops[0]
}

// needsPrevWatermark reports whether offsets/N must record the previous
// batch's watermark: for the late rows of operators after the first, or
// for an operator that asks.
func (ex *executor) needsPrevWatermark() bool {
	if len(ex.ops) > 1 {
		return true
	}
	for _, c := range ex.ops {
		if p, ok := c.op.(prevWatermarker); ok && p.needsPrevWatermark() {
			return true
		}
	}
	return false
}

// evicts reports whether a moved watermark is work for some operator.
func (ex *executor) evicts() bool {
	for _, c := range ex.ops {
		if c.op.evicts() {
			return true
		}
	}
	return false
}

// timerDue reports whether an operator holds a processing-time timer due
// at ts (Unix ms): work for a batch even without input.
func (ex *executor) timerDue(ts int64) bool {
	for _, c := range ex.ops {
		if t, ok := c.op.(interface{ timerDue(int64) bool }); ok && t.timerDue(ts) {
			return true
		}
	}
	return false
}

// bindStream checks a stream against its sources' schemas and builds the
// steps and operators. State stores are opened later, by openState, once
// the checkpoint's configuration has been checked.
func bindStream(s *Stream, cfg *config) (*executor, error) {
	if len(s.sources) == 0 {
		return nil, fmt.Errorf("%w: the stream has no source", ErrInvalidQuery)
	}
	srcBranch := mainSources(s)
	schema := s.sources[0].Schema()
	for i, src := range s.sources[1:] {
		if srcBranch[i+1] < 0 && !src.Schema().Equal(schema) {
			return nil, fmt.Errorf("%w: source %d (%s) has schema %s, but source 0 (%s) has %s; unioned sources need one schema",
				ErrInvalidQuery, i+1, describe(src), src.Schema(), describe(s.sources[0]), schema)
		}
	}
	ex := &executor{mem: cfg.mem, inSchema: schema, inRows: make([]int64, len(s.sources)), batchMax: make([]int64, len(s.sources)), wmIdx: -1, srcBranch: srcBranch, combine: cfg.combine}
	ok := false
	defer func() {
		if !ok {
			ex.release()
		}
	}()
	cur := &ex.pre
	// The event time as it flows: the column's name in schema and the
	// offset to add to its value ("" for none).
	evName, evOffset := "", int64(0)
	ids := map[string]int{}
	for i, st := range s.steps {
		switch st.kind {
		case stepSelect:
			p, err := batch.NewProjection(cfg.mem, schema, st.cols)
			if err != nil {
				return nil, fmt.Errorf("%w: step %d: %w", ErrInvalidQuery, i+1, err)
			}
			*cur = append(*cur, p)
			schema = p.Schema()
			evName = selectedName(st.cols, evName)
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
			evName = selectedName(cols, evName)
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
			if len(ex.ops) > 0 {
				return nil, fmt.Errorf("%w: step %d: a watermark must come before the stateful step %q", ErrInvalidQuery, i+1, ex.ops[0].op.id())
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
			evName, evOffset = st.wm.col, 0
		default:
			if len(ex.ops) == 0 && ex.wm != nil {
				idx := schema.FieldIndices(ex.wm.col)
				if len(idx) != 1 {
					return nil, fmt.Errorf("%w: the watermark column %q does not reach the stateful step (schema %s)", ErrInvalidQuery, ex.wm.col, schema)
				}
				ex.wmIdx = idx[0]
			}
			ev := noEventTime
			if evName != "" {
				if idx := schema.FieldIndices(evName); len(idx) == 1 {
					ev = eventTimeCol{col: idx[0], offsetMs: evOffset}
				}
			}
			o, err := bindOperator(cfg, schema, st, ev, ex.wm)
			if err != nil {
				return nil, fmt.Errorf("%w: step %d (%s): %w", ErrInvalidQuery, i+1, st.opID(), err)
			}
			if prev, dup := ids[o.id()]; dup {
				o.release()
				return nil, fmt.Errorf("%w: step %d: operator id %q is used by step %d too; give each stateful step its own id (ID)", ErrInvalidQuery, i+1, o.id(), prev)
			}
			ids[o.id()] = i + 1
			c := &chainOp{op: o, evIn: ev}
			// A hash aggregation copies what it keeps of its input, so
			// its partitions' records may share their scattered columns.
			_, c.pt.Shared = o.(combinerOp)
			ex.ops = append(ex.ops, c)
			if b, ok := o.(twoInputs); ok {
				ex.addBranch(b.branch(), c)
			}
			schema = o.outputSchema()
			evName, evOffset = "", 0
			if et := o.eventTime(); et.col >= 0 {
				evName, evOffset = schema.Field(et.col).Name, et.offsetMs
			}
			cur = &c.post
		}
	}
	if len(ex.ops) == 0 && ex.wm != nil {
		idx := schema.FieldIndices(ex.wm.col)
		if len(idx) != 1 {
			return nil, fmt.Errorf("%w: the watermark column %q does not reach the end of the query (schema %s)", ErrInvalidQuery, ex.wm.col, schema)
		}
		ex.wmIdx = idx[0]
	}
	ex.outSchema = schema
	mode, err := chainMode(ex.ops, cfg.mode, ex.wm != nil)
	if err != nil {
		return nil, err
	}
	ex.mode = mode
	// A sliding window that runs in append mode (every aggregation before
	// the last does) is computed by panes where its aggregates combine.
	for i, c := range ex.ops {
		if w, isWin := c.op.(*windowOp); isWin && !cfg.rowWindows && (i < len(ex.ops)-1 || mode == Append) {
			p, err := newPaneOp(cfg, w)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrInvalidQuery, w.id(), err)
			}
			if p != nil {
				c.op = p
			}
		}
	}
	for _, c := range ex.ops {
		c.specs = c.op.stores()
		c.single = wholeTable(cfg, c.op)
		if err := c.newPartitions(cfg.partitions); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalidQuery, c.op.id(), err)
		}
	}
	if err := checkBackends(cfg, ex); err != nil {
		return nil, err
	}
	ok = true
	return ex, nil
}

// adoptRows turns each sliding window computed by panes back into its
// row-per-window form where the checkpoint's operator of that id was
// written in that form (before panes existed), so the checkpoint restarts
// with the state it has. It reports whether it changed an operator.
func (ex *executor) adoptRows(cfg *config, old Conf, partitions int) (bool, error) {
	kinds := map[string]string{}
	for _, o := range old.Operators {
		kinds[o.ID] = o.Kind
	}
	changed := false
	for _, c := range ex.ops {
		p, isPane := c.op.(*paneOp)
		if !isPane || kinds[p.id()] != p.rows.kind() {
			continue
		}
		for _, part := range c.parts {
			part.release()
		}
		c.op, c.specs = p.rows, p.rows.stores()
		c.single = wholeTable(cfg, c.op)
		if err := c.newPartitions(partitions); err != nil {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}

// bindOperator builds the operator of a stateful step over its input.
func bindOperator(cfg *config, in *arrow.Schema, st step, ev eventTimeCol, wm *watermarkStep) (operator, error) {
	switch {
	case st.kind == stepJoin && st.join.static != nil:
		return newStaticJoinOp(cfg, in, st.join, ev)
	case st.kind == stepJoin && st.join.table != nil:
		return newTableJoinOp(cfg, in, st.join, ev)
	case st.kind == stepJoin:
		return newJoinOp(cfg, in, st.join, ev, wm)
	case st.kind == stepTop:
		return newTopOp(cfg, in, st.top, ev)
	case st.kind == stepProcess:
		return newProcOp(cfg, in, st.proc, wm)
	case st.kind == stepDedup:
		return newDedupOp(cfg, in, st.agg, ev, wm)
	case st.agg.window != nil && st.agg.window.gap > 0:
		return newSessionOp(cfg, in, st.agg, ev)
	case st.agg.window != nil:
		return newWindowOp(cfg, in, st.agg, ev)
	default:
		return newGroupByOp(cfg, in, st.agg, ev)
	}
}

// selectedName follows the event-time column name through a projection:
// the name of the first output column that is that column as it is, or ""
// when the projection computes it anew or drops it.
func selectedName(cols []batch.Named, name string) string {
	if name == "" {
		return ""
	}
	for _, c := range cols {
		if n, ok := batch.ColumnOf(c.Expr); ok && n == name {
			return c.Name
		}
	}
	return ""
}

// chainMode checks the output mode against the whole chain (Spark's
// rules): every operator before the last emits rows once (a
// deduplication, or an aggregation in append mode whose groups the
// watermark closes), so the query runs in append mode if one of those is
// an aggregation; complete needs the last operator to aggregate. It
// returns the mode in force (the default when mode is 0).
func chainMode(ops []*chainOp, mode OutputMode, watermarked bool) (OutputMode, error) {
	if len(ops) == 0 {
		switch mode {
		case Complete:
			return 0, fmt.Errorf("%w: complete output mode needs an aggregation (a query without one would output every row ever seen)", ErrInvalidQuery)
		default:
			return Append, nil // update is the same thing without an aggregation, as in Spark
		}
	}
	var upstreamAgg operator
	for i, c := range ops[:len(ops)-1] {
		o := c.op
		if !o.aggregates() {
			continue
		}
		next := ops[i+1].op
		if !o.closes() {
			return 0, fmt.Errorf("%w: aggregation %q feeds the stateful step %q, so it must emit each group once, when the watermark closes it: group by an event-time window (GroupByWindow) or an event-time key under a watermark (WithWatermark)", ErrInvalidQuery, o.id(), next.id())
		}
		if mode == Update || mode == Complete {
			return 0, fmt.Errorf("%w: %s output mode below a second aggregation: %q feeds %q, and an aggregation before another stateful step runs in append mode only (use append)", ErrInvalidQuery, mode, o.id(), next.id())
		}
		upstreamAgg = o
	}
	last := ops[len(ops)-1].op
	if mode == 0 {
		mode = Append
		if last.aggregates() && upstreamAgg == nil {
			mode = Update
		}
	}
	_, session := last.(*sessionOp)
	switch {
	case last.aggregates() && session && mode == Update:
		return 0, fmt.Errorf("%w: session windows support append and complete output modes (in update mode a merged session would leave its parts behind in the sink)", ErrInvalidQuery)
	case last.aggregates() && session && mode == Append && !watermarked:
		return 0, fmt.Errorf("%w: append output mode with session windows needs a watermark (WithWatermark)", ErrInvalidQuery)
	case last.aggregates() && mode == Append && !last.closes():
		return 0, fmt.Errorf("%w: append output mode with an aggregation needs an event-time window (GroupByWindow) and a watermark (WithWatermark); use update or complete", ErrInvalidQuery)
	case !last.aggregates() && mode == Complete:
		return 0, fmt.Errorf("%w: complete output mode needs an aggregation (a query without one would output every row ever seen)", ErrInvalidQuery)
	case !last.aggregates() && mode == Update:
		if upstreamAgg != nil {
			return 0, fmt.Errorf("%w: update output mode below a second aggregation: %q feeds %q (use append)", ErrInvalidQuery, upstreamAgg.id(), last.id())
		}
		mode = Append // the same thing for an operator that emits each row once
	}
	return mode, nil
}

func (c *chainOp) newPartitions(n int) error {
	c.nParts = n
	if c.single {
		n = 1
	}
	c.parts = make([]opPartition, n)
	c.pending = make([][]pendingRec, n)
	c.updated = make([]int64, n)
	c.removed = make([]int64, n)
	c.custom = make([]map[string]int64, n)
	for p := range c.parts {
		part, err := c.op.newPartition(p)
		if err != nil {
			return err
		}
		c.parts[p] = part
	}
	return nil
}

// storeDir is where store s of partition p lives.
func (c *chainOp) storeDir(p int, s storeSpec) string {
	return checkpoint.StoreDir(c.op.id(), p, s.name)
}

// folder is the storage of store i (spec) of partition p: its folder,
// seen through the spec's group.
func (c *chainOp) folder(cfg *config, p, i int, spec storeSpec) storage.Store {
	return c.groups[i].Partition(p, storage.Sub(cfg.checkpoint, c.storeDir(p, spec)))
}

// conf is the operator's restart description with its named stores.
func (c *chainOp) conf() OperatorConf {
	oc := c.op.conf()
	for _, s := range c.specs {
		if s.name != "" {
			oc.Stores = append(oc.Stores, s.name)
		}
	}
	return oc
}

// openState opens every store of every operator partition and loads
// version committed (-1: empty).
func (ex *executor) openState(ctx context.Context, cfg *config, committed int64) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(max(2, 2*runtimeProcs()))
	if err := checkBackends(cfg, ex); err != nil {
		return err
	}
	for _, c := range ex.ops {
		c.st = make([][]stateStore, c.nParts)
		c.groups = make([]*statestore.Group, len(c.specs))
		for i, spec := range c.specs {
			c.groups[i] = statestore.NewGroup(storage.Sub(cfg.checkpoint, checkpoint.OperatorDir(c.op.id())), spec.name)
		}
		c.disk = cfg.backendFor(c.op.id()) != nil
		for _, part := range c.parts {
			if pp, ok := part.(interface{ setPartial(bool) }); ok {
				pp.setPartial(c.disk) // a disk partition never commits the whole state
			}
		}
		// One working table takes the partitions' rows in partition
		// order (loaded[p] closes when p's are in), so that its groups'
		// order is the same at every start.
		var loaded []chan struct{}
		if c.single {
			loaded = make([]chan struct{}, c.nParts)
			for p := range loaded {
				loaded[p] = make(chan struct{})
			}
		}
		for p := range c.nParts {
			c.st[p] = make([]stateStore, len(c.specs))
			g.Go(func() error {
				for i, spec := range c.specs {
					if c.disk {
						st, err := c.openDisk(ctx, cfg, p, i, spec, committed)
						if err != nil {
							return fmt.Errorf("operator %s partition %d%s: %w", c.op.id(), p, storeLabel(spec), err)
						}
						c.st[p][i] = st
						continue
					}
					st, err := statestore.Open(ctx, c.folder(cfg, p, i, spec), storeOptions(cfg, spec))
					if err != nil {
						return fmt.Errorf("operator %s partition %d%s: %w", c.op.id(), p, storeLabel(spec), err)
					}
					c.st[p][i] = st
					if committed < 0 {
						continue
					}
					recs, err := st.Load(ctx, committed)
					if err != nil {
						return fmt.Errorf("operator %s partition %d%s: %w", c.op.id(), p, storeLabel(spec), err)
					}
					part := c.parts[0]
					if c.single {
						if p > 0 {
							select {
							case <-loaded[p-1]:
							case <-ctx.Done():
								for _, r := range recs {
									r.Release()
								}
								return ctx.Err()
							}
						}
					} else {
						part = c.parts[p]
					}
					err = part.load(ctx, spec.name, recs)
					for _, r := range recs {
						r.Release()
					}
					if err != nil {
						return fmt.Errorf("operator %s partition %d%s: load state version %d: %w", c.op.id(), p, storeLabel(spec), committed, err)
					}
				}
				if c.single {
					close(loaded[p])
				}
				return nil
			})
		}
	}
	return g.Wait()
}

func storeLabel(s storeSpec) string {
	if s.name == "" {
		return ""
	}
	return " store " + s.name
}

// stores calls f for every open state store.
func (ex *executor) stores(f func(c *chainOp, p int, spec storeSpec, st stateStore) error) error {
	for _, c := range ex.ops {
		for p, sts := range c.st {
			for i, st := range sts {
				if st == nil {
					continue
				}
				if err := f(c, p, c.specs[i], st); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// consume takes one source record through the stateless steps and into the
// first operator's partitions or the output.
func (ex *executor) consume(ctx context.Context, rec arrow.RecordBatch) error {
	if b := ex.srcBranch[ex.curSource]; b >= 0 {
		return ex.consumeBranch(ctx, ex.branches[b], rec)
	}
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
	if !ex.stateful() {
		return ex.emit(ctx, nil, cur)
	}
	c := ex.ops[0]
	prep, late, err := c.op.prepare(ctx, 0, cur, ex.watermark)
	if err != nil {
		return err
	}
	c.late.Add(late)
	if prep.NumRows() == 0 {
		prep.Release()
		return nil
	}
	return ex.feed(ctx, c, prep)
}

// partition prepares rec (owned by the caller) for operator c and splits it
// by c's partition keys.
func (ex *executor) partition(ctx context.Context, c *chainOp, side int, rec arrow.RecordBatch, watermark int64) ([]arrow.RecordBatch, int64, error) {
	prep, late, err := c.op.prepare(ctx, side, rec, watermark)
	if err != nil {
		return nil, 0, err
	}
	defer prep.Release()
	if prep.NumRows() == 0 {
		return nil, late, nil
	}
	if c.single {
		prep.Retain()
		return []arrow.RecordBatch{prep}, late, nil
	}
	parts, err := kernel.Partition(ex.mem, prep, c.op.partitionKeys(side), len(c.parts))
	return parts, late, err
}

// add appends one record's pieces to the partitions' pending input
// (partial states of groups when partial).
func (c *chainOp) add(side int, pieces []arrow.RecordBatch, partial bool) {
	for p, r := range pieces {
		if r == nil {
			continue
		}
		if r.NumRows() == 0 {
			r.Release()
			continue
		}
		c.pending[p] = append(c.pending[p], pendingRec{side: side, rec: r, partial: partial})
	}
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
			if ex.stateful() {
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
	if late == 0 || !ex.stateful() {
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

// dropLate takes out of rec (released) the rows whose event time (column
// ev) is below watermark, for an operator after the first, and counts them.
func (ex *executor) dropLate(ctx context.Context, rec arrow.RecordBatch, ev eventTimeCol, watermark int64) (arrow.RecordBatch, int64, error) {
	if ev.col < 0 || watermark <= 0 {
		return rec, 0, nil
	}
	ms, valid, err := kernel.EventTimesMillis(rec, ev.col)
	if err != nil {
		rec.Release()
		return nil, 0, err
	}
	keep := make([]bool, len(ms))
	late := int64(0)
	for i, t := range ms {
		keep[i] = !valid[i] || t+ev.offsetMs >= watermark
		if !keep[i] {
			late++
		}
	}
	if late == 0 {
		return rec, 0, nil
	}
	next, err := kernel.FilterRows(ctx, ex.mem, rec, keep)
	rec.Release()
	return next, late, err
}

// emit takes a record through the steps (the last operator's) into the
// batch output.
func (ex *executor) emit(ctx context.Context, steps []op, rec arrow.RecordBatch) error {
	cur, err := applySteps(ctx, steps, rec)
	if err != nil {
		return err
	}
	if cur.NumRows() == 0 {
		cur.Release()
		return nil
	}
	ex.out = append(ex.out, cur)
	ex.outRows += cur.NumRows()
	return nil
}

// applySteps runs rec (the caller keeps its reference) through stateless
// steps and returns a new reference.
func applySteps(ctx context.Context, steps []op, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	rec.Retain()
	cur := rec
	for _, o := range steps {
		next, err := o.Apply(ctx, cur)
		cur.Release()
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return cur, nil
}

// finishState runs each operator in chain order: its partitions merge
// their pending rows, finish at the watermark and commit state version
// batchID, all in parallel; then its outputs, in partition order, go
// through the steps that follow, into the next operator's partitions (in
// parallel, appended in partition order) or into the batch output.
func (ex *executor) finishState(ctx context.Context, batchID int64) (commitTime time.Duration, err error) {
	start := time.Now()
	for i, c := range ex.ops {
		last := i == len(ex.ops)-1
		fc := &finishCtx{batchID: batchID, watermark: ex.watermark, prevWatermark: ex.lateWatermark, timestampMs: ex.timestampMs, mode: Append, last: last, mem: ex.mem}
		if last {
			fc.mode = ex.mode
		}
		if err := ex.endInput(ctx, c); err != nil {
			return 0, fmt.Errorf("operator %s: partial aggregation: %w", c.op.id(), err)
		}
		outs, err := ex.finishOperator(ctx, c, fc)
		if err != nil {
			return 0, err
		}
		if last {
			for _, o := range outs {
				if o == nil {
					continue
				}
				if err == nil {
					err = ex.emit(ctx, c.post, o)
				}
				o.Release()
			}
		} else {
			err = ex.route(ctx, c, ex.ops[i+1], outs)
		}
		if err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// finishOperator finishes and commits every partition of c at once (the
// commits are I/O: all of them in flight together).
func (ex *executor) finishOperator(ctx context.Context, c *chainOp, fc *finishCtx) ([]arrow.RecordBatch, error) {
	if c.single {
		return ex.finishWhole(ctx, c, fc)
	}
	start := time.Now()
	outs := make([]arrow.RecordBatch, len(c.parts))
	g, gctx := errgroup.WithContext(ctx)
	for p, part := range c.parts {
		g.Go(func() error {
			pending := c.pending[p]
			c.pending[p] = pending[:0]
			var err error
			if c.disk {
				err = c.lookup(gctx, p, pending, fc)
			}
			for _, pr := range pending {
				if err == nil {
					if pr.partial {
						err = part.(stateMerger).mergeState(pr.rec)
					} else {
						err = part.merge(gctx, pr.side, pr.rec)
					}
				}
				pr.rec.Release()
			}
			if err != nil {
				return fmt.Errorf("operator %s partition %d: %w", c.op.id(), p, err)
			}
			f, err := part.finish(gctx, fc)
			if err != nil {
				return fmt.Errorf("operator %s partition %d: %w", c.op.id(), p, err)
			}
			defer f.release()
			for i, spec := range c.specs {
				ch := f.changes[spec.name]
				// On a disk-backed store the partition holds only the
				// batch's groups: its changes are never the whole state.
				ch.full = ch.full && !c.disk
				if err := commitState(gctx, c.st[p][i], fc.batchID, ch); err != nil {
					return fmt.Errorf("operator %s partition %d%s: commit state version %d: %w", c.op.id(), p, storeLabel(spec), fc.batchID, err)
				}
			}
			part.committed()
			if c.disk {
				if err := part.(diskPart).forget(); err != nil {
					return fmt.Errorf("operator %s partition %d: %w", c.op.id(), p, err)
				}
			}
			c.updated[p], c.removed[p], c.custom[p] = f.updated, f.removed, f.custom
			c.late.Add(f.late)
			if f.out != nil && f.out.NumRows() > 0 {
				f.out.Retain()
				outs[p] = f.out
			}
			return nil
		})
	}
	err := g.Wait()
	c.commitTime = time.Since(start)
	if err != nil {
		for _, o := range outs {
			if o != nil {
				o.Release()
			}
		}
		return nil, err
	}
	return outs, nil
}

// route takes the outputs of from (released here) through its steps, drops
// the rows late for to, and partitions them for to: each output in
// parallel, the pieces appended in partition order, so to's input order is
// a function of the batch alone.
func (ex *executor) route(ctx context.Context, from, to *chainOp, outs []arrow.RecordBatch) error {
	pieces := make([][]arrow.RecordBatch, len(outs))
	// With a combiner the outputs are prepared in parallel and folded in
	// partition order (the order the pieces would be appended in).
	cb, err := ex.combinerOf(to)
	if err != nil {
		for _, o := range outs {
			if o != nil {
				o.Release()
			}
		}
		return err
	}
	var preps []arrow.RecordBatch
	if cb != nil {
		preps = make([]arrow.RecordBatch, len(outs))
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtimeProcs())
	for p, o := range outs {
		if o == nil {
			continue
		}
		g.Go(func() error {
			cur, err := applySteps(gctx, from.post, o)
			if err != nil {
				return err
			}
			cur, late, err := ex.dropLate(gctx, cur, to.evIn, ex.lateWatermark)
			if err != nil {
				return err
			}
			to.late.Add(late)
			defer cur.Release()
			if cur.NumRows() == 0 {
				return nil
			}
			if preps != nil {
				prep, late, err := to.op.prepare(gctx, 0, cur, ex.lateWatermark)
				to.late.Add(late)
				preps[p] = prep
				return err
			}
			ps, late, err := ex.partition(gctx, to, 0, cur, ex.lateWatermark)
			to.late.Add(late)
			pieces[p] = ps
			return err
		})
	}
	err = g.Wait()
	for _, o := range outs {
		if o != nil {
			o.Release()
		}
	}
	for _, prep := range preps {
		switch {
		case prep == nil:
		case err != nil || prep.NumRows() == 0:
			prep.Release()
		default:
			err = ex.feed(ctx, to, prep)
		}
	}
	for _, ps := range pieces {
		if err != nil {
			for _, r := range ps {
				if r != nil {
					r.Release()
				}
			}
			continue
		}
		to.add(0, ps, false)
	}
	return err
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
	for _, c := range ex.ops {
		for p, pend := range c.pending {
			for _, pr := range pend {
				pr.rec.Release()
			}
			c.pending[p] = pend[:0]
			c.updated[p], c.removed[p], c.custom[p] = 0, 0, nil
		}
		c.late.Store(0)
		c.commitTime = 0
		if c.comb != nil {
			c.comb.reset()
		}
	}
}

func (ex *executor) release() {
	ex.reset()
	ex.closeDisk()
	for _, c := range ex.ops {
		for _, p := range c.parts {
			if p != nil {
				p.release()
			}
		}
		if c.comb != nil {
			c.comb.release()
		}
		if c.wmem != nil {
			c.wmem.close()
		}
		c.op.release()
	}
}
