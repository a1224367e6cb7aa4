package kafka

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// jsonObject walks the members of a JSON object that json.Valid accepted,
// calling fn with each member's key and raw value. It is the fast path of
// WithValueJSON: no map, no allocation per member.
func jsonObject(b []byte, fn func(key, raw []byte)) bool {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return true
	}
	for i < len(b) {
		kEnd := skipString(b, i)
		key := b[i+1 : kEnd-1]
		i = skipWS(b, kEnd)
		i = skipWS(b, i+1) // ':'
		vEnd := skipValue(b, i)
		fn(key, b[i:vEnd])
		i = skipWS(b, vEnd)
		if i >= len(b) || b[i] == '}' {
			return true
		}
		i = skipWS(b, i+1) // ','
	}
	return true
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	default:
		for ; i < len(b); i++ {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
		}
		return len(b)
	}
}

// unquote returns the string a JSON string token holds; the common case of
// no escapes takes no decoding.
func unquote(raw []byte) (string, bool) {
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}
