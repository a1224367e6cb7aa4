package files

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds the nesting of skipped (undeclared) values.
const maxDepth = 1000

// jsonParser parses one JSON object per line into a row of cells, with a
// hand-written scanner: no map per line, no reflection, and strings without
// escapes are not copied until they reach a builder.
type jsonParser struct {
	cols   []column
	index  map[string]int
	cells  []cell
	layout string
	keyBuf []byte
}

func newJSONParser(cols []column, layout string) *jsonParser {
	p := &jsonParser{cols: cols, index: make(map[string]int, len(cols)), cells: make([]cell, len(cols)), layout: layout}
	for i, c := range cols {
		p.index[c.name] = i
	}
	return p
}

func malformed(i int, format string, args ...any) *badValue {
	return &badValue{reason: fmt.Sprintf("malformed JSON at byte %d: %s", i+1, fmt.Sprintf(format, args...))}
}

func ws(line []byte, i int) int {
	for i < len(line) {
		switch line[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// display renders a raw JSON token for a message, shortened.
func display(raw []byte) string {
	if len(raw) > 48 {
		return string(raw[:48]) + "…"
	}
	return string(raw)
}

// parse parses line (one JSON object) into p.cells, or says why it cannot.
func (p *jsonParser) parse(line []byte) *badValue {
	for k := range p.cells {
		p.cells[k].set = false
	}
	i := ws(line, 0)
	if i >= len(line) || line[i] != '{' {
		return malformed(i, "expected '{'")
	}
	i = ws(line, i+1)
	if i < len(line) && line[i] == '}' {
		i++
	} else {
		for {
			if i >= len(line) || line[i] != '"' {
				return malformed(i, "expected a string key")
			}
			key, kb, next, bad := str(line, i, p.keyBuf)
			if bad != nil {
				return bad
			}
			p.keyBuf = kb
			i = ws(line, next)
			if i >= len(line) || line[i] != ':' {
				return malformed(i, "expected ':' after key")
			}
			i = ws(line, i+1)
			if i >= len(line) {
				return malformed(i, "unexpected end of line")
			}
			if idx, ok := p.index[string(key)]; ok {
				c := &p.cells[idx]
				if c.set {
					return &badValue{p.cols[idx].name, "appears twice in the object"}
				}
				i, bad = p.value(line, i, &p.cols[idx], c)
			} else {
				i, bad = skip(line, i, 1)
			}
			if bad != nil {
				return bad
			}
			i = ws(line, i)
			if i < len(line) && line[i] == ',' {
				i = ws(line, i+1)
				continue
			}
			if i < len(line) && line[i] == '}' {
				i++
				break
			}
			return malformed(i, "expected ',' or '}'")
		}
	}
	if i = ws(line, i); i < len(line) {
		return malformed(i, "data after the object")
	}
	for k := range p.cells {
		c := &p.cells[k]
		if c.set {
			continue
		}
		if !p.cols[k].nullable {
			return &badValue{p.cols[k].name, "missing (the column is not nullable)"}
		}
		c.set, c.null = true, true
	}
	return nil
}

// value parses the value at line[i] into c as col's type.
func (p *jsonParser) value(line []byte, i int, col *column, c *cell) (int, *badValue) {
	switch b := line[i]; {
	case b == '"':
		val, buf, next, bad := str(line, i, c.buf)
		if bad != nil {
			return 0, bad
		}
		c.buf = buf
		switch col.kind {
		case kindString:
			if !utf8.Valid(val) {
				return 0, &badValue{col.name, "string is not valid UTF-8"}
			}
			c.set, c.null, c.s = true, false, val
			return next, nil
		case kindTimestamp, kindDate:
			return next, col.parseText(c, val, p.layout, func() string { return display(line[i:next]) })
		}
		return 0, col.notA(display(line[i:next]))
	case b == 'n':
		if !bytes.HasPrefix(line[i:], []byte("null")) {
			return 0, malformed(i, "unexpected %q", b)
		}
		if !col.nullable {
			return 0, &badValue{col.name, "null (the column is not nullable)"}
		}
		c.set, c.null = true, true
		return i + 4, nil
	case b == 't' || b == 'f':
		lit := "false"
		if b == 't' {
			lit = "true"
		}
		if !bytes.HasPrefix(line[i:], []byte(lit)) {
			return 0, malformed(i, "unexpected %q", b)
		}
		if col.kind != kindBool {
			return 0, col.notA(lit)
		}
		c.set, c.null, c.i = true, false, 0
		if b == 't' {
			c.i = 1
		}
		return i + len(lit), nil
	case b == '{' || b == '[':
		if _, bad := skip(line, i, 1); bad != nil {
			return 0, bad
		}
		what := "an object"
		if b == '[' {
			what = "an array"
		}
		return 0, col.notA(what)
	case b == '-' || (b >= '0' && b <= '9'):
		next, ok := number(line, i)
		if !ok {
			return 0, malformed(next, "bad number")
		}
		tok := line[i:next]
		c.set, c.null = true, false
		var err error
		switch col.kind {
		case kindInt:
			c.i, err = strconv.ParseInt(bstr(tok), 10, col.bits)
		case kindUint:
			c.u, err = strconv.ParseUint(bstr(tok), 10, col.bits)
		case kindFloat:
			c.f, err = strconv.ParseFloat(bstr(tok), col.bits)
			if isRangeErr(err) {
				err = nil
			}
		case kindTimestamp:
			// A number is a count of the column's unit since the epoch.
			c.i, err = strconv.ParseInt(bstr(tok), 10, 64)
		default:
			err = strconv.ErrSyntax
		}
		if err != nil {
			return 0, col.notA(display(tok))
		}
		return next, nil
	}
	return 0, malformed(i, "unexpected %q", line[i])
}

// number returns the end of the JSON number at line[i] (RFC 8259 grammar:
// -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?), and whether one
// is there.
func number(line []byte, i int) (int, bool) {
	digits := func(i int) (int, bool) {
		j := i
		for j < len(line) && line[j] >= '0' && line[j] <= '9' {
			j++
		}
		return j, j > i
	}
	if i < len(line) && line[i] == '-' {
		i++
	}
	if i < len(line) && line[i] == '0' {
		i++
	} else {
		var ok bool
		if i, ok = digits(i); !ok {
			return i, false
		}
	}
	if i < len(line) && line[i] == '.' {
		var ok bool
		if i, ok = digits(i + 1); !ok {
			return i, false
		}
	}
	if i < len(line) && (line[i] == 'e' || line[i] == 'E') {
		i++
		if i < len(line) && (line[i] == '+' || line[i] == '-') {
			i++
		}
		var ok bool
		if i, ok = digits(i); !ok {
			return i, false
		}
	}
	return i, true
}

// str reads the string whose opening quote is at line[i]. Without escapes
// the value is a view of line; with escapes it is decoded into buf (which
// is returned, grown, for reuse).
func str(line []byte, i int, buf []byte) (val, outBuf []byte, next int, bad *badValue) {
	j := i + 1
	for j < len(line) {
		c := line[j]
		if c == '"' {
			return line[i+1 : j], buf, j + 1, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return nil, buf, 0, malformed(j, "control character in string")
		}
		j++
	}
	buf = append(buf[:0], line[i+1:j]...)
	for j < len(line) {
		c := line[j]
		switch {
		case c == '"':
			return buf, buf, j + 1, nil
		case c < 0x20:
			return nil, buf, 0, malformed(j, "control character in string")
		case c != '\\':
			buf = append(buf, c)
			j++
			continue
		}
		if j+1 >= len(line) {
			break
		}
		switch e := line[j+1]; e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := hex4(line, j+2)
			if !ok {
				return nil, buf, 0, malformed(j, "bad \\u escape")
			}
			j += 6
			if utf16.IsSurrogate(r) {
				if r2, ok := hex4(line, j+2); ok && j+1 < len(line) && line[j] == '\\' && line[j+1] == 'u' {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						j += 6
						r = d
					} else {
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			buf = utf8.AppendRune(buf, r)
			continue
		default:
			return nil, buf, 0, malformed(j, "bad escape \\%c", e)
		}
		j += 2
	}
	return nil, buf, 0, malformed(len(line), "unterminated string")
}

func hex4(line []byte, i int) (rune, bool) {
	if i+4 > len(line) {
		return 0, false
	}
	var r rune
	for _, c := range line[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// skip returns the end of the value at line[i] (an undeclared field),
// checking only its structure.
func skip(line []byte, i, depth int) (int, *badValue) {
	if depth > maxDepth {
		return 0, malformed(i, "nested deeper than %d", maxDepth)
	}
	if i >= len(line) {
		return 0, malformed(i, "unexpected end of line")
	}
	switch b := line[i]; {
	case b == '"':
		_, _, next, bad := str(line, i, nil)
		return next, bad
	case b == '{' || b == '[':
		closer := byte('}')
		if b == '[' {
			closer = ']'
		}
		i = ws(line, i+1)
		if i < len(line) && line[i] == closer {
			return i + 1, nil
		}
		for {
			var bad *badValue
			if b == '{' {
				if i >= len(line) || line[i] != '"' {
					return 0, malformed(i, "expected a string key")
				}
				if _, _, i, bad = str(line, i, nil); bad != nil {
					return 0, bad
				}
				if i = ws(line, i); i >= len(line) || line[i] != ':' {
					return 0, malformed(i, "expected ':' after key")
				}
				i = ws(line, i+1)
			}
			if i, bad = skip(line, i, depth+1); bad != nil {
				return 0, bad
			}
			i = ws(line, i)
			if i < len(line) && line[i] == ',' {
				i = ws(line, i+1)
				continue
			}
			if i < len(line) && line[i] == closer {
				return i + 1, nil
			}
			return 0, malformed(i, "expected ',' or %q", closer)
		}
	case b == 't':
		return literal(line, i, "true")
	case b == 'f':
		return literal(line, i, "false")
	case b == 'n':
		return literal(line, i, "null")
	case b == '-' || (b >= '0' && b <= '9'):
		next, ok := number(line, i)
		if !ok {
			return 0, malformed(next, "bad number")
		}
		return next, nil
	}
	return 0, malformed(i, "unexpected %q", line[i])
}

func literal(line []byte, i int, lit string) (int, *badValue) {
	if !bytes.HasPrefix(line[i:], []byte(lit)) {
		return 0, malformed(i, "unexpected %q", line[i])
	}
	return i + len(lit), nil
}
