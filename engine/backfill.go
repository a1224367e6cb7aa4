package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// BackfillStatus returns a progress listener (for WithProgressListener)
// that keeps one status line up to date on w while an AvailableNow query
// works through a backlog:
//
//	backfill: batch 12 · offsets 1200/5000 (24%) · 3400 rows/s · ETA 1m12s
//
// rewritten in place with a carriage return after each batch, and ended
// with a newline when nothing is left to do. It writes only when w is a
// terminal (an *os.File for which the terminal ioctl succeeds); on
// anything else (a pipe, a file, a log) it writes nothing, so it is safe
// to attach always.
//
// Offsets are read as numbers: a source offset that is a JSON number, or
// an object whose leaves are numbers (Kafka's {"topic":{"0":42}}: one
// counter per partition), counts as the sum of its leaves' advances.
// "Offsets done" is the advance since the first batch this listener saw;
// "to do" is the distance from each batch's end offset to the source's
// LatestOffset in the progress record. Limits: a source whose offsets are
// not numeric (opaque strings) is left out; a partition that first
// appears in an end offset counts from 0; the files source's offset
// counts its log entries (batches of files), not files or bytes; without
// LatestOffset the line shows offsets done and the rate, no total or ETA.
func BackfillStatus(w io.Writer) func(Progress) {
	if !isTerminal(w) {
		return func(Progress) {}
	}
	return newBackfillLine(w, time.Now).update
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

type backfillLine struct {
	w   io.Writer
	now func() time.Time

	mu struct {
		sync.Mutex
		began   time.Time
		base    []map[string]float64 // per source: leaf → offset at the start
		rows    int64
		lastLen int
		done    bool
	}
}

func newBackfillLine(w io.Writer, now func() time.Time) *backfillLine {
	return &backfillLine{w: w, now: now}
}

func (b *backfillLine) update(p Progress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if b.mu.began.IsZero() {
		b.mu.began = now.Add(-time.Duration(p.BatchDurationMs) * time.Millisecond)
	}
	b.mu.rows += p.NumInputRows
	var done, todo float64
	knownTodo := true
	for i, s := range p.Sources {
		if i >= len(b.mu.base) {
			b.mu.base = append(b.mu.base, map[string]float64{})
		}
		base := b.mu.base[i]
		start, okStart := numericOffsets(s.StartOffset)
		end, okEnd := numericOffsets(s.EndOffset)
		if !okEnd {
			continue
		}
		if okStart {
			for k, v := range start {
				if _, seen := base[k]; !seen {
					base[k] = v
				}
			}
		}
		for k, v := range end {
			if _, seen := base[k]; !seen {
				base[k] = 0
			}
			done += v - base[k]
		}
		latest, ok := numericOffsets(s.LatestOffset)
		if !ok {
			knownTodo = false
			continue
		}
		for k, v := range latest {
			todo += max(v-end[k], 0)
		}
	}
	elapsed := now.Sub(b.mu.began).Seconds()
	var line strings.Builder
	fmt.Fprintf(&line, "backfill: batch %d · offsets %.0f", p.BatchID, done)
	if knownTodo {
		total := done + todo
		pct := 100.0
		if total > 0 {
			pct = 100 * done / total
		}
		fmt.Fprintf(&line, "/%.0f (%.0f%%)", total, pct)
	}
	if elapsed > 0 {
		fmt.Fprintf(&line, " · %.0f rows/s", float64(b.mu.rows)/elapsed)
	}
	if knownTodo {
		switch {
		case todo == 0:
			line.WriteString(" · done")
		case done > 0 && elapsed > 0:
			eta := time.Duration(todo / (done / elapsed) * float64(time.Second))
			fmt.Fprintf(&line, " · ETA %s", eta.Round(time.Second))
		}
	}
	s := line.String()
	pad := max(b.mu.lastLen-len([]rune(s)), 0)
	b.mu.lastLen = len([]rune(s))
	out := "\r" + s + strings.Repeat(" ", pad)
	if knownTodo && todo == 0 {
		out += "\n"
		b.mu.lastLen = 0
	}
	_, _ = io.WriteString(b.w, out)
}

// numericOffsets flattens an offset into its numeric leaves, keyed by
// path ("" for a bare number, "topic/0" for Kafka). ok is false when the
// offset is missing or has no numeric leaf.
func numericOffsets(raw json.RawMessage) (map[string]float64, bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	out := map[string]float64{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case json.Number:
			if f, err := strconv.ParseFloat(string(x), 64); err == nil {
				out[prefix] = f
			}
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				p := k
				if prefix != "" {
					p = prefix + "/" + k
				}
				walk(p, x[k])
			}
		}
	}
	walk("", v)
	return out, len(out) > 0
}
