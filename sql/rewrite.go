package sql

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	pg "github.com/pganalyze/pg_query_go/v6"
	"github.com/pganalyze/pg_query_go/v6/parser"
)

// The pre-pass turns the statements PostgreSQL does not know into ones it
// parses, using PostgreSQL's own scanner to find them, and keeps a map from
// every byte of the rewritten text back to the user's text:
//
//	CREATE SOURCE s (...) WITH (...)        → CREATE TABLE s (...) WITH (...)
//	CREATE SINK k WITH (...) AS SELECT ...  → CREATE VIEW k WITH (...) AS SELECT ...
//	WATERMARK FOR ts AS <expr>              → CONSTRAINT onceflow_watermark CHECK (ts = <expr>)
//
// Hints are comments of the form /*+ id('name') */; the pre-pass collects
// them with their positions.

const watermarkConstraint = "onceflow_watermark"

// rewritten is the text PostgreSQL parses and the way back.
type rewritten struct {
	text     string
	segs     []segment    // sorted by at
	lines    []int        // offsets of line starts in the user's text
	sources  map[int]bool // user offsets of the names after CREATE SOURCE
	sinks    map[int]bool // ... after CREATE SINK
	hints    []hint
	tokens   []*pg.ScanToken // of the user's text
	original string
}

// segment says that rewritten bytes from at on come from the user's bytes
// from orig on (until the next segment).
type segment struct{ at, orig int }

type hint struct {
	start, end int // user offsets of the comment
	id         string
}

var hintRE = regexp.MustCompile(`^/\*\+\s*id\s*\(\s*'([^']*)'\s*\)\s*\*/$`)

func (r *rewritten) orig(at int) int {
	i := sort.Search(len(r.segs), func(i int) bool { return r.segs[i].at > at }) - 1
	if i < 0 {
		return 0
	}
	return r.segs[i].orig + at - r.segs[i].at
}

// pos is the user's line and column of rewritten offset at.
func (r *rewritten) pos(at int) (line, col int) {
	return r.lineCol(r.orig(at))
}

func (r *rewritten) lineCol(o int) (line, col int) {
	i := sort.Search(len(r.lines), func(i int) bool { return r.lines[i] > o }) - 1
	if i < 0 {
		i = 0
	}
	o = min(o, len(r.original))
	return i + 1, utf8.RuneCountInString(r.original[r.lines[i]:o]) + 1
}

// charToByte turns a 0-based character index into text (PostgreSQL's
// error cursor counts characters) into a byte offset.
func charToByte(text string, chars int) int {
	n := 0
	for b := range text {
		if n == chars {
			return b
		}
		n++
	}
	return len(text)
}

func upperTok(text string, t *pg.ScanToken) string {
	return strings.ToUpper(text[t.Start:t.End])
}

func rewrite(text string) (*rewritten, error) {
	r := &rewritten{original: text, sources: map[int]bool{}, sinks: map[int]bool{}, lines: []int{0}}
	for i := 0; i < len(text); i++ {
		if text[i] == '\n' {
			r.lines = append(r.lines, i+1)
		}
	}
	sc, err := pg.Scan(text)
	if err != nil {
		return nil, r.scanError(err)
	}
	var toks []*pg.ScanToken
	for _, t := range sc.Tokens {
		if t.Token == pg.Token_C_COMMENT || t.Token == pg.Token_SQL_COMMENT {
			c := text[t.Start:t.End]
			if strings.HasPrefix(c, "/*+") {
				m := hintRE.FindStringSubmatch(c)
				if m == nil {
					l, col := r.lineCol(int(t.Start))
					return nil, &Error{Line: l, Col: col, Msg: fmt.Sprintf("hint %s: the supported hint is /*+ id('operator-id') */ right after SELECT", c), unsupported: true}
				}
				r.hints = append(r.hints, hint{start: int(t.Start), end: int(t.End), id: m[1]})
			}
			continue
		}
		toks = append(toks, t)
	}
	r.tokens = toks
	var b strings.Builder
	last := 0 // user offset copied up to
	emitOrig := func(upto int) {
		if upto > last {
			r.segs = append(r.segs, segment{at: b.Len(), orig: last})
			b.WriteString(text[last:upto])
			last = upto
		}
	}
	// replace writes s in place of user bytes [from, to); the new bytes map
	// to from.
	replace := func(from, to int, s string) {
		emitOrig(from)
		r.segs = append(r.segs, segment{at: b.Len(), orig: from})
		// every byte of s maps to from: a segment per byte keeps orig fixed
		for i := 0; i < len(s); i++ {
			r.segs = append(r.segs, segment{at: b.Len() + i, orig: from})
		}
		b.WriteString(s)
		last = to
	}
	depth := 0
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch text[t.Start:t.End] {
		case "(":
			depth++
		case ")":
			depth--
		}
		if t.Token == pg.Token_CREATE && i+1 < len(toks) {
			switch upperTok(text, toks[i+1]) {
			case "SOURCE":
				if i+2 < len(toks) {
					r.sources[int(toks[i+2].Start)] = true
				}
				replace(int(toks[i+1].Start), int(toks[i+1].End), "TABLE")
				i++
			case "SINK":
				if i+2 < len(toks) {
					r.sinks[int(toks[i+2].Start)] = true
				}
				replace(int(toks[i+1].Start), int(toks[i+1].End), "VIEW")
				i++
			}
			continue
		}
		if depth == 1 && upperTok(text, t) == "WATERMARK" && i+3 < len(toks) && toks[i+1].Token == pg.Token_FOR && toks[i+3].Token == pg.Token_AS {
			// find the end of the expression: the comma or ")" at this depth
			d, j := 0, i+4
			for ; j < len(toks); j++ {
				s := text[toks[j].Start:toks[j].End]
				if s == "(" {
					d++
				} else if s == ")" {
					if d == 0 {
						break
					}
					d--
				} else if s == "," && d == 0 {
					break
				}
			}
			if j >= len(toks) {
				l, c := r.lineCol(int(t.Start))
				return nil, &Error{Line: l, Col: c, Msg: "WATERMARK FOR col AS expr is not closed by ',' or ')'"}
			}
			replace(int(t.Start), int(toks[i+1].End), "CONSTRAINT "+watermarkConstraint+" CHECK (")
			replace(int(toks[i+3].Start), int(toks[i+3].End), "=")
			replace(int(toks[j].Start), int(toks[j].Start), ")")
			i = j - 1
			continue
		}
	}
	emitOrig(len(text))
	r.text = b.String()
	return r, nil
}

func (r *rewritten) scanError(err error) error {
	var pe *parser.Error
	o := 0
	if errors.As(err, &pe) && pe.Cursorpos > 0 {
		o = charToByte(r.original, pe.Cursorpos-1)
	}
	l, c := r.lineCol(o)
	return &Error{Line: l, Col: c, Msg: "syntax: " + err.Error()}
}

// hintAt is the id hint that sits right before user offset target with
// only the tokens in skip between them, or "".
func (r *rewritten) hintBefore(target int, skip ...string) (string, bool) {
	for _, h := range r.hints {
		if h.end > target {
			continue
		}
		ok := true
		for _, t := range r.tokens {
			if int(t.Start) >= h.end && int(t.End) <= target {
				s := upperTok(r.original, t)
				allowed := false
				for _, k := range skip {
					if s == k {
						allowed = true
					}
				}
				if !allowed {
					ok = false
					break
				}
			}
		}
		if ok {
			return h.id, true
		}
	}
	return "", false
}
