package monitor

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/onceflow/onceflow/engine"
)

// DefaultHistory is how many batches the status page charts by default
// (WithHistory).
const DefaultHistory = 300

// phases are the batch phases the page charts, by the name the page
// shows, from the engine's progress phase names.
func phases() [6][2]string {
	return [6][2]string{
		{"plan", engine.PhaseLatestOffset},
		{"wal", engine.PhaseWALCommit},
		{"read", engine.PhaseGetBatch},
		{"state", engine.PhaseStateCommit},
		{"sink", engine.PhaseAddBatch},
		{"commit", engine.PhaseCommitOffsets},
	}
}

// batchPoint is one batch of /api/page: what the charts and the table of
// recent batches show of it.
type batchPoint struct {
	BatchID   int64  `json:"batchId"`
	Timestamp string `json:"timestamp"`
	// InputRows, rates and durations are the progress record's.
	InputRows   int64   `json:"numInputRows"`
	InputRate   float64 `json:"inputRowsPerSecond"`
	ProcessRate float64 `json:"processedRowsPerSecond"`
	DurationMs  int64   `json:"batchDuration"`
	// Phases maps a phase (plan, wal, read, state, sink, commit) to its
	// milliseconds.
	Phases map[string]int64 `json:"phases"`
	// State is each stateful operator's figures.
	State []operatorPoint `json:"state,omitempty"`
	// Lag maps a source partition to the records available and not yet
	// planned (sources that report it; see WithMetrics).
	Lag map[string]float64 `json:"lag,omitempty"`
	// WatermarkDelayMs is the batch timestamp minus the event-time
	// watermark in force, absent when the query has no watermark yet.
	WatermarkDelayMs *int64 `json:"watermarkDelayMs,omitempty"`
	// LateRowsDropped is the rows all operators dropped as late.
	LateRowsDropped int64 `json:"lateRowsDropped"`
	// Offsets is each source's range, "description: start → end".
	Offsets   []string `json:"offsets"`
	Recovered bool     `json:"recovered,omitempty"`
}

// operatorPoint is one stateful operator's figures in a batchPoint.
type operatorPoint struct {
	ID      string `json:"id"`
	Rows    int64  `json:"rows"`
	Bytes   int64  `json:"bytes"`
	Dropped int64  `json:"lateRowsDropped"`
}

// pointOf summarizes a batch's progress for the page.
func pointOf(p *engine.Progress) batchPoint {
	b := batchPoint{
		BatchID: p.BatchID, Timestamp: p.Timestamp, InputRows: p.NumInputRows,
		InputRate: p.InputRowsPerSecond, ProcessRate: p.ProcessedRowsPerSecond, DurationMs: p.BatchDurationMs,
		Phases: map[string]int64{}, Recovered: p.Recovered, Offsets: []string{},
	}
	for _, ph := range phases() {
		b.Phases[ph[0]] = p.DurationMs[ph[1]]
	}
	for _, op := range p.StateOperators {
		b.State = append(b.State, operatorPoint{ID: op.OperatorID, Rows: op.NumRowsTotal, Bytes: op.MemoryUsedBytes, Dropped: op.NumRowsDroppedByWatermark})
		b.LateRowsDropped += op.NumRowsDroppedByWatermark
	}
	for _, s := range p.Sources {
		for part, lag := range sourceLag(s.Metrics) {
			if b.Lag == nil {
				b.Lag = map[string]float64{}
			}
			name := part
			if len(p.Sources) > 1 {
				name = s.Description + " " + part
			}
			b.Lag[name] = lag
		}
		b.Offsets = append(b.Offsets, fmt.Sprintf("%s: %s → %s", s.Description, compact(string(s.StartOffset)), compact(string(s.EndOffset))))
	}
	if d, ok := watermarkDelay(p); ok {
		b.WatermarkDelayMs = &d
	}
	return b
}

// watermarkDelay is the batch's timestamp minus its watermark; ok is false
// when there is no watermark yet (none, or the epoch).
func watermarkDelay(p *engine.Progress) (int64, bool) {
	wm, ok := p.EventTime["watermark"]
	if !ok {
		return 0, false
	}
	w, err1 := time.Parse(time.RFC3339Nano, wm)
	ts, err2 := time.Parse(time.RFC3339Nano, p.Timestamp)
	if err1 != nil || err2 != nil || w.UnixMilli() <= 0 {
		return 0, false
	}
	return ts.Sub(w).Milliseconds(), true
}

// compact shortens an offset's JSON for the table: no spaces, at most 120
// characters.
func compact(s string) string {
	s = strings.Join(strings.Fields(s), "")
	if len(s) > 120 {
		s = s[:119] + "…"
	}
	return s
}

// history keeps the last n progress records, oldest first, with their
// points (summarized once, when added, not on every poll of the page).
type history struct {
	n    int
	recs []*engine.Progress
	pts  []batchPoint
}

func (h *history) add(p *engine.Progress) {
	// A re-run batch (after a restart) replaces its id's record.
	if k := len(h.recs); k > 0 && h.recs[k-1].BatchID >= p.BatchID {
		i := sort.Search(k, func(i int) bool { return h.recs[i].BatchID >= p.BatchID })
		h.recs, h.pts = h.recs[:i], h.pts[:i]
	}
	h.recs = append(h.recs, p)
	h.pts = append(h.pts, pointOf(p))
	if len(h.recs) > h.n {
		h.recs = append(h.recs[:0:0], h.recs[len(h.recs)-h.n:]...)
		h.pts = append(h.pts[:0:0], h.pts[len(h.pts)-h.n:]...)
	}
}

// points returns a copy of the kept batches' points.
func (h *history) points() []batchPoint {
	return append([]batchPoint{}, h.pts...)
}

func (h *history) get(id int64) *engine.Progress {
	i := sort.Search(len(h.recs), func(i int) bool { return h.recs[i].BatchID >= id })
	if i < len(h.recs) && h.recs[i].BatchID == id {
		return h.recs[i]
	}
	return nil
}
