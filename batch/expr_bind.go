package batch

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/scalar"
)

func arithVerb(o op) string {
	switch o {
	case opAdd:
		return "add"
	case opSub:
		return "subtract"
	case opMul:
		return "multiply"
	case opDiv:
		return "divide"
	}
	return "take the remainder of"
}

// compareFn is the arrow compute function of a comparison.
func compareFn(o op) string {
	switch o {
	case opEq:
		return "equal"
	case opNe:
		return "not_equal"
	case opLt:
		return "less"
	case opLe:
		return "less_equal"
	case opGt:
		return "greater"
	}
	return "greater_equal"
}

func (c *callExpr) bind(b *binder) (node, error) {
	label := c.String()
	args := make([]node, len(c.args))
	for i, a := range c.args {
		n, err := a.bind(b)
		if err != nil {
			return nil, err
		}
		if d, ok := n.dtype().(*arrow.DictionaryType); ok {
			// Functions see dictionary-encoded columns decoded.
			n = castNode(n, d.ValueType, label)
		}
		args[i] = n
	}
	switch c.op {
	case opAdd, opSub, opMul, opDiv, opMod:
		return b.bindArith(c.op, label, args[0], args[1])
	case opNeg:
		a := args[0]
		switch t := a.dtype(); {
		case isNull(t):
			return b.coerce(a, int64T, label)
		case isInt(t) || isFloat(t):
			to := int64T
			if isFloat(t) {
				to = float64T
			}
			a, err := b.coerce(a, to, label)
			if err != nil {
				return nil, err
			}
			return &fnNode{typ: to, args: []node{zeroOf(to), a}, run: arithRun(label, opNeg, to)}, nil
		case isDuration(t):
			return &fnNode{typ: t, args: []node{zeroOf(t), a}, run: arithRun(label, opNeg, t)}, nil
		default:
			return nil, bindErr(ErrType, label, fmt.Sprintf("cannot negate %s", t))
		}
	case opEq, opNe, opLt, opLe, opGt, opGe:
		l, r := args[0], args[1]
		t := common(l.dtype(), r.dtype())
		if t == nil || (!isNull(t) && !isNumeric(t) && !isString(t) && !isTimestamp(t) && !isDuration(t) &&
			t.ID() != arrow.BOOL && t.ID() != arrow.DATE32 && t.ID() != arrow.DATE64) {
			return nil, bindErr(ErrType, label, fmt.Sprintf("cannot compare %s and %s", l.dtype(), r.dtype()))
		}
		if isNull(t) {
			return &litNode{sc: scalar.MakeNullScalar(boolT)}, nil
		}
		if t.ID() == arrow.BOOL && c.op != opEq && c.op != opNe {
			return nil, bindErr(ErrType, label, "booleans compare only with Eq and Ne")
		}
		ops, err := b.coerceAll(args, t, label)
		if err != nil {
			return nil, err
		}
		return &fnNode{typ: boolT, args: ops, run: computeRun(label, compareFn(c.op), nil)}, nil
	case opAnd, opOr, opNot:
		ops, err := b.wantBool(args, c.args, label)
		if err != nil {
			return nil, err
		}
		switch c.op {
		case opAnd:
			return &fnNode{typ: boolT, args: ops, run: computeRun(label, "and_kleene", nil)}, nil
		case opOr:
			return &fnNode{typ: boolT, args: ops, run: computeRun(label, "or_kleene", nil)}, nil
		}
		return &fnNode{typ: boolT, args: ops, run: notRun}, nil
	case opIsNull, opIsNotNull:
		return &fnNode{typ: boolT, args: args, run: isNullRun(c.op == opIsNull)}, nil
	case opIn:
		return b.bindIn(c, label, args[0])
	case opCast:
		if arrow.TypeEqual(args[0].dtype(), c.to) {
			return args[0], nil
		}
		if !compute.CanCast(args[0].dtype(), c.to) {
			return nil, bindErr(ErrType, label, fmt.Sprintf("cannot cast %s to %s", args[0].dtype(), c.to))
		}
		return b.coerce(args[0], c.to, label)
	case opIf:
		cond, err := b.wantBool(args[:1], c.args, label)
		if err != nil {
			return nil, err
		}
		t, ops, err := b.unify(args[1:], label)
		if err != nil {
			return nil, err
		}
		if !gatherable(t) {
			return nil, bindErr(ErrType, label, fmt.Sprintf("type %s is not supported", t))
		}
		return &ifNode{typ: t, cond: cond[0], then: ops[0], els: ops[1]}, nil
	case opCoalesce:
		if len(args) == 0 {
			return nil, bindErr(ErrType, label, "needs at least one argument")
		}
		t, ops, err := b.unify(args, label)
		if err != nil {
			return nil, err
		}
		if len(ops) == 1 {
			return ops[0], nil
		}
		if !gatherable(t) {
			return nil, bindErr(ErrType, label, fmt.Sprintf("type %s is not supported", t))
		}
		return &coalesceNode{typ: t, args: ops}, nil
	case opUpper, opLower, opSubstr, opLength, opStartsWith, opContains:
		a, err := b.wantString(args[0], c.args[0], label)
		if err != nil {
			return nil, err
		}
		return b.bindString(c, a)
	case opConcat:
		if len(args) == 0 {
			return nil, bindErr(ErrType, label, "needs at least one argument")
		}
		for i := range args {
			a, err := b.wantString(args[i], c.args[i], label)
			if err != nil {
				return nil, err
			}
			args[i] = a
		}
		return &fnNode{typ: utf8T, args: args, run: concatRun}, nil
	case opDateTrunc, opYear, opMonth, opDay, opHour, opFormatTime:
		a, err := b.wantTimestamp(args[0], c.args[0], label)
		if err != nil {
			return nil, err
		}
		return b.bindTime(c, label, a)
	case opParseTime:
		a, err := b.wantString(args[0], c.args[0], label)
		if err != nil {
			return nil, err
		}
		return &fnNode{typ: tsMicroUTC, args: []node{a}, run: parseTimeRun(label, c.str)}, nil
	}
	return nil, bindErr(ErrType, label, "unknown operation")
}

func (b *binder) bindArith(o op, label string, l, r node) (node, error) {
	lt, rt := l.dtype(), r.dtype()
	if isNull(lt) && isNull(rt) {
		lt, rt = int64T, int64T
	} else if isNull(lt) {
		lt = rt
	} else if isNull(rt) {
		rt = lt
	}
	fail := func() (node, error) {
		return nil, bindErr(ErrType, label, fmt.Sprintf("cannot %s %s and %s", arithVerb(o), l.dtype(), r.dtype()))
	}
	var lto, rto, out arrow.DataType
	switch {
	case isNumeric(lt) && isNumeric(rt):
		out = int64T
		if isFloat(lt) || isFloat(rt) {
			out = float64T
		}
		lto, rto = out, out
	case (o == opAdd || o == opSub) && isTimestamp(lt) && isDuration(rt):
		ts := lt.(*arrow.TimestampType)
		unit := finer(ts.Unit, unitOf(rt))
		out = &arrow.TimestampType{Unit: unit, TimeZone: ts.TimeZone}
		lto, rto = out, &arrow.DurationType{Unit: unit}
	case o == opAdd && isDuration(lt) && isTimestamp(rt):
		ts := rt.(*arrow.TimestampType)
		unit := finer(ts.Unit, unitOf(lt))
		out = &arrow.TimestampType{Unit: unit, TimeZone: ts.TimeZone}
		lto, rto = &arrow.DurationType{Unit: unit}, out
	case o == opSub && isTimestamp(lt) && isTimestamp(rt):
		t, ok := commonTime(lt.(*arrow.TimestampType), rt.(*arrow.TimestampType))
		if !ok {
			return fail()
		}
		lto, rto, out = t, t, &arrow.DurationType{Unit: t.Unit}
	case (o == opAdd || o == opSub) && isDuration(lt) && isDuration(rt):
		out = &arrow.DurationType{Unit: finer(unitOf(lt), unitOf(rt))}
		lto, rto = out, out
	default:
		return fail()
	}
	l, err := b.coerce(l, lto, label)
	if err != nil {
		return nil, err
	}
	r, err = b.coerce(r, rto, label)
	if err != nil {
		return nil, err
	}
	args := []node{l, r}
	switch {
	case o == opDiv || o == opMod:
		return &fnNode{typ: out, args: args, run: divModRun(label, o == opMod, out)}, nil
	default:
		return &fnNode{typ: out, args: args, run: arithRun(label, o, out)}, nil
	}
}

func (b *binder) coerceAll(args []node, t arrow.DataType, label string) ([]node, error) {
	out := make([]node, len(args))
	for i, a := range args {
		n, err := b.coerce(a, t, label)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// unify converts args to their common type.
func (b *binder) unify(args []node, label string) (arrow.DataType, []node, error) {
	t := args[0].dtype()
	for _, a := range args[1:] {
		c := common(t, a.dtype())
		if c == nil {
			return nil, nil, bindErr(ErrType, label, fmt.Sprintf("%s and %s have no common type", t, a.dtype()))
		}
		t = c
	}
	ops, err := b.coerceAll(args, t, label)
	return t, ops, err
}

// wantBool checks that args (printed as names) are boolean.
func (b *binder) wantBool(args []node, names []Expr, label string) ([]node, error) {
	for i, a := range args {
		if t := a.dtype(); t.ID() != arrow.BOOL && !isNull(t) {
			return nil, bindErr(ErrType, label, fmt.Sprintf("%s is %s, want bool", names[i], t))
		}
	}
	return b.coerceAll(args, boolT, label)
}

func (b *binder) wantString(a node, name Expr, label string) (node, error) {
	t := a.dtype()
	if !isString(t) && !isNull(t) {
		return nil, bindErr(ErrType, label, fmt.Sprintf("%s is %s, want a string", name, t))
	}
	return b.coerce(a, utf8T, label)
}

func (b *binder) wantTimestamp(a node, name Expr, label string) (node, error) {
	t := a.dtype()
	if isNull(t) {
		return b.coerce(a, tsMicroUTC, label)
	}
	ts, ok := t.(*arrow.TimestampType)
	if !ok {
		return nil, bindErr(ErrType, label, fmt.Sprintf("%s is %s, want a timestamp", name, t))
	}
	if !utcZone(ts.TimeZone) {
		return nil, bindErr(ErrType, label, fmt.Sprintf("time zone %q is not supported: only UTC timestamps", ts.TimeZone))
	}
	return a, nil
}

func (b *binder) bindIn(c *callExpr, label string, a node) (node, error) {
	t := a.dtype()
	if isNull(t) {
		return &litNode{sc: scalar.MakeNullScalar(boolT)}, nil
	}
	mem := b.mem
	set := make([]arrow.Array, 0, len(c.vals))
	defer func() {
		for _, s := range set {
			s.Release()
		}
	}()
	for _, v := range c.vals {
		sc, err := litScalar(v)
		if err != nil {
			return nil, bindErr(ErrType, label, err.Error())
		}
		if !isNull(sc.DataType()) && common(t, sc.DataType()) == nil {
			return nil, bindErr(ErrType, label, fmt.Sprintf("value %s (%s) cannot match %s", sc, sc.DataType(), t))
		}
		sc, err = b.foldCast(sc, t)
		if err != nil {
			return nil, bindErr(ErrConvert, label, fmt.Sprintf("value %v does not convert to %s: %v", v, t, err))
		}
		arr, err := scalar.MakeArrayFromScalar(sc, 1, mem)
		if err != nil {
			return nil, bindErr(ErrType, label, err.Error())
		}
		set = append(set, arr)
	}
	var valueSet arrow.Array
	if len(set) == 0 {
		valueSet = array.MakeArrayOfNull(mem, t, 0)
	} else {
		var err error
		valueSet, err = array.Concatenate(set, mem)
		if err != nil {
			return nil, bindErr(ErrType, label, err.Error())
		}
	}
	// valueSet lives as long as the node, on the Go heap.
	opts := &compute.SetOptions{ValueSet: compute.NewDatumWithoutOwning(valueSet), NullBehavior: compute.NullMatchingInconclusive}
	return &fnNode{typ: boolT, args: []node{a}, run: computeRun(label, "is_in", opts)}, nil
}
