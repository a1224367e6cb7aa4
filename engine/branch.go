package engine

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/internal/kernel"
)

// A branch is the second input of a two-input operator (a join): sources
// of the query's source list, [first, first+n), read with the main chain's
// in the same batch and the same offsets/N, taken through their own
// stateless steps and watermark, and fed straight into side 1 of the
// operator. Its rows are late for the operator by the same watermark as
// the operator's main input.
type branch struct {
	first, n int
	pre      []op
	schema   *arrow.Schema // leaving pre
	wm       *watermarkStep
	wmIdx    int // in schema; -1 without a watermark
	side     int
	target   *chainOp
}

// twoInputs is an operator with a branch.
type twoInputs interface {
	branch() *branch
}

// mainSources marks, per source of s, the branch it feeds: -1 for the main
// chain, otherwise the branch's number in the order of the steps.
func mainSources(s *Stream) []int {
	out := make([]int, len(s.sources))
	for i := range out {
		out[i] = -1
	}
	b := 0
	for _, st := range s.steps {
		if st.kind != stepJoin || st.join.right == nil {
			continue
		}
		for i := st.join.first; i < st.join.first+len(st.join.right.sources) && i < len(out); i++ {
			out[i] = b
		}
		b++
	}
	return out
}

func (ex *executor) addBranch(b *branch, c *chainOp) {
	b.target = c
	ex.branches = append(ex.branches, b)
}

// bindBranch binds the stateless steps of a join's right stream.
func bindBranch(cfg *config, s *Stream, first int) (*branch, error) {
	if s == nil || len(s.sources) == 0 {
		return nil, fmt.Errorf("the right side has no source")
	}
	schema := s.sources[0].Schema()
	for i, src := range s.sources[1:] {
		if !src.Schema().Equal(schema) {
			return nil, fmt.Errorf("right side: source %d (%s) has schema %s, but its source 0 (%s) has %s; unioned sources need one schema",
				i+1, describe(src), src.Schema(), describe(s.sources[0]), schema)
		}
	}
	b := &branch{first: first, n: len(s.sources), wmIdx: -1, side: 1}
	for i, st := range s.steps {
		switch st.kind {
		case stepSelect:
			p, err := batch.NewProjection(cfg.mem, schema, st.cols)
			if err != nil {
				return nil, fmt.Errorf("right side step %d: %w", i+1, err)
			}
			b.pre = append(b.pre, p)
			schema = p.Schema()
		case stepWithColumn, stepDrop:
			cols, err := keptColumns(schema, st)
			if err != nil {
				return nil, fmt.Errorf("right side step %d: %w", i+1, err)
			}
			p, err := batch.NewProjection(cfg.mem, schema, cols)
			if err != nil {
				return nil, fmt.Errorf("right side step %d: %w", i+1, err)
			}
			b.pre = append(b.pre, p)
			schema = p.Schema()
		case stepWhere:
			f, err := batch.NewFilter(cfg.mem, schema, st.pred)
			if err != nil {
				return nil, fmt.Errorf("right side step %d: %w", i+1, err)
			}
			b.pre = append(b.pre, f)
		case stepWatermark:
			if b.wm != nil {
				return nil, fmt.Errorf("right side step %d: a second watermark (on %q after %q)", i+1, st.wm.col, b.wm.col)
			}
			if err := checkTimestampCol(schema, st.wm.col); err != nil {
				return nil, fmt.Errorf("right side step %d: watermark: %w", i+1, err)
			}
			if st.wm.delay < 0 {
				return nil, fmt.Errorf("right side step %d: watermark delay %s is negative", i+1, st.wm.delay)
			}
			b.wm = st.wm
		default:
			return nil, fmt.Errorf("right side step %d: the right side of a join takes stateless steps and a watermark only (put stateful steps after the join, or join the other way round)", i+1)
		}
	}
	if b.wm != nil {
		idx := schema.FieldIndices(b.wm.col)
		if len(idx) != 1 {
			return nil, fmt.Errorf("right side: the watermark column %q does not reach the join (schema %s)", b.wm.col, schema)
		}
		b.wmIdx = idx[0]
	}
	b.schema = schema
	return b, nil
}

// consumeBranch takes one record of a branch's source through the
// branch's steps, records its event times, drops the rows late for the
// target operator (counted on it) and partitions the rest into it.
func (ex *executor) consumeBranch(ctx context.Context, b *branch, rec arrow.RecordBatch) error {
	cur, err := applySteps(ctx, b.pre, rec)
	if err != nil {
		return err
	}
	defer func() { cur.Release() }()
	if cur.NumRows() == 0 {
		return nil
	}
	c := b.target
	wm := ex.lateWatermark
	if len(ex.ops) > 0 && ex.ops[0] == c {
		wm = ex.watermark
	}
	if b.wmIdx >= 0 {
		ms, valid, err := kernel.EventTimesMillis(cur, b.wmIdx)
		if err != nil {
			return err
		}
		keep := make([]bool, len(ms))
		late := int64(0)
		for i, t := range ms {
			if !valid[i] {
				return fmt.Errorf("event-time column %q of the right side of %s is null in row %d: a row without an event time cannot be placed against the watermark", b.wm.col, c.op.id(), i)
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
			keep[i] = t >= wm
			if !keep[i] {
				late++
			}
		}
		if late > 0 {
			c.late.Add(late)
			next, err := kernel.FilterRows(ctx, ex.mem, cur, keep)
			if err != nil {
				return err
			}
			cur.Release()
			cur = next
			if cur.NumRows() == 0 {
				return nil
			}
		}
	}
	pieces, late, err := ex.partition(ctx, c, b.side, cur, wm)
	if err != nil {
		return err
	}
	c.late.Add(late)
	c.add(b.side, pieces, false)
	return nil
}

// sourceDelay is the watermark delay of the branch source i feeds (false:
// that branch has no watermark, and the source does not hold it back).
func (ex *executor) sourceDelay(i int) (int64, bool) {
	if i < len(ex.srcBranch) && ex.srcBranch[i] >= 0 {
		b := ex.branches[ex.srcBranch[i]]
		if b.wm == nil {
			return 0, false
		}
		return b.wm.delay.Milliseconds(), true
	}
	if ex.wm == nil {
		return 0, false
	}
	return ex.wm.delay.Milliseconds(), true
}

// watermarked reports whether some input of the query has a watermark.
func (ex *executor) watermarked() bool {
	if ex.wm != nil {
		return true
	}
	for _, b := range ex.branches {
		if b.wm != nil {
			return true
		}
	}
	return false
}
