package batch

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// call runs an arrow compute function over args.
func callCompute(ec *evalCtx, name string, opts compute.FunctionOptions, args []value) (value, error) {
	var buf [3]compute.Datum
	ds := buf[:0]
	for _, a := range args {
		ds = append(ds, a.datum())
	}
	d, err := compute.CallFunction(ec.ctx, name, opts, ds...)
	if err != nil {
		return value{}, err
	}
	return fromDatum(ec, d)
}

// computeRun is a kernel that cannot fail on data (comparisons, logic).
func computeRun(label, name string, opts compute.FunctionOptions) func(*evalCtx, []value) (value, error) {
	return func(ec *evalCtx, args []value) (value, error) {
		v, err := callCompute(ec, name, opts, args)
		if err != nil {
			return value{}, fmt.Errorf("batch: %s: arrow %s: %w", label, name, err)
		}
		return v, nil
	}
}

// firstBad finds the first row at which try fails, knowing that it fails on
// all n rows: try(k) evaluates rows [0, k). Errors of these kernels are
// monotone in the prefix, so a binary search needs log2(n) evaluations, paid
// only on the error path.
func firstBad(n int, try func(k int) error) int {
	lo, hi := 0, n // try(lo) passes, try(hi) fails
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if try(mid) != nil {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi - 1
}

// locate runs kernel over prefixes of args to find the first failing row,
// and returns it with the error of that row alone (a kernel's error over many
// rows may describe another one).
func locate(ec *evalCtx, args []value, kernel func([]value) (value, error)) (int, error) {
	try := func(i, j int) error {
		sl := make([]value, len(args))
		for k, a := range args {
			sl[k] = a.slice(i, j)
		}
		defer func() {
			for _, s := range sl {
				s.release()
			}
		}()
		v, err := kernel(sl)
		if err == nil {
			v.release()
		}
		return err
	}
	if ec.n == 0 {
		return 0, try(0, 0)
	}
	row := firstBad(ec.n, func(k int) error { return try(0, k) })
	return row, try(row, row+1)
}

// castOptions is arrow's safe cast, except that integers convert to floats
// with rounding (as in SQL) instead of failing beyond 2^53.
func castOptions(from, to arrow.DataType) *compute.CastOptions {
	opts := compute.SafeCastOptions(to)
	if isInt(from) && isFloat(to) {
		opts.AllowFloatTruncate = true
	}
	return opts
}

// castNode converts a column with arrow's safe cast.
func castNode(n node, to arrow.DataType, label string) node {
	opts := castOptions(n.dtype(), to)
	kernel := func(ec *evalCtx, args []value) (value, error) {
		ctx := ec.ctx
		if isString(to) || to.ID() == arrow.BINARY || to.ID() == arrow.LARGE_BINARY {
			// arrow-go v18.8.0's casts to strings leak builder memory from
			// the allocator they are given: give them the Go heap's.
			ctx = withMem(ctx, memory.DefaultAllocator)
		}
		d, err := compute.CastDatum(ctx, args[0].datum(), opts)
		if err != nil {
			return value{}, err
		}
		return fromDatum(ec, d)
	}
	return &fnNode{typ: to, args: []node{n}, run: func(ec *evalCtx, args []value) (value, error) {
		v, err := kernel(ec, args)
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, arrow.ErrInvalid) {
			return value{}, fmt.Errorf("batch: %s: %w", label, err)
		}
		row, rerr := locate(ec, args, func(sl []value) (value, error) { return kernel(ec, sl) })
		if rerr != nil {
			err = rerr
		}
		orig := ec.origRow(row)
		return value{}, rowErr(ErrConvert, label, orig,
			fmt.Sprintf("row %d: value %s does not convert to %s: %v", orig, args[0].str(row), to, err))
	}}
}
