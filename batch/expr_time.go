package batch

import (
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/compute"
)

func truncUnit(unit string) (compute.RoundTemporalUnit, bool) {
	switch unit {
	case "second":
		return compute.RoundTemporalSecond, true
	case "minute":
		return compute.RoundTemporalMinute, true
	case "hour":
		return compute.RoundTemporalHour, true
	case "day":
		return compute.RoundTemporalDay, true
	case "month":
		return compute.RoundTemporalMonth, true
	case "year":
		return compute.RoundTemporalYear, true
	}
	return 0, false
}

// perSecond is how many units of u make a second.
func perSecond(u arrow.TimeUnit) int64 {
	switch u {
	case arrow.Second:
		return 1
	case arrow.Millisecond:
		return 1e3
	case arrow.Microsecond:
		return 1e6
	}
	return 1e9
}

func toTime(v int64, u arrow.TimeUnit) time.Time {
	switch u {
	case arrow.Second:
		return time.Unix(v, 0).UTC()
	case arrow.Millisecond:
		return time.UnixMilli(v).UTC()
	case arrow.Microsecond:
		return time.UnixMicro(v).UTC()
	}
	return time.Unix(0, v).UTC()
}

func (b *binder) bindTime(c *callExpr, label string, a node) (node, error) {
	t := a.dtype().(*arrow.TimestampType)
	args := []node{a}
	switch c.op {
	case opDateTrunc:
		u, ok := truncUnit(c.str)
		if !ok {
			return nil, bindErr(ErrType, label, fmt.Sprintf("unknown unit %q; want second, minute, hour, day, month or year", c.str))
		}
		opts := compute.DefaultRoundTemporalOptions
		opts.Unit = u
		return &fnNode{typ: t, args: args, run: computeRun(label, "floor_temporal", &opts)}, nil
	case opFormatTime:
		layout := c.str
		return &fnNode{typ: utf8T, args: args, run: func(ec *evalCtx, args []value) (value, error) {
			arr, err := args[0].array(ec.mem, ec.n)
			if err != nil {
				return value{}, err
			}
			defer arr.Release()
			vals, ok := fixedValues[int64](arr), validity(arr)
			w := newStrOut(ec.mem, ec.n, ec.n*len(layout))
			for i := range ec.n {
				if ok.valid(i) {
					w.data = toTime(vals[i], t.Unit).AppendFormat(w.data, layout)
				}
				w.end(i)
			}
			return w.finish(ec.mem, ec.n, copyValidity(ec.mem, arr))
		}}, nil
	}
	field := c.op
	unitsPerDay := 86400 * perSecond(t.Unit)
	unitsPerHour := 3600 * perSecond(t.Unit)
	return &fnNode{typ: int64T, args: args, run: func(ec *evalCtx, args []value) (value, error) {
		arr, err := args[0].array(ec.mem, ec.n)
		if err != nil {
			return value{}, err
		}
		defer arr.Release()
		vals, ok := fixedValues[int64](arr), validity(arr)
		buf, out := newFixed[int64](ec.mem, ec.n)
		for i := range ec.n {
			if !ok.valid(i) {
				continue
			}
			days := floorDiv(vals[i], unitsPerDay)
			switch field {
			case opHour:
				out[i] = (vals[i] - days*unitsPerDay) / unitsPerHour
			default:
				y, m, d := civil(days)
				switch field {
				case opYear:
					out[i] = y
				case opMonth:
					out[i] = m
				default:
					out[i] = d
				}
			}
		}
		return value{arr: makeArray(int64T, ec.n, copyValidity(ec.mem, arr), buf)}, nil
	}}, nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// civil converts days since 1970-01-01 to a proleptic Gregorian date
// (Howard Hinnant's days-to-civil algorithm).
func civil(z int64) (y, m, d int64) {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	if mp < 10 {
		m = mp + 3
	} else {
		m = mp - 9
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

func parseTimeRun(label, layout string) func(*evalCtx, []value) (value, error) {
	return func(ec *evalCtx, args []value) (value, error) {
		arr, err := args[0].array(ec.mem, ec.n)
		if err != nil {
			return value{}, err
		}
		defer arr.Release()
		s := strsOf(arr)
		buf, out := newFixed[int64](ec.mem, ec.n)
		for i := range ec.n {
			if !s.ok.valid(i) {
				continue
			}
			tm, err := time.ParseInLocation(layout, string(s.at(i)), time.UTC)
			if err != nil {
				buf.Release()
				orig := ec.origRow(i)
				return value{}, rowErr(ErrConvert, label, orig,
					fmt.Sprintf("row %d: value %s does not parse with layout %s: %v", orig, quote(string(s.at(i))), quote(layout), err))
			}
			out[i] = tm.UnixMicro()
		}
		return value{arr: makeArray(tsMicroUTC, ec.n, copyValidity(ec.mem, arr), buf)}, nil
	}
}
