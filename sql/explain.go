package sql

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/storage"
)

// guarantees says how each sink connector makes batch N visible once.
var guarantees = map[string]string{
	"kafka":    "exactly-once: one Kafka transaction per batch with a batch marker (read_committed readers)",
	"files":    "exactly-once: Parquet files listed in _onceflow_log/N, put-if-absent",
	"postgres": "exactly-once: the rows and the batch id in one PostgreSQL transaction",
	"console":  "at-least-once: a re-run batch is printed again, marked as a repeat",
	"iceberg":  "exactly-once: one Iceberg snapshot per batch, its batch id in the commit (found, not re-appended, on a re-run)",
}

// Explain prints the plan of every sink: its connector and guarantee, its
// output mode and trigger, its source (with the offsets of the last
// committed batch when the checkpoint exists), its steps and its stateful
// operators with ids and keys. Secret options are masked. root is the
// checkpoint root for sinks without a checkpoint option ("": the one given
// to Compile, if any).
func (p *Program) Explain(ctx context.Context, w io.Writer, root string) error {
	for i, s := range p.sinks {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "sink %s (line %d:%d)\n", s.Name, s.Line, s.Col)
		fmt.Fprintf(w, "  connector:   %s (%s)\n", s.Connector, s.opts)
		g := guarantees[s.Connector]
		if s.Connector == "postgres" && s.opts.str("write", "") == "upsert" {
			g = "exactly-once: idempotent upserts guarded by a batch id column per row"
		}
		fmt.Fprintf(w, "  guarantee:   %s\n", g)
		fmt.Fprintf(w, "  output mode: %s\n", s.Mode)
		fmt.Fprintf(w, "  trigger:     %s\n", s.Trigger)
		loc, err := p.CheckpointLocation(s, root)
		if err != nil {
			fmt.Fprintf(w, "  checkpoint:  none given (-checkpoint-root or the checkpoint option)\n")
		} else {
			fmt.Fprintf(w, "  checkpoint:  %s\n", p.scrub(storage.Redact(loc)))
		}
		for _, src := range s.q.srcs {
			what := "source"
			if src.table {
				what = "table"
			}
			fmt.Fprintf(w, "  %s %s:   %s (%s)\n", what, src.name, src.connector, src.opts)
			fmt.Fprintf(w, "    columns:   %s\n", fieldList(src.schema))
			if src.table {
				fmt.Fprintf(w, "    primary key: %s", strings.Join(src.keys, ", "))
				if src.deleteWhen != nil {
					fmt.Fprintf(w, ", deleted when %s", src.deleteWhen)
				}
				fmt.Fprintln(w)
			}
		}
		if loc != "" && err == nil {
			fmt.Fprintf(w, "  committed: %s\n", p.scrub(p.committed(ctx, loc)))
		}
		fmt.Fprintf(w, "  steps:\n")
		for j, o := range s.q.ops {
			l, c := p.r.lineCol(o.at)
			fmt.Fprintf(w, "    %d. %s  (line %d:%d)\n", j+1, o.desc, l, c)
		}
		if len(s.Operators) == 0 {
			fmt.Fprintf(w, "  stateful operators: none\n")
		} else {
			fmt.Fprintf(w, "  stateful operators:\n")
			for _, o := range s.Operators {
				how := "named by the rule <sink>-<kind>-<n>"
				if o.Hinted {
					how = "from the id hint"
				}
				fmt.Fprintf(w, "    %s: %s keyed by (%s), id %s\n", o.ID, o.Kind, strings.Join(o.Keys, ", "), how)
				for _, eo := range s.engine.Operators {
					if eo.ID == o.ID {
						fmt.Fprintf(w, "      emits %s", eo.Emits)
						if eo.EventTime != "" {
							fmt.Fprintf(w, ", event time %s", eo.EventTime)
						}
						fmt.Fprintln(w)
					}
				}
			}
		}
		for _, warn := range s.engine.Warnings {
			fmt.Fprintf(w, "  warning: %s\n", warn)
		}
		fmt.Fprintf(w, "  output columns: %s\n", strings.Join(s.q.cols, ", "))
	}
	return nil
}

// committed describes the last committed batch at loc and its source
// offsets, without creating anything there.
func (p *Program) committed(ctx context.Context, loc string) string {
	if !strings.Contains(loc, "://") {
		if _, err := os.Stat(loc); err != nil {
			return "no checkpoint yet"
		}
	}
	st, err := storage.Open(ctx, loc, p.cfg.openers)
	if err != nil {
		return fmt.Sprintf("unreadable checkpoint (%v)", err)
	}
	defer st.Close()
	r := checkpoint.NewReader(st)
	id, _, ok, err := r.LatestCommit(ctx)
	if err != nil {
		return fmt.Sprintf("unreadable checkpoint (%v)", err)
	}
	if !ok {
		return "no batch committed yet"
	}
	e, err := r.Offsets(ctx, id)
	if err != nil {
		return fmt.Sprintf("batch %d, offsets unreadable (%v)", id, err)
	}
	var parts []string
	for _, so := range e.Sources {
		parts = append(parts, fmt.Sprintf("%s up to %s", so.Description, so.End))
	}
	return fmt.Sprintf("batch %d, %s", id, strings.Join(parts, "; "))
}

// Redact masks in s every secret option value of the program (see
// IsSecretOption and ${ENV}): for text the program did not write itself,
// such as a runtime error naming a source by its description.
func (p *Program) Redact(s string) string { return p.scrub(s) }

// scrub masks every secret option value of the program in s: text read
// back from a checkpoint (a source's description) may hold one.
func (p *Program) scrub(s string) string {
	var secrets []string
	add := func(o *options) {
		for _, v := range o.vals {
			if v.secret && len(v.v) >= 3 {
				secrets = append(secrets, v.v)
			}
		}
	}
	for _, src := range p.sources {
		add(src.opts)
	}
	for _, sk := range p.sinks {
		add(sk.opts)
	}
	// longest first, so a secret that contains another is masked whole
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, v := range secrets {
		s = strings.ReplaceAll(s, v, "***")
	}
	return s
}
