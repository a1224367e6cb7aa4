package batch

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// The rows after slicing (see exprRows):
//   a:   10, -7, null, 0
//   b:   3, 2, 5, null
//   i32: 10, -7, null, 0
//   u8:  200, 0, null, 1
//   f:   1.5, -2.25, null, 0
//   s:   "Hello", "wörld", null, ""
//   ok:  true, false, null, true
//   ts:  2026-11-30T13:45:56.123456Z, 1969-12-31T23:59:59.999999Z, null, 2024-02-29T00:00:00Z
//   d:   1s, -5us, null, 0

func TestExprFunctions(t *testing.T) {
	ts := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		e    Expr
		want string // JSON of the result column
		typ  string // result type, when checked
	}{
		// arithmetic
		{"add int", Add(Col("a"), Col("b")), `[13,-5,null,null]`, "int64"},
		{"add widths", Add(Col("i32"), Col("u8")), `[210,-7,null,1]`, "int64"},
		{"add lit", Add(Col("a"), Lit(100)), `[110,93,null,100]`, "int64"},
		{"add lit left", Add(Lit(int32(1)), Col("i32")), `[11,-6,null,1]`, "int64"},
		{"add float", Add(Col("a"), Col("f")), `[11.5,-9.25,null,0]`, "float64"},
		{"add null lit", Add(Col("a"), Lit(nil)), `[null,null,null,null]`, "int64"},
		{"sub", Sub(Col("a"), Col("b")), `[7,-9,null,null]`, "int64"},
		{"mul", Mul(Col("a"), Lit(100)), `[1000,-700,null,0]`, "int64"},
		{"mul float lit", Mul(Col("a"), Lit(0.5)), `[5,-3.5,null,0]`, "float64"},
		{"div trunc", Div(Col("a"), Col("b")), `[3,-3,null,null]`, "int64"},
		{"div float", Div(Col("f"), Lit(0.5)), `[3,-4.5,null,0]`, "float64"},
		{"div int by float", Div(Col("a"), Lit(4.0)), `[2.5,-1.75,null,0]`, "float64"},
		{"div null divisor is null not error", Div(Col("a"), Lit(nil)), `[null,null,null,null]`, "int64"},
		{"mod", Mod(Col("a"), Col("b")), `[1,-1,null,null]`, "int64"},
		{"mod lit", Mod(Col("a"), Lit(3)), `[1,-1,null,0]`, "int64"},
		{"mod float", Mod(Col("f"), Lit(1.0)), `[0.5,-0.25,null,0]`, "float64"},
		{"neg", Neg(Col("i32")), `[-10,7,null,0]`, "int64"},
		{"neg float", Neg(Col("f")), `[-1.5,2.25,null,-0]`, "float64"},
		{"neg duration", Neg(Col("d")), `["-1000000us","5us",null,"0us"]`, "duration[us]"},
		{"ts plus duration", Add(Col("ts"), Lit(time.Hour)), `["2026-11-30T14:45:56.123456Z","1970-01-01T00:59:59.999999Z",null,"2024-02-29T01:00:00Z"]`, "timestamp[us, tz=UTC]"},
		{"duration plus ts", Add(Col("d"), Col("ts")), `["2026-11-30T13:45:57.123456Z","1969-12-31T23:59:59.999994Z",null,"2024-02-29T00:00:00Z"]`, "timestamp[us, tz=UTC]"},
		{"ts minus duration", Sub(Col("ts"), Col("d")), `["2026-11-30T13:45:55.123456Z","1970-01-01T00:00:00.000004Z",null,"2024-02-29T00:00:00Z"]`, "timestamp[us, tz=UTC]"},
		{"ts minus ts", Sub(Col("ts"), Lit(ts)), `["49556123456us","-1795996800000001us",null,"-86832000000000us"]`, "duration[us]"},
		{"ms ts minus us ts", Sub(Col("tsms"), Col("ts")), `["-456us","-999us",null,"0us"]`, "duration[us]"},
		{"duration plus duration", Add(Col("d"), Col("d")), `["2000000us","-10us",null,"0us"]`, "duration[us]"},

		// comparison
		{"eq", Eq(Col("a"), Col("i32")), `[true,true,null,true]`, "bool"},
		{"lt widths", Lt(Col("i32"), Col("u8")), `[true,true,null,true]`, "bool"},
		{"gt float", Gt(Col("f"), Col("a")), `[false,true,null,false]`, "bool"},
		{"ge lit", Ge(Col("a"), Lit(0)), `[true,false,null,true]`, "bool"},
		{"le lit float", Le(Col("a"), Lit(9.5)), `[false,true,null,true]`, "bool"},
		{"ne string", Ne(Col("s"), Lit("Hello")), `[false,true,null,true]`, "bool"},
		{"lt string", Lt(Col("s"), Lit("i")), `[true,false,null,true]`, "bool"},
		{"eq large string", Eq(Col("ls"), Col("s")), `[true,true,null,true]`, "bool"},
		{"ts vs lit", Gt(Col("ts"), Lit(ts)), `[true,false,null,false]`, "bool"},
		{"ts ms vs us", Lt(Col("tsms"), Col("ts")), `[true,true,null,false]`, "bool"},
		{"bool eq", Eq(Col("ok"), Lit(true)), `[true,false,null,true]`, "bool"},
		{"eq null", Eq(Col("a"), Lit(nil)), `[null,null,null,null]`, "bool"},
		{"duration lt", Lt(Col("d"), Lit(time.Second)), `[false,true,null,true]`, "bool"},

		// logic
		{"and kleene", And(Col("ok"), Gt(Col("a"), Lit(-100))), `[true,false,null,true]`, "bool"},
		{"and null false", And(Lit(nil), Col("ok")), `[null,false,null,null]`, "bool"},
		{"or kleene", Or(Col("ok"), Lit(nil)), `[true,null,null,true]`, "bool"},
		{"or true", Or(Col("ok"), Lit(true)), `[true,true,true,true]`, "bool"},
		{"not", Not(Col("ok")), `[false,true,null,false]`, "bool"},
		{"is null", IsNull(Col("a")), `[false,false,true,false]`, "bool"},
		{"is not null", IsNotNull(Col("s")), `[true,true,false,true]`, "bool"},
		{"is null of null column", IsNull(Col("nul")), `[true,true,true,true]`, "bool"},
		{"in", In(Col("a"), 10, 0), `[true,false,null,true]`, "bool"},
		{"in int32", In(Col("i32"), 10, 5), `[true,false,null,false]`, "bool"},
		{"in with null", In(Col("a"), 10, nil), `[true,null,null,null]`, "bool"},
		{"in strings", In(Col("s"), "wörld", ""), `[false,true,null,true]`, "bool"},
		{"in empty", In(Col("a")), `[false,false,null,false]`, "bool"},

		// cast, if, coalesce
		{"cast int32", Cast(Col("a"), arrow.PrimitiveTypes.Int32), `[10,-7,null,0]`, "int32"},
		{"cast string", Cast(Col("a"), arrow.BinaryTypes.String), `["10","-7",null,"0"]`, "utf8"},
		{"cast float to int", Cast(Col("f"), arrow.PrimitiveTypes.Int64), ``, ""}, // 1.5 truncates: error case below
		{"cast lit", Cast(Lit("42"), arrow.PrimitiveTypes.Int64), `[42,42,42,42]`, "int64"},
		{"if", If(Col("ok"), Col("a"), Col("b")), `[10,2,5,0]`, "int64"},
		{"if widen", If(Col("ok"), Col("i32"), Col("f")), `[10,-2.25,null,0]`, "float64"},
		{"if lit", If(Gt(Col("a"), Lit(0)), Lit("pos"), Lit("other")), `["pos","other","other","other"]`, "utf8"},
		{"if strings", If(Col("ok"), Col("s"), Lit(nil)), `["Hello",null,null,""]`, "utf8"},
		{"if bool", If(Col("ok"), Lit(false), Col("ok")), `[false,false,null,false]`, "bool"},
		{"if ts", If(Col("ok"), Col("ts"), Lit(ts)), `["2026-11-30T13:45:56.123456Z","2026-11-30T00:00:00Z","2026-11-30T00:00:00Z","2024-02-29T00:00:00Z"]`, "timestamp[us, tz=UTC]"},
		{"if const cond", If(Lit(true), Col("a"), Col("b")), `[10,-7,null,0]`, "int64"},
		{"if guards division", If(Col("ok"), Div(Col("a"), Col("u8")), Lit(-1)), `[0,-1,-1,0]`, "int64"},
		{"if guards division by zero test", If(Eq(Col("u8"), Lit(0)), Lit(nil), Div(Col("b"), Col("u8"))), `[0,null,null,null]`, "int64"},
		{"nested if", If(Col("ok"), If(Gt(Col("a"), Lit(0)), Lit("pos"), Upper(Col("s"))), Concat(Col("s"), Lit("?"))), `["pos","wörld?",null,""]`, "utf8"},
		{"coalesce evaluates lazily", Coalesce(Col("b"), Div(Col("a"), Col("u8"))), `[3,2,5,0]`, "int64"},
		{"coalesce", Coalesce(Col("a"), Col("b"), Lit(-1)), `[10,-7,5,0]`, "int64"},
		{"coalesce strings", Coalesce(Col("s"), Lit("none")), `["Hello","wörld","none",""]`, "utf8"},
		{"coalesce one", Coalesce(Col("a")), `[10,-7,null,0]`, "int64"},
		{"coalesce null column", Coalesce(Col("nul"), Col("i32")), `[10,-7,null,0]`, "int32"},
		{"coalesce bool", Coalesce(Col("ok"), Lit(false)), `[true,false,false,true]`, "bool"},

		// strings
		{"upper", Upper(Col("s")), `["HELLO","WÖRLD",null,""]`, "utf8"},
		{"lower", Lower(Col("s")), `["hello","wörld",null,""]`, "utf8"},
		{"upper large", Upper(Col("ls")), `["HELLO","WÖRLD",null,""]`, "utf8"},
		{"concat", Concat(Col("s"), Lit("-"), Col("s")), `["Hello-Hello","wörld-wörld",null,"-"]`, "utf8"},
		{"substr", Substr(Col("s"), 2, 3), `["ell","örl",null,""]`, "utf8"},
		{"substr before start", Substr(Col("s"), 0, 3), `["He","wö",null,""]`, "utf8"},
		{"substr past end", Substr(Col("s"), 4, 10), `["lo","ld",null,""]`, "utf8"},
		{"substr zero", Substr(Col("s"), 1, 0), `["","",null,""]`, "utf8"},
		{"length", Length(Col("s")), `[5,5,null,0]`, "int64"},
		{"starts with", StartsWith(Col("s"), "He"), `[true,false,null,false]`, "bool"},
		{"contains", Contains(Col("s"), "ö"), `[false,true,null,false]`, "bool"},
		{"contains empty", Contains(Col("s"), ""), `[true,true,null,true]`, "bool"},

		// time
		{"trunc day", DateTrunc("day", Col("ts")), `["2026-11-30T00:00:00Z","1969-12-31T00:00:00Z",null,"2024-02-29T00:00:00Z"]`, "timestamp[us, tz=UTC]"},
		{"trunc month", DateTrunc("month", Col("ts")), `["2026-11-01T00:00:00Z","1969-12-01T00:00:00Z",null,"2024-02-01T00:00:00Z"]`, ""},
		{"trunc year", DateTrunc("year", Col("ts")), `["2026-01-01T00:00:00Z","1969-01-01T00:00:00Z",null,"2024-01-01T00:00:00Z"]`, ""},
		{"trunc hour", DateTrunc("hour", Col("ts")), `["2026-11-30T13:00:00Z","1969-12-31T23:00:00Z",null,"2024-02-29T00:00:00Z"]`, ""},
		{"trunc minute", DateTrunc("minute", Col("ts")), `["2026-11-30T13:45:00Z","1969-12-31T23:59:00Z",null,"2024-02-29T00:00:00Z"]`, ""},
		{"trunc second", DateTrunc("second", Col("ts")), `["2026-11-30T13:45:56Z","1969-12-31T23:59:59Z",null,"2024-02-29T00:00:00Z"]`, ""},
		{"trunc ms", DateTrunc("day", Col("tsms")), `["2026-11-30T00:00:00","1969-12-31T00:00:00",null,"2024-02-29T00:00:00"]`, "timestamp[ms]"},
		{"year", Year(Col("ts")), `[2026,1969,null,2024]`, "int64"},
		{"month", Month(Col("ts")), `[11,12,null,2]`, "int64"},
		{"day", Day(Col("ts")), `[30,31,null,29]`, "int64"},
		{"hour", Hour(Col("ts")), `[13,23,null,0]`, "int64"},
		{"hour ms", Hour(Col("tsms")), `[13,23,null,0]`, "int64"},
		{"format", FormatTime(Col("ts"), "2006-01-02"), `["2026-11-30","1969-12-31",null,"2024-02-29"]`, "utf8"},
		{"format ms", FormatTime(Col("tsms"), "15:04:05.000"), `["13:45:56.123","23:59:59.999",null,"00:00:00.000"]`, "utf8"},
		{"parse", ParseTime(FormatTime(Col("ts"), time.RFC3339Nano), time.RFC3339Nano), `["2026-11-30T13:45:56.123456Z","1969-12-31T23:59:59.999999Z",null,"2024-02-29T00:00:00Z"]`, "timestamp[us, tz=UTC]"},
		{"parse day", ParseTime(Lit("2026-11-30"), "2006-01-02"), `["2026-11-30T00:00:00Z","2026-11-30T00:00:00Z","2026-11-30T00:00:00Z","2026-11-30T00:00:00Z"]`, ""},

		// constants
		{"lit int", Lit(7), `[7,7,7,7]`, "int64"},
		{"lit string", Lit("x"), `["x","x","x","x"]`, "utf8"},
		{"lit null", Lit(nil), `[null,null,null,null]`, "null"},
		{"lit arithmetic", Add(Lit(1), Lit(2)), `[3,3,3,3]`, "int64"},
		{"col", Col("s"), `["Hello","wörld",null,""]`, "utf8"},
		{"null column plus int", Add(Col("nul"), Col("a")), `[null,null,null,null]`, "int64"},
		{"upper of null column", Upper(Col("nul")), `[null,null,null,null]`, "utf8"},
		{"year of null", Year(Lit(nil)), `[null,null,null,null]`, "int64"},
		{"if null branches", If(Col("ok"), Lit(nil), Lit(nil)), `[null,null,null,null]`, "null"},
		{"compare uint8 and float", Gt(Col("u8"), Col("f")), `[true,true,null,true]`, "bool"},
		{"not null lit", Not(Lit(nil)), `[null,null,null,null]`, "bool"},
		{"in timestamps", In(Col("ts"), time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC)), `[false,false,null,true]`, "bool"},
	}
	for _, c := range cases {
		if c.want == "" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			mem := exprMem(t)
			defer mem.AssertSize(t, 0)
			rec := exprRecord(t, mem)
			defer rec.Release()
			got, typ, err := projectOne(t, mem, rec, c.e)
			if err != nil {
				t.Fatalf("%s: %v", c.e, err)
			}
			if got != c.want {
				t.Errorf("%s\n got %s\nwant %s", c.e, got, c.want)
			}
			if c.typ != "" && typ.String() != c.typ {
				t.Errorf("%s: type %s, want %s", c.e, typ, c.typ)
			}
		})
	}
}

func TestExprDataErrors(t *testing.T) {
	cases := []struct {
		name string
		e    Expr
		kind error
		msg  string
	}{
		{"div by zero", Div(Col("b"), Col("u8")), ErrDivideByZero,
			"project out: batch: Div(b, u8): division by zero at row 1 (2 / 0)"},
		{"mod by zero", Mod(Col("a"), Sub(Col("a"), Col("a"))), ErrDivideByZero,
			"project out: batch: Mod(a, Sub(a, a)): division by zero at row 0 (10 % 0)"},
		{"float div by zero", Div(Col("f"), Col("a")), ErrDivideByZero,
			"project out: batch: Div(f, a): division by zero at row 3 (0 / 0)"},
		{"add overflow", Add(Col("a"), Lit(int64(math.MaxInt64-5))), ErrOverflow,
			"project out: batch: Add(a, 9223372036854775802): integer overflow at row 0 (10 + 9223372036854775802)"},
		{"sub overflow", Sub(Col("b"), Lit(int64(math.MinInt64))), ErrOverflow,
			"project out: batch: Sub(b, -9223372036854775808): integer overflow at row 0 (3 - -9223372036854775808)"},
		{"mul overflow", Mul(Col("a"), Lit(int64(math.MaxInt64/8))), ErrOverflow,
			"project out: batch: Mul(a, 1152921504606846975): integer overflow at row 0 (10 * 1152921504606846975)"},
		{"mul overflow later row", Mul(Col("i32"), Lit(int64(math.MinInt64/8))), ErrOverflow,
			"project out: batch: Mul(i32, -1152921504606846976): integer overflow at row 0 (10 * -1152921504606846976)"},
		{"neg overflow", Neg(Add(Col("u8"), Lit(int64(math.MinInt64)))), ErrOverflow,
			"project out: batch: Neg(Add(u8, -9223372036854775808)): integer overflow at row 1 (-(-9223372036854775808))"},
		{"div overflow", Div(Lit(int64(math.MinInt64)), Sub(Col("u8"), Lit(1))), ErrOverflow,
			"project out: batch: Div(-9223372036854775808, Sub(u8, 1)): integer overflow at row 1 (-9223372036854775808 / -1)"},
		{"cast overflow", Cast(Mul(Col("a"), Lit(1000000000)), arrow.PrimitiveTypes.Int32), ErrConvert,
			"project out: batch: Cast(Mul(a, 1000000000), int32): row 0: value 10000000000 does not convert to int32: invalid: integer value 10000000000 not in range: -2147483648 to 2147483647"},
		{"cast truncation", Cast(Col("f"), arrow.PrimitiveTypes.Int64), ErrConvert,
			"project out: batch: Cast(f, int64): row 0: value 1.5 does not convert to int64: invalid: float value 1.500000 was truncated converting to int64"},
		{"cast string", Cast(Col("s"), arrow.PrimitiveTypes.Int64), ErrConvert,
			"project out: batch: Cast(s, int64): row 0: value 'Hello' does not convert to int64: invalid: strconv.ParseInt: parsing \"Hello\": invalid syntax"},
		{"error row inside a branch", If(Not(Col("ok")), Div(Col("b"), Col("u8")), Lit(0)), ErrDivideByZero,
			"project out: batch: Div(b, u8): division by zero at row 1 (2 / 0)"},
		{"error row inside coalesce", Coalesce(Col("a"), Add(Col("b"), Lit(int64(math.MaxInt64)))), ErrOverflow,
			"project out: batch: Add(b, 9223372036854775807): integer overflow at row 2 (5 + 9223372036854775807)"},
		{"parse", ParseTime(Col("s"), "2006-01-02"), ErrConvert,
			"project out: batch: ParseTime(s, '2006-01-02'): row 0: value 'Hello' does not parse with layout '2006-01-02': parsing time \"Hello\" as \"2006-01-02\": cannot parse \"Hello\" as \"2006\""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := exprMem(t)
			defer mem.AssertSize(t, 0)
			rec := exprRecord(t, mem)
			defer rec.Release()
			_, _, err := projectOne(t, mem, rec, c.e)
			if err == nil {
				t.Fatalf("%s: no error", c.e)
			}
			if !errors.Is(err, c.kind) {
				t.Errorf("%s: error %v is not %v", c.e, err, c.kind)
			}
			if err.Error() != c.msg {
				t.Errorf("%s:\n got %s\nwant %s", c.e, err, c.msg)
			}
		})
	}
}

func TestExprBindErrors(t *testing.T) {
	cases := []struct {
		name string
		e    Expr
		kind error
		msg  string
	}{
		{"add string", Add(Col("a"), Col("s")), ErrType, "batch: Add(a, s): cannot add int64 and utf8"},
		{"mul ts", Mul(Col("ts"), Lit(2)), ErrType, "batch: Mul(ts, 2): cannot multiply timestamp[us, tz=UTC] and int64"},
		{"add ts ts", Add(Col("ts"), Col("ts")), ErrType, "batch: Add(ts, ts): cannot add timestamp[us, tz=UTC] and timestamp[us, tz=UTC]"},
		{"missing column", Add(Col("amount"), Lit(1)), ErrUnknownColumn,
			`batch: unknown column "amount"; the input has a, b, i32, u8, f, s, ls, ok, ts, tsms, d, nul`},
		{"compare string int", Eq(Col("s"), Lit(1)), ErrType, "batch: Eq(s, 1): cannot compare utf8 and int64"},
		{"and int", And(Col("a"), Col("ok")), ErrType, "batch: And(a, ok): a is int64, want bool"},
		{"upper int", Upper(Col("a")), ErrType, "batch: Upper(a): a is int64, want a string"},
		{"concat int", Concat(Col("s"), Col("a")), ErrType, "batch: Concat(s, a): a is int64, want a string"},
		{"year of string", Year(Col("s")), ErrType, "batch: Year(s): s is utf8, want a timestamp"},
		{"bad trunc unit", DateTrunc("week", Col("ts")), ErrType,
			`batch: DateTrunc('week', ts): unknown unit "week"; want second, minute, hour, day, month or year`},
		{"substr negative", Substr(Col("s"), 1, -1), ErrType, "batch: Substr(s, 1, -1): negative length -1"},
		{"if no common type", If(Col("ok"), Col("a"), Col("s")), ErrType, "batch: If(ok, a, s): int64 and utf8 have no common type"},
		{"if cond int", If(Col("a"), Col("a"), Col("b")), ErrType, "batch: If(a, a, b): a is int64, want bool"},
		{"in wrong type", In(Col("a"), "x"), ErrType, "batch: In(a, 'x'): value x (utf8) cannot match int64"},
		{"in out of range", In(Col("i32"), int64(1)<<40), ErrConvert,
			"batch: In(i32, 1099511627776): value 1099511627776 does not convert to int32: invalid: integer value 1099511627776 not in range: -2147483648 to 2147483647"},
		{"cast lit", Cast(Lit("x"), arrow.PrimitiveTypes.Int64), ErrConvert,
			`batch: Cast('x', int64): constant x does not convert to int64: invalid: strconv.ParseInt: parsing "x": invalid syntax`},
		{"cast impossible", Cast(Col("ts"), arrow.FixedWidthTypes.Boolean), ErrType, "batch: Cast(ts, bool): cannot cast timestamp[us, tz=UTC] to bool"},
		{"bad literal", Eq(Col("a"), Lit(uint(3))), ErrType, "batch: Lit(3): unsupported literal type uint"},
		{"coalesce none", Coalesce(), ErrType, "batch: Coalesce(): needs at least one argument"},
		{"order booleans", Lt(Col("ok"), Lit(true)), ErrType, "batch: Lt(ok, true): booleans compare only with Eq and Ne"},
		{"div duration", Div(Col("d"), Lit(2)), ErrType, "batch: Div(d, 2): cannot divide duration[us] and int64"},
		{"duration minus ts", Sub(Col("d"), Col("ts")), ErrType, "batch: Sub(d, ts): cannot subtract duration[us] and timestamp[us, tz=UTC]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := exprMem(t)
			defer mem.AssertSize(t, 0)
			_, err := NewProjection(mem, exprSchema, []Named{As(c.e, "out")})
			if err == nil {
				t.Fatalf("%s: no error", c.e)
			}
			if !errors.Is(err, c.kind) {
				t.Errorf("%s: error %v is not %v", c.e, err, c.kind)
			}
			if err.Error() != c.msg {
				t.Errorf("%s:\n got %s\nwant %s", c.e, err, c.msg)
			}
		})
	}
}

func TestExprTimeZones(t *testing.T) {
	mem := exprMem(t)
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "paris", Type: &arrow.TimestampType{Unit: arrow.Second, TimeZone: "Europe/Paris"}},
		{Name: "utc", Type: &arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"}},
	}, nil)
	for _, c := range []struct {
		e   Expr
		msg string
	}{
		{Year(Col("paris")), `batch: Year(paris): time zone "Europe/Paris" is not supported: only UTC timestamps`},
		{Lt(Col("paris"), Col("utc")), "batch: Lt(paris, utc): cannot compare timestamp[s, tz=Europe/Paris] and timestamp[s, tz=UTC]"},
	} {
		_, err := NewProjection(mem, schema, []Named{As(c.e, "out")})
		if !errors.Is(err, ErrType) || err.Error() != c.msg {
			t.Errorf("%s: got %v, want %s", c.e, err, c.msg)
		}
	}
	// Same zone on both sides compares.
	if _, err := NewProjection(mem, schema, []Named{As(Lt(Col("paris"), Col("paris")), "out")}); err != nil {
		t.Error(err)
	}
}
