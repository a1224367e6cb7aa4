package engine

import (
	"fmt"
	"strings"
)

// checkRestart compares the configuration recorded at the first batch with
// the query's and reports every incompatible difference.
func checkRestart(old, cur Conf) error {
	var diffs []string
	if old.StatePartitions != cur.StatePartitions && len(old.Operators) > 0 {
		diffs = append(diffs, fmt.Sprintf("state partitions changed from %d to %d (not allowed: state is hash-partitioned by it)", old.StatePartitions, cur.StatePartitions))
	}
	if len(cur.Sources) < len(old.Sources) {
		diffs = append(diffs, fmt.Sprintf("sources changed from %d to %d (not allowed: a removed source orphans its offsets)", len(old.Sources), len(cur.Sources)))
	}
	for i := 0; i < len(old.SourceIDs) && i < len(cur.SourceIDs); i++ {
		if old.SourceIDs[i] != cur.SourceIDs[i] {
			diffs = append(diffs, fmt.Sprintf("source %d changed from %s to %s (not allowed: its offsets and log belong to the old source; start a new checkpoint, or fork one)", i, old.SourceIDs[i], cur.SourceIDs[i]))
		}
	}
	oldOps := map[string]OperatorConf{}
	for _, o := range old.Operators {
		oldOps[o.ID] = o
	}
	for _, o := range cur.Operators {
		prev, ok := oldOps[o.ID]
		if !ok {
			if len(old.Operators) > 0 {
				diffs = append(diffs, fmt.Sprintf("stateful operator %q is new and the checkpoint has %d other(s) (not allowed: give it the old operator's id or start a new checkpoint)", o.ID, len(old.Operators)))
			} else {
				diffs = append(diffs, fmt.Sprintf("stateful operator %q is new and the checkpoint's batches ran without state (not allowed: its state would miss every committed batch; start a new checkpoint)", o.ID))
			}
			continue
		}
		delete(oldOps, o.ID)
		if prev.Kind != "" && prev.Kind != o.Kind {
			diffs = append(diffs, fmt.Sprintf("operator %q changed kind from %s to %s (not allowed: its state means something else)", o.ID, prev.Kind, o.Kind))
		}
		if prev.Params != "" && prev.Params != o.Params {
			diffs = append(diffs, fmt.Sprintf("operator %q settings changed from %s to %s (not allowed: the state was built under the old ones)", o.ID, prev.Params, o.Params))
		}
		if strings.Join(prev.Stores, ",") != strings.Join(o.Stores, ",") {
			diffs = append(diffs, fmt.Sprintf("operator %q stores changed from [%s] to [%s] (not allowed)", o.ID, strings.Join(prev.Stores, ", "), strings.Join(o.Stores, ", ")))
		}
		if prev.KeySchema != o.KeySchema {
			diffs = append(diffs, fmt.Sprintf("operator %q grouping key changed from %s to %s (not allowed)", o.ID, prev.KeySchema, o.KeySchema))
		}
		if prev.Kind == "process" && o.Kind == "process" {
			if err := processorStateCompatible(prev.StateSchema, o.StateSchema); err != nil {
				diffs = append(diffs, fmt.Sprintf("operator %q: %v", o.ID, err))
			}
		} else if prev.StateSchema != o.StateSchema {
			diffs = append(diffs, fmt.Sprintf("operator %q state schema changed from %s to %s (not allowed)", o.ID, prev.StateSchema, o.StateSchema))
		}
	}
	for _, o := range old.Operators {
		if _, gone := oldOps[o.ID]; gone {
			diffs = append(diffs, fmt.Sprintf("stateful operator %q was removed (not allowed: its state would be orphaned)", o.ID))
		}
	}
	if a, b := commonOrder(old.Operators, cur.Operators); a != b {
		diffs = append(diffs, fmt.Sprintf("stateful operators reordered: the checkpoint runs %s, the query %s (not allowed: each operator's state was built from the rows of the ones before it)", a, b))
	}
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("%w:\n  - %s", ErrIncompatibleRestart, joinLines(diffs))
}

// commonOrder spells the order of the operators both lists hold, as each
// list has them.
func commonOrder(old, cur []OperatorConf) (string, string) {
	in := func(ops []OperatorConf) map[string]bool {
		m := map[string]bool{}
		for _, o := range ops {
			m[o.ID] = true
		}
		return m
	}
	inOld, inCur := in(old), in(cur)
	var a, b []string
	for _, o := range old {
		if inCur[o.ID] {
			a = append(a, o.ID)
		}
	}
	for _, o := range cur {
		if inOld[o.ID] {
			b = append(b, o.ID)
		}
	}
	return strings.Join(a, " → "), strings.Join(b, " → ")
}

func joinLines(s []string) string {
	out := ""
	for i, l := range s {
		if i > 0 {
			out += "\n  - "
		}
		out += l
	}
	return out
}
