package cron

import (
	"strings"
	"testing"
	"time"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Skipf("time zone %s not available: %v", name, err)
	}
	return loc
}

func TestNext(t *testing.T) {
	ny := mustLoc(t, "America/New_York")
	cases := []struct {
		name, expr string
		loc        *time.Location
		after      string // in loc, "2006-01-02 15:04"
		want       []string
	}{
		{"every minute", "* * * * *", time.UTC, "2026-01-01 10:00", []string{"2026-01-01 10:01", "2026-01-01 10:02"}},
		{"step and list", "*/20 9,17 * * *", time.UTC, "2026-01-01 09:30", []string{"2026-01-01 09:40", "2026-01-01 17:00", "2026-01-01 17:20", "2026-01-01 17:40", "2026-01-02 09:00"}},
		{"range with step", "0 8-18/5 * * *", time.UTC, "2026-01-01 00:00", []string{"2026-01-01 08:00", "2026-01-01 13:00", "2026-01-01 18:00", "2026-01-02 08:00"}},
		{"a/n runs to the max", "0 20/2 * * *", time.UTC, "2026-01-01 00:00", []string{"2026-01-01 20:00", "2026-01-01 22:00", "2026-01-02 20:00"}},
		{"names", "0 6 * jan,FEB mon-fri", time.UTC, "2026-01-30 07:00", []string{"2026-02-02 06:00", "2026-02-03 06:00"}},
		{"month end: 31st skips short months", "0 0 31 * *", time.UTC, "2026-01-31 00:00", []string{"2026-03-31 00:00", "2026-05-31 00:00", "2026-07-31 00:00", "2026-08-31 00:00"}},
		{"leap day", "0 0 29 2 *", time.UTC, "2026-01-01 00:00", []string{"2028-02-29 00:00", "2032-02-29 00:00"}},
		{"dom or dow when both restricted", "0 0 13 * fri", time.UTC, "2026-02-01 00:00", []string{"2026-02-06 00:00", "2026-02-13 00:00", "2026-02-20 00:00", "2026-02-27 00:00", "2026-03-06 00:00"}},
		{"dow with star dom is and", "0 0 * * 5", time.UTC, "2026-02-01 00:00", []string{"2026-02-06 00:00", "2026-02-13 00:00"}},
		{"dom step counts as star", "0 0 */10 * 1", time.UTC, "2026-02-01 00:00", []string{"2026-05-11 00:00", "2026-06-01 00:00"}},
		{"sunday as 7", "0 12 * * 7", time.UTC, "2026-02-01 12:00", []string{"2026-02-08 12:00"}},
		{"hourly", "@hourly", time.UTC, "2026-01-01 10:59", []string{"2026-01-01 11:00", "2026-01-01 12:00"}},
		{"monthly", "@monthly", time.UTC, "2026-01-15 00:00", []string{"2026-02-01 00:00", "2026-03-01 00:00"}},
		{"weekly", "@weekly", time.UTC, "2026-02-01 00:00", []string{"2026-02-08 00:00"}},
		{"tz prefix", "TZ=America/New_York 0 9 * * *", nil, "2026-01-01 09:00", []string{"2026-01-02 09:00"}},
		// 2026-03-08 02:00 EST jumps to 03:00 EDT.
		{"spring gap fires at the gap's end", "30 2 * * *", ny, "2026-03-07 03:00", []string{"2026-03-08 03:00", "2026-03-09 02:30"}},
		{"spring gap, hour star follows real time", "30 * * * *", ny, "2026-03-08 01:00", []string{"2026-03-08 01:30", "2026-03-08 03:30"}},
		{"spring gap, time after the gap", "15 3 * * *", ny, "2026-03-07 04:00", []string{"2026-03-08 03:15"}},
		// 2026-11-01 02:00 EDT falls back to 01:00 EST.
		{"fall back fires once", "30 1 * * *", ny, "2026-10-31 02:00", []string{"2026-11-01 01:30 EDT", "2026-11-02 01:30"}},
		{"fall back, hour star fires twice", "30 * * * *", ny, "2026-11-01 00:45", []string{"2026-11-01 01:30 EDT", "2026-11-01 01:30 EST", "2026-11-01 02:30"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts []Option
			loc := tc.loc
			if loc != nil {
				opts = append(opts, WithLocation(loc))
			} else {
				loc = ny
			}
			s, err := Parse(tc.expr, opts...)
			if err != nil {
				t.Fatal(err)
			}
			at, err := time.ParseInLocation("2006-01-02 15:04", tc.after, loc)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				at = s.Next(at)
				got := at.In(loc).Format("2006-01-02 15:04")
				if strings.Contains(w, " E") { // a zone abbreviation tells the occurrence apart
					got = at.In(loc).Format("2006-01-02 15:04 MST")
				}
				if got != w {
					t.Fatalf("%s: next %s, want %s", tc.expr, got, w)
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ expr, want string }{
		{"* * * *", "has 4 fields"},
		{"60 * * * *", `minute field "60": 60 is out of range 0-59`},
		{"* 24 * * *", `hour field "24"`},
		{"* * 0 * *", `day-of-month field "0"`},
		{"* * * foo *", `month field "foo": "foo" is neither a number nor a name (JAN…)`},
		{"* * * * 8", `day-of-week field "8"`},
		{"*/0 * * * *", `step "0" is not a positive number`},
		{"5-1 * * * *", "runs backwards"},
		{"1,,2 * * * *", "empty list element"},
		{"@often", "unknown macro"},
		{"TZ=Mars/Olympus 0 0 * * *", `time zone "Mars/Olympus"`},
		{"0 0 30 2 *", "never fires"},
		{"0 0 31 4,6 *", "never fires"},
	}
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			_, err := Parse(tc.expr)
			if err == nil || !strings.HasPrefix(err.Error(), "cron: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse(%q) = %v, want an error containing %q", tc.expr, err, tc.want)
			}
		})
	}
	// Feb 30 with a restricted day of week is possible (OR).
	if _, err := Parse("0 0 30 2 mon"); err != nil {
		t.Fatal(err)
	}
}

func TestEvery(t *testing.T) {
	s := Every(15 * time.Minute)
	at := time.Date(2026, 1, 1, 10, 7, 30, 0, time.UTC)
	for _, w := range []string{"10:15:00", "10:30:00", "10:45:00", "11:00:00"} {
		at = s.Next(at)
		if got := at.Format("15:04:05"); got != w {
			t.Fatalf("next %s, want %s", got, w)
		}
	}
	// Strictly after: a tick time gives the following tick.
	if got := s.Next(time.Date(2026, 1, 1, 10, 15, 0, 0, time.UTC)); !got.Equal(time.Date(2026, 1, 1, 10, 30, 0, 0, time.UTC)) {
		t.Fatalf("next after a tick: %s", got)
	}
	if s.String() != "every 15m0s" {
		t.Fatalf("String %q", s.String())
	}
}

func TestEveryNonPositiveIsOneMinute(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Hour} {
		if got := Every(d).String(); got != "every 1m0s" {
			t.Errorf("Every(%s) = %s, want every 1m0s", d, got)
		}
	}
}

func TestMustParse(t *testing.T) {
	if got := MustParse(" @daily ").String(); got != "cron @daily" {
		t.Fatalf("MustParse(@daily).String() = %q", got)
	}
	defer func() {
		r := recover()
		err, ok := r.(error)
		if !ok || !strings.Contains(err.Error(), `cron: "* * *" has 3 fields`) {
			t.Fatalf("MustParse of a bad expression: recovered %v, want the parse error", r)
		}
	}()
	MustParse("* * *")
}

func TestTZPrefixWinsOverWithLocation(t *testing.T) {
	ny := mustLoc(t, "America/New_York")
	s := MustParse("TZ=UTC 0 9 * * *", WithLocation(ny))
	got := s.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if want := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("next %s, want %s (the TZ= prefix, not WithLocation)", got, want)
	}
}
