package offsetlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/onceflow/onceflow/storage"
)

const (
	version  = "v1"
	idDigits = 20
)

// Log is the log of entries of type T under one folder of a store.
type Log[T any] struct {
	store storage.Store
	dir   string
}

// New returns the log kept under dir (for example "offsets") in store.
func New[T any](store storage.Store, dir string) *Log[T] {
	return &Log[T]{store: store, dir: strings.Trim(dir, "/")}
}

// FileName returns the object name of batch id's entry in dir.
func FileName(dir string, id int64) string {
	return fmt.Sprintf("%s/%0*d", strings.Trim(dir, "/"), idDigits, id)
}

// ParseFileName returns the batch id an object name in dir holds, and
// whether the name is an entry name at all.
func ParseFileName(dir, name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, strings.Trim(dir, "/")+"/")
	if !ok || rest == "" || len(rest) > idDigits || strings.ContainsFunc(rest, func(r rune) bool { return r < '0' || r > '9' }) {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	if err != nil {
		return 0, false
	}
	return id, true
}

// Encode returns the bytes stored for entry.
func Encode(entry any) ([]byte, error) {
	b, err := json.Marshal(entry)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(len(version) + len(b) + 2)
	buf.WriteString(version)
	buf.WriteByte('\n')
	buf.Write(b)
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

// Decode parses bytes written by Encode into entry; file names the object
// in the error.
func Decode(file string, data []byte, entry any) error {
	if len(data) == 0 {
		return &CorruptionError{File: file, Reason: "empty file"}
	}
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 {
		return &CorruptionError{File: file, Offset: len(data), Reason: "no version line (torn write?)"}
	}
	v := string(data[:nl])
	if v != version {
		if strings.HasPrefix(v, "v") {
			return &CorruptionError{File: file, Reason: fmt.Sprintf("format version %q is not supported by this build (it reads %s)", v, version)}
		}
		return &CorruptionError{File: file, Reason: fmt.Sprintf("first line %q is not a format version", trunc(v))}
	}
	body := data[nl+1:]
	if len(body) == 0 || body[len(body)-1] != '\n' {
		return &CorruptionError{File: file, Offset: len(data), Reason: "entry does not end in a newline (torn write?)"}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(entry); err != nil {
		off := nl + 1
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off += int(se.Offset)
		}
		return &CorruptionError{File: file, Offset: off, Reason: err.Error()}
	}
	return nil
}

func trunc(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Add writes entry as batch id's, once. It returns nil if the batch already
// holds exactly these bytes and an error wrapping ErrConflict if it holds
// others.
func (l *Log[T]) Add(ctx context.Context, id int64, entry T) error {
	if id < 0 {
		return fmt.Errorf("offsetlog: add %s/%d: negative batch id", l.dir, id)
	}
	data, err := Encode(entry)
	if err != nil {
		return fmt.Errorf("offsetlog: encode %s/%d: %w", l.dir, id, err)
	}
	name := FileName(l.dir, id)
	err = l.store.PutIfAbsent(ctx, name, data)
	if err == nil {
		return nil
	}
	if !storage.IsExist(err) {
		return fmt.Errorf("offsetlog: add %s: %w", name, err)
	}
	have, gerr := l.store.Get(ctx, name)
	if gerr != nil {
		return fmt.Errorf("offsetlog: add %s: exists, and reading it back failed: %w", name, gerr)
	}
	if bytes.Equal(have, data) {
		return nil
	}
	return fmt.Errorf("%w: %s/%s", ErrConflict, l.store.URL(), name)
}

// Get returns batch id's entry, an error wrapping ErrNotFound, or a
// *CorruptionError.
func (l *Log[T]) Get(ctx context.Context, id int64) (T, error) {
	var entry T
	name := FileName(l.dir, id)
	data, err := l.store.Get(ctx, name)
	if err != nil {
		if storage.IsNotExist(err) {
			return entry, fmt.Errorf("%w: %s/%s", ErrNotFound, l.store.URL(), name)
		}
		return entry, fmt.Errorf("offsetlog: get %s: %w", name, err)
	}
	if err := Decode(l.store.URL()+"/"+name, data, &entry); err != nil {
		return entry, err
	}
	return entry, nil
}

// Has reports whether batch id has an entry, without decoding it.
func (l *Log[T]) Has(ctx context.Context, id int64) (bool, error) {
	_, err := l.store.Get(ctx, FileName(l.dir, id))
	if err == nil {
		return true, nil
	}
	if storage.IsNotExist(err) {
		return false, nil
	}
	return false, fmt.Errorf("offsetlog: read %s: %w", FileName(l.dir, id), err)
}

// List returns the batch ids that have entries, ascending. Objects in the
// folder whose names are not entry names are ignored.
func (l *Log[T]) List(ctx context.Context) ([]int64, error) {
	infos, err := l.store.List(ctx, l.dir+"/")
	if err != nil {
		return nil, fmt.Errorf("offsetlog: list %s: %w", l.dir, err)
	}
	ids := make([]int64, 0, len(infos))
	for _, in := range infos {
		if id, ok := ParseFileName(l.dir, in.Name); ok {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, nil
}

// Latest returns the highest batch id with an entry and that entry; ok is
// false for an empty log.
func (l *Log[T]) Latest(ctx context.Context) (id int64, entry T, ok bool, err error) {
	ids, err := l.List(ctx)
	if err != nil || len(ids) == 0 {
		return 0, entry, false, err
	}
	id = ids[len(ids)-1]
	entry, err = l.Get(ctx, id)
	if err != nil {
		return 0, entry, false, err
	}
	return id, entry, true, nil
}

// Purge deletes the entries of batch ids below before and returns how many
// it deleted.
func (l *Log[T]) Purge(ctx context.Context, before int64) (int, error) {
	ids, err := l.List(ctx)
	if err != nil {
		return 0, err
	}
	var names []string
	for _, id := range ids {
		if id < before {
			names = append(names, FileName(l.dir, id))
		}
	}
	if len(names) == 0 {
		return 0, nil
	}
	if err := l.store.Delete(ctx, names...); err != nil {
		return 0, fmt.Errorf("offsetlog: purge %s before %d: %w", l.dir, before, err)
	}
	return len(names), nil
}
