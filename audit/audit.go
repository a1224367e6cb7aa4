package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/storage"
)

// The links a difference can point at.
const (
	// SuspectSourceGap: the output lacks input rows.
	SuspectSourceGap = "source gap"
	// SuspectDoubleApplied: the output holds more than the input.
	SuspectDoubleApplied = "double-applied batch"
	// SuspectUncommittedVisible: the output shows rows of a batch that is
	// not committed (ids beyond C+1) or keys the input never had.
	SuspectUncommittedVisible = "uncommitted output visible"
)

// Config says what to reconcile.
type Config struct {
	// Checkpoint is the query's checkpoint directory.
	Checkpoint storage.Store
	// SourceIndex is the input's position among the query's sources
	// (offsets/N's sources[i], the checkpoint's sources/<i>/). Default 0.
	SourceIndex int
	// Input is the query's input; Output one committed output.
	Input  Input
	Output Output
	// Key is the grouping column, in the input and in the output.
	Key string
	// Value is the input column summed per key.
	Value string
	// OutputValue is the output column compared with the sum; default
	// Value.
	OutputValue string
	// BatchColumn is the output's batch id column, if it has one
	// (for example "batch_id"): it lets the audit name a double-applied
	// batch and see uncommitted ones. Rows without it count as unknown.
	BatchColumn string
	// Keys, when set, restricts the output to the keys it accepts. A
	// scaled-out query (package scaleout) has a checkpoint per task, each
	// reading one input partition, while its tasks share the outputs: the
	// audit of one task reads that task's checkpoint and input and only the
	// output keys of its partition. Default: every key.
	Keys func(key string) bool
}

// KeyDiff is one key whose output differs from the input.
type KeyDiff struct {
	Key string `json:"key"`
	// Want is the sum of the input; Got what the output holds.
	Want int64 `json:"want"`
	Got  int64 `json:"got"`
	// Suspect is the link this key's difference points at.
	Suspect string `json:"suspect"`
	// Batch names the batch when the output's batch ids identify it, else -1.
	Batch int64 `json:"batch"`
}

// Suspect is one link named by the differences, with the batch when known.
type Suspect struct {
	Link   string `json:"link"`
	Batch  int64  `json:"batch"` // -1: not identified
	Keys   int    `json:"keys"`
	Detail string `json:"detail"`
}

// Report is the audit's answer.
type Report struct {
	Input  string `json:"input"`
	Output string `json:"output"`
	// LastCommitted is C, the last batch with commits/C.
	LastCommitted int64 `json:"lastCommitted"`
	// Pending is C+1 when offsets/C+1 exists uncommitted, else -1.
	Pending int64 `json:"pending"`
	// MatchedBatch is the batch whose end offsets the output matched
	// (C or C+1), or -1 when it matched neither; the differences are then
	// given against ComparedBatch.
	MatchedBatch  int64 `json:"matchedBatch"`
	ComparedBatch int64 `json:"comparedBatch"`
	// StartFrom says where the recomputation started: "offsets/0" or
	// "initial offset (offsets/0 purged)".
	StartFrom  string          `json:"startFrom"`
	Start      json.RawMessage `json:"start"`
	End        json.RawMessage `json:"end"`
	InputRows  int64           `json:"inputRows"`
	OutputRows int64           `json:"outputRows"`
	// Cumulative is true when the output holds one running value per key
	// (PostgreSQL), false when its rows are summed.
	Cumulative bool `json:"cumulative"`
	// Matching is the number of keys whose value agrees.
	Matching  int       `json:"matching"`
	Missing   []KeyDiff `json:"missing"`
	Extra     []KeyDiff `json:"extra"`
	Differing []KeyDiff `json:"differing"`
	Suspects  []Suspect `json:"suspects"`
	// DuplicateBatches lists the (key, batch) pairs the output holds more
	// than once, as batch ids (sorted, unique).
	DuplicateBatches []int64 `json:"duplicateBatches,omitempty"`
	// BatchesWithoutOutput lists retained batches up to the compared one
	// that read input rows but left no row in an output with batch ids.
	BatchesWithoutOutput []int64 `json:"batchesWithoutOutput,omitempty"`
}

// Differences is the number of keys that differ (missing, extra, or with
// another value).
func (r *Report) Differences() int { return len(r.Missing) + len(r.Extra) + len(r.Differing) }

// OK reports whether the output matched the input.
func (r *Report) OK() bool { return r.Differences() == 0 && r.MatchedBatch >= 0 }

func readOffsets(ctx context.Context, cp *checkpoint.Reader, id int64) (checkpoint.OffsetsEntry, error) {
	e, err := cp.Offsets(ctx, id)
	if err != nil {
		return e, fmt.Errorf("read offsets/%d: %w", id, err)
	}
	return e, nil
}

func sourceRange(e checkpoint.OffsetsEntry, i int) (start, end json.RawMessage, err error) {
	if i < 0 || i >= len(e.Sources) {
		return nil, nil, fmt.Errorf("%w: offsets/%d has %d sources, no source %d", ErrConfig, e.BatchID, len(e.Sources), i)
	}
	return e.Sources[i].Start, e.Sources[i].End, nil
}

// Run reconciles cfg.Output with cfg.Input as of the checkpoint's last
// committed batch. A returned error means the audit could not run; a
// Report with differences (Differences() > 0) means it ran and the output
// is wrong.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Checkpoint == nil || cfg.Input == nil || cfg.Output == nil || cfg.Key == "" || cfg.Value == "" {
		return nil, fmt.Errorf("%w: checkpoint, input, output, key and value are required", ErrConfig)
	}
	if cfg.OutputValue == "" {
		cfg.OutputValue = cfg.Value
	}
	cp := checkpoint.NewReader(cfg.Checkpoint)
	cids, err := cp.CommitIDs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list commits: %w", err)
	}
	if len(cids) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoCommit, cfg.Checkpoint.URL())
	}
	c := cids[len(cids)-1]
	rep := &Report{
		Input: cfg.Input.describe(), Output: cfg.Output.describe(),
		LastCommitted: c, Pending: -1, MatchedBatch: -1, ComparedBatch: c,
		Cumulative: cfg.Output.cumulative(),
		Missing:    []KeyDiff{}, Extra: []KeyDiff{}, Differing: []KeyDiff{}, Suspects: []Suspect{},
	}
	oids, err := cp.OffsetIDs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list offsets: %w", err)
	}
	entC, err := readOffsets(ctx, cp, c)
	if err != nil {
		return nil, err
	}
	_, endC, err := sourceRange(entC, cfg.SourceIndex)
	if err != nil {
		return nil, err
	}
	var start json.RawMessage
	if slices.Contains(oids, 0) {
		e0, err := readOffsets(ctx, cp, 0)
		if err != nil {
			return nil, err
		}
		if start, _, err = sourceRange(e0, cfg.SourceIndex); err != nil {
			return nil, err
		}
		rep.StartFrom = "offsets/0"
	} else {
		if start, err = cfg.Input.initialOffset(ctx); err != nil {
			return nil, fmt.Errorf("initial offset of %s: %w", rep.Input, err)
		}
		rep.StartFrom = "initial offset (offsets/0 purged)"
	}
	rep.Start, rep.End = start, endC

	src := cp.Source(cfg.SourceIndex)
	wantC := map[string]int64{}
	n, err := cfg.Input.sum(ctx, src, cfg.Key, cfg.Value, start, endC, wantC)
	if err != nil {
		return nil, fmt.Errorf("read input %s: %w", rep.Input, err)
	}
	rep.InputRows = n
	var wantC1 map[string]int64
	var n1 int64
	var endC1 json.RawMessage
	if slices.Contains(oids, c+1) {
		e1, err := readOffsets(ctx, cp, c+1)
		if err != nil {
			return nil, err
		}
		s1, end1, err := sourceRange(e1, cfg.SourceIndex)
		if err != nil {
			return nil, err
		}
		endC1 = end1
		wantC1 = make(map[string]int64, len(wantC))
		for k, v := range wantC {
			wantC1[k] = v
		}
		if n1, err = cfg.Input.sum(ctx, src, cfg.Key, cfg.Value, s1, end1, wantC1); err != nil {
			return nil, fmt.Errorf("read input %s (batch %d): %w", rep.Input, c+1, err)
		}
		rep.Pending = c + 1
	}

	out, err := readOutput(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("read output %s: %w", rep.Output, err)
	}
	rep.OutputRows = out.rows

	// Pick the candidate: a perfect match against C, else against C+1,
	// else the one with fewer differences (C on a tie).
	rep.compare(wantC, out)
	if rep.Differences() == 0 {
		rep.MatchedBatch = c
	} else if wantC1 != nil {
		alt := &Report{Missing: []KeyDiff{}, Extra: []KeyDiff{}, Differing: []KeyDiff{}}
		alt.compare(wantC1, out)
		if alt.Differences() == 0 || alt.Differences() < rep.Differences() {
			rep.Matching, rep.Missing, rep.Extra, rep.Differing = alt.Matching, alt.Missing, alt.Extra, alt.Differing
			rep.ComparedBatch = c + 1
			rep.InputRows += n1
			rep.End = endC1
			if alt.Differences() == 0 {
				rep.MatchedBatch = c + 1
			}
		}
	}
	if out.haveBatch {
		if err := rep.batchesWithoutOutput(ctx, cfg, cp, oids, src, out); err != nil {
			return nil, err
		}
	}
	rep.suspects(out)
	return rep, nil
}

// output is what an output holds, reduced per key.
type output struct {
	rows      int64
	values    map[string]int64
	seen      map[string]bool
	haveBatch bool
	// batches per key: batch id → rows with it.
	pairs map[string]map[int64]int
}

func readOutput(ctx context.Context, cfg Config) (*output, error) {
	o := &output{values: map[string]int64{}, seen: map[string]bool{}, pairs: map[string]map[int64]int{}}
	cum := cfg.Output.cumulative()
	err := cfg.Output.rows(ctx, cfg.Key, cfg.OutputValue, cfg.BatchColumn, func(r outRow) {
		if cfg.Keys != nil && !cfg.Keys(r.key) {
			return
		}
		o.rows++
		if cum {
			if o.seen[r.key] {
				o.values[r.key] += r.value // a second row of a key: counted, and visible as too much
			} else {
				o.values[r.key] = r.value
			}
		} else {
			o.values[r.key] += r.value
		}
		o.seen[r.key] = true
		if r.hasBatch {
			o.haveBatch = true
			m := o.pairs[r.key]
			if m == nil {
				m = map[int64]int{}
				o.pairs[r.key] = m
			}
			m[r.batch]++
		}
	})
	return o, err
}

func (r *Report) compare(want map[string]int64, out *output) {
	for _, k := range sortedKeys(want) {
		w := want[k]
		if !out.seen[k] {
			r.Missing = append(r.Missing, KeyDiff{Key: k, Want: w, Batch: -1})
			continue
		}
		if g := out.values[k]; g != w {
			r.Differing = append(r.Differing, KeyDiff{Key: k, Want: w, Got: g, Batch: -1})
			continue
		}
		r.Matching++
	}
	for _, k := range sortedKeys(out.values) {
		if _, ok := want[k]; !ok {
			r.Extra = append(r.Extra, KeyDiff{Key: k, Got: out.values[k], Batch: -1})
		}
	}
}

// batchesWithoutOutput lists retained batches up to the compared one that
// read input rows but have no row in the output.
func (r *Report) batchesWithoutOutput(ctx context.Context, cfg Config, cp *checkpoint.Reader, oids []int64, src storage.Store, out *output) error {
	if r.Cumulative {
		return nil // a cumulative row keeps only the last batch that touched its key
	}
	seen := map[int64]bool{}
	for _, m := range out.pairs {
		for b := range m {
			seen[b] = true
		}
	}
	for _, id := range oids {
		if id > r.ComparedBatch || seen[id] {
			continue
		}
		e, err := readOffsets(ctx, cp, id)
		if err != nil {
			return err
		}
		s, end, err := sourceRange(e, cfg.SourceIndex)
		if err != nil {
			return err
		}
		n, err := cfg.Input.sum(ctx, src, cfg.Key, cfg.Value, s, end, map[string]int64{})
		if err != nil {
			return fmt.Errorf("read input of batch %d: %w", id, err)
		}
		if n > 0 {
			r.BatchesWithoutOutput = append(r.BatchesWithoutOutput, id)
		}
	}
	return nil
}

// suspects attributes each difference to a link.
func (r *Report) suspects(out *output) {
	dups := map[int64]bool{}
	for _, m := range out.pairs {
		for b, n := range m {
			if n > 1 && !r.Cumulative {
				dups[b] = true
			}
		}
	}
	for b := range dups {
		r.DuplicateBatches = append(r.DuplicateBatches, b)
	}
	sort.Slice(r.DuplicateBatches, func(i, j int) bool { return r.DuplicateBatches[i] < r.DuplicateBatches[j] })

	type sk struct {
		link  string
		batch int64
	}
	count := map[sk]int{}
	var order []sk
	note := func(link string, batch int64) {
		k := sk{link, batch}
		if count[k] == 0 {
			order = append(order, k)
		}
		count[k]++
	}
	beyond := func(key string) int64 { // newest batch of key past C+1, or -1
		b := int64(-1)
		for id := range out.pairs[key] {
			if id > r.LastCommitted+1 && id > b {
				b = id
			}
		}
		return b
	}
	dup := func(key string) int64 {
		b := int64(-1)
		for id, n := range out.pairs[key] {
			if n > 1 && !r.Cumulative && (b < 0 || id < b) {
				b = id
			}
		}
		return b
	}
	for i := range r.Missing {
		d := &r.Missing[i]
		d.Suspect = SuspectSourceGap
		note(d.Suspect, -1)
	}
	for i := range r.Extra {
		d := &r.Extra[i]
		d.Suspect, d.Batch = SuspectUncommittedVisible, beyond(d.Key)
		note(d.Suspect, d.Batch)
	}
	for i := range r.Differing {
		d := &r.Differing[i]
		switch {
		case beyond(d.Key) >= 0:
			d.Suspect, d.Batch = SuspectUncommittedVisible, beyond(d.Key)
		case d.Got > d.Want:
			d.Suspect, d.Batch = SuspectDoubleApplied, dup(d.Key)
		default:
			d.Suspect = SuspectSourceGap
		}
		note(d.Suspect, d.Batch)
	}
	for _, k := range order {
		s := Suspect{Link: k.link, Batch: k.batch, Keys: count[k]}
		switch k.link {
		case SuspectSourceGap:
			s.Detail = "the output lacks input rows"
			if len(r.BatchesWithoutOutput) > 0 {
				s.Detail += fmt.Sprintf("; batches with input but no output rows: %v", r.BatchesWithoutOutput)
				if len(r.BatchesWithoutOutput) == 1 {
					s.Batch = r.BatchesWithoutOutput[0]
				}
			}
		case SuspectDoubleApplied:
			s.Detail = "the output holds more than the input"
			if k.batch >= 0 {
				s.Detail += fmt.Sprintf("; (key, batch %d) is in the output more than once", k.batch)
			}
		case SuspectUncommittedVisible:
			if k.batch >= 0 {
				s.Detail = fmt.Sprintf("the output shows batch %d, beyond the last committed batch %d + 1", k.batch, r.LastCommitted)
			} else {
				s.Detail = "the output holds keys the input never had"
			}
		}
		r.Suspects = append(r.Suspects, s)
	}
	sort.SliceStable(r.Suspects, func(i, j int) bool {
		if r.Suspects[i].Link != r.Suspects[j].Link {
			return r.Suspects[i].Link < r.Suspects[j].Link
		}
		return r.Suspects[i].Batch < r.Suspects[j].Batch
	})
}

func sortedKeys(m map[string]int64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
