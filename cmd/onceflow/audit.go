package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/onceflow/onceflow/audit"
	"github.com/onceflow/onceflow/foreachbatch/postgres"
	"github.com/onceflow/onceflow/source/files"
	"github.com/onceflow/onceflow/storage"
)

const auditArgs = outputArgs + " --checkpoint DIR --input kafka://HOST:PORT/TOPIC|files:DIR " +
	"--output kafka://HOST:PORT/TOPIC|lake:DIR-or-s3://…|postgres://…?table=T|jsonl:FILE " +
	"--key COL --value COL [--output-value COL] [--batch-column batch_id] [--source-index 0] [--input-format json|csv|parquet]"

// auditCommand reconciles one committed output of a query with its input;
// it fails (exit 1) when they differ.
func auditCommand() *command {
	return &command{
		name: "audit", args: auditArgs,
		summary: "compare a query's output with per-key sums of its input (exit 1: they differ)",
		setup: func(fs *flag.FlagSet) action {
			out := outputFlag(fs, formatTable, formatJSON)
			cpLoc := fs.String("checkpoint", "", "the query's checkpoint directory or s3:// URL; required")
			in := fs.String("input", "", "kafka://HOST:PORT[,HOST:PORT…]/TOPIC or files:DIR; required")
			output := fs.String("output", "", "kafka://HOST:PORT/TOPIC, lake:DIR (or lake:s3://…), postgres://…?table=T, or jsonl:FILE; required")
			key := fs.String("key", "", "grouping column (input and output); required")
			value := fs.String("value", "", "input column summed per key; required")
			outValue := fs.String("output-value", "", "output column to compare (default: --value)")
			batchCol := fs.String("batch-column", "batch_id", "output's batch id column, if it has one")
			srcIndex := fs.Int("source-index", 0, "the input's position among the query's sources")
			inFormat := fs.String("input-format", "json", "format of a files: input: json, csv or parquet")
			return func(ctx context.Context, _ []string, stdout io.Writer) error {
				var missing []string
				for _, f := range []struct {
					name, v string
				}{{"--checkpoint", *cpLoc}, {"--input", *in}, {"--output", *output}, {"--key", *key}, {"--value", *value}} {
					if f.v == "" {
						missing = append(missing, f.name)
					}
				}
				if len(missing) > 0 {
					return fmt.Errorf("%w: give %s", errUsage, strings.Join(missing, ", "))
				}
				cfg := audit.Config{SourceIndex: *srcIndex, Key: *key, Value: *value, OutputValue: *outValue, BatchColumn: *batchCol}
				return reconcile(ctx, cfg, *cpLoc, *in, *inFormat, *output, *out, stdout)
			}
		},
	}
}

func reconcile(ctx context.Context, cfg audit.Config, cpLoc, in, inFormat, out string, f format, stdout io.Writer) error {
	cp, err := openStore(ctx, cpLoc)
	if err != nil {
		return err
	}
	defer cp.Close()
	input, err := auditInput(in, inFormat)
	if err != nil {
		return err
	}
	output, closeOut, err := auditOutput(ctx, out)
	if err != nil {
		return err
	}
	defer closeOut()
	cfg.Checkpoint, cfg.Input, cfg.Output = cp, input, output
	rep, err := audit.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if f != formatTable {
		if err := writeJSON(stdout, f, rep); err != nil {
			return err
		}
	} else {
		printAudit(stdout, rep)
	}
	if !rep.OK() {
		return fmt.Errorf("%d keys differ (%s)", rep.Differences(), suspectSummary(rep))
	}
	return nil
}

func auditInput(loc, format string) (audit.Input, error) {
	if dir, ok := strings.CutPrefix(loc, "files:"); ok {
		f, err := parseFormat(format)
		if err != nil {
			return nil, err
		}
		return audit.FilesInput(dir, f), nil
	}
	if strings.HasPrefix(loc, "kafka://") {
		brokers, topic, err := parseKafkaURL(loc)
		if err != nil {
			return nil, err
		}
		return audit.KafkaInput(brokers, topic), nil
	}
	return nil, fmt.Errorf("%w: --input %q: want kafka://HOST:PORT/TOPIC or files:DIR", errUsage, storage.Redact(loc))
}

func parseFormat(s string) (files.Format, error) {
	switch s {
	case "json":
		return files.JSON, nil
	case "csv":
		return files.CSV, nil
	case "parquet":
		return files.Parquet, nil
	}
	return 0, fmt.Errorf("%w: --input-format %q: want json, csv or parquet", errUsage, s)
}

func parseKafkaURL(loc string) ([]string, string, error) {
	rest := strings.TrimPrefix(loc, "kafka://")
	hosts, topic, ok := strings.Cut(rest, "/")
	if !ok || hosts == "" || topic == "" || strings.Contains(topic, "/") {
		return nil, "", fmt.Errorf("%w: %q: want kafka://HOST:PORT[,HOST:PORT…]/TOPIC", errUsage, loc)
	}
	return strings.Split(hosts, ","), topic, nil
}

func auditOutput(ctx context.Context, loc string) (audit.Output, func(), error) {
	noop := func() {}
	switch {
	case strings.HasPrefix(loc, "kafka://"):
		brokers, topic, err := parseKafkaURL(loc)
		if err != nil {
			return nil, noop, err
		}
		return audit.KafkaOutput(brokers, topic), noop, nil
	case strings.HasPrefix(loc, "lake:"):
		table, err := openStore(ctx, strings.TrimPrefix(loc, "lake:"))
		if err != nil {
			return nil, noop, err
		}
		return audit.LakeOutput(table), func() { _ = table.Close() }, nil
	case strings.HasPrefix(loc, "jsonl:"):
		return audit.JSONLinesOutput(strings.TrimPrefix(loc, "jsonl:")), noop, nil
	case strings.HasPrefix(loc, "postgres://"), strings.HasPrefix(loc, "postgresql://"):
		u, err := url.Parse(loc)
		if err != nil {
			return nil, noop, fmt.Errorf("%w: --output is not a PostgreSQL URL", errUsage) // the URL may hold a password
		}
		q := u.Query()
		table := q.Get("table")
		if table == "" {
			return nil, noop, fmt.Errorf("%w: --output %s: add ?table=NAME", errUsage, storage.Redact(loc))
		}
		q.Del("table")
		u.RawQuery = q.Encode()
		pool, err := postgres.Connect(ctx, u.String()) // its errors carry no password
		if err != nil {
			return nil, noop, fmt.Errorf("connect to %s: %w", redactPG(u), err)
		}
		return audit.PostgresOutput(pool, table), pool.Close, nil
	}
	return nil, noop, fmt.Errorf("%w: --output %q: want a kafka://, lake:, postgres:// or jsonl: location", errUsage, storage.Redact(loc))
}

// redactPG names a database without its user information or parameters
// (a password may hide in either).
func redactPG(u *url.URL) string {
	return u.Scheme + "://" + u.Host + u.Path
}

// maxAuditRows caps the differing keys the text report lists.
const maxAuditRows = 20

func printAudit(w io.Writer, r *audit.Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "input\t%s\n", r.Input)
	fmt.Fprintf(tw, "output\t%s\n", r.Output)
	fmt.Fprintf(tw, "last committed batch\t%d\n", r.LastCommitted)
	if r.Pending >= 0 {
		fmt.Fprintf(tw, "pending batch\t%d (offsets/%d without commits/%d)\n", r.Pending, r.Pending, r.Pending)
	}
	fmt.Fprintf(tw, "recomputed from\t%s %s to %s\n", r.StartFrom, r.Start, r.End)
	if r.MatchedBatch >= 0 {
		fmt.Fprintf(tw, "matched batch\t%d\n", r.MatchedBatch)
	} else {
		fmt.Fprintf(tw, "matched batch\tnone (compared with batch %d)\n", r.ComparedBatch)
	}
	mode := "rows summed per key"
	if r.Cumulative {
		mode = "one cumulative row per key"
	}
	fmt.Fprintf(tw, "rows\t%d input, %d output (%s)\n", r.InputRows, r.OutputRows, mode)
	fmt.Fprintf(tw, "keys\t%d matching, %d missing, %d extra, %d differing\n", r.Matching, len(r.Missing), len(r.Extra), len(r.Differing))
	tw.Flush()
	if r.Differences() > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tWANT\tGOT\tKIND\tSUSPECT\tBATCH")
		shown := 0
		rows := func(kind string, ds []audit.KeyDiff) {
			for _, d := range ds {
				if shown++; shown > maxAuditRows {
					continue
				}
				b := "-"
				if d.Batch >= 0 {
					b = fmt.Sprint(d.Batch)
				}
				want, got := fmt.Sprint(d.Want), fmt.Sprint(d.Got)
				if kind == "missing" {
					got = "-"
				}
				if kind == "extra" {
					want = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.Key, want, got, kind, d.Suspect, b)
			}
		}
		rows("missing", r.Missing)
		rows("extra", r.Extra)
		rows("differing", r.Differing)
		tw.Flush()
		if shown > maxAuditRows {
			fmt.Fprintf(w, "… and %d more keys (-o json lists all)\n", shown-maxAuditRows)
		}
		fmt.Fprintln(w)
		for _, s := range r.Suspects {
			fmt.Fprintf(w, "suspect: %s (%d keys): %s\n", s.Link, s.Keys, s.Detail)
		}
	}
	if len(r.DuplicateBatches) > 0 {
		fmt.Fprintf(w, "(key, batch) pairs seen twice in batches %v\n", r.DuplicateBatches)
	}
}

func suspectSummary(r *audit.Report) string {
	var parts []string
	for _, s := range r.Suspects {
		p := s.Link
		if s.Batch >= 0 {
			p += fmt.Sprintf(" %d", s.Batch)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}
