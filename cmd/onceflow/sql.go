package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/monitor"
	"github.com/onceflow/onceflow/sql"
)

// The SQL commands: run a file's sinks, or print their plans.

func sqlRunCommand() *command {
	return &command{
		name: "run", args: "[-checkpoint-root DIR|s3://…] [-sink NAME] [-trigger T] [-status ADDR] [-v] FILE.sql", nargs: 1,
		summary: "run the sinks of a SQL file, one query each, until SIGTERM (or done, for once/available-now)",
		setup: func(fs *flag.FlagSet) action {
			var o sqlRunOptions
			fs.StringVar(&o.root, "checkpoint-root", "", "where each sink without a checkpoint option keeps its checkpoint, in a folder named after it")
			fs.StringVar(&o.sink, "sink", "", "run only this sink (default: all)")
			fs.StringVar(&o.trigger, "trigger", "", "override every sink's trigger: an interval, once or available-now")
			fs.StringVar(&o.status, "status", "", "serve each query's status and metrics on this address (host:port; with several sinks, port 0)")
			fs.BoolVar(&o.verbose, "v", false, "log the driver's steps to stderr")
			return func(ctx context.Context, args []string, stdout io.Writer) error {
				return runSQL(ctx, args[0], o, stdout)
			}
		},
	}
}

func sqlExplainCommand() *command {
	return &command{
		name: "explain", args: "[-checkpoint-root DIR|s3://…] FILE.sql", nargs: 1,
		summary: "print the plan of each sink of a SQL file (with the committed offsets when its checkpoint exists)",
		setup: func(fs *flag.FlagSet) action {
			root := fs.String("checkpoint-root", "", "the checkpoint root run uses, to show committed offsets")
			return func(ctx context.Context, args []string, stdout io.Writer) error {
				p, err := compileSQLFile(args[0], *root, "")
				if err != nil {
					return err
				}
				return p.Explain(ctx, stdout, *root)
			}
		},
	}
}

type sqlRunOptions struct {
	root, sink, trigger, status string
	verbose                     bool
}

func compileSQLFile(path, root, trigger string, opts ...sql.Option) (*sql.Program, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	opts = append(opts, sql.WithFile(path), sql.WithCheckpointRoot(root), sql.WithStorageOpeners(storageOpeners()))
	if trigger != "" {
		t, err := engine.ParseTrigger(trigger)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		opts = append(opts, sql.WithTrigger(t))
	}
	return sql.Compile(string(text), opts...)
}

// runSQL runs the sinks' queries side by side. The first SIGINT or SIGTERM
// (ctx done) stops each query after its batch in flight; a second one
// aborts the batches, which are re-run on restart.
func runSQL(ctx context.Context, path string, o sqlRunOptions, stdout io.Writer) error {
	logger := slog.New(slog.DiscardHandler)
	if o.verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	stdout = &lockedWriter{w: stdout} // the queries print side by side
	p, err := compileSQLFile(path, o.root, o.trigger, sql.WithLogger(logger), sql.WithOutput(stdout))
	if err != nil {
		return err
	}
	sinks := p.Sinks()
	if o.sink != "" {
		s := p.Sink(o.sink)
		if s == nil {
			return fmt.Errorf("%w: %s has no sink %q", errUsage, path, o.sink)
		}
		sinks = []*sql.Sink{s}
	}
	if o.status != "" && len(sinks) > 1 {
		if _, port, err := net.SplitHostPort(o.status); err != nil || port != "0" {
			return fmt.Errorf("%w: -status %s: with %d sinks each query serves its own status, so give port 0 (each address is printed)", errUsage, o.status, len(sinks))
		}
	}
	// A second signal aborts: the run context is cancelled.
	runCtx, abort := context.WithCancel(context.WithoutCancel(ctx))
	defer abort()
	var queries []*sql.Query
	defer func() {
		for _, q := range queries {
			if err := q.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "onceflow run: close %s: %v\n", q.Sink.Name, err)
			}
		}
	}()
	var monitors []*monitor.Listener
	for _, s := range sinks {
		var extra []sql.Option
		if o.status != "" {
			m := monitor.New(monitor.WithStatusServer(o.status))
			monitors = append(monitors, m)
			extra = append(extra, sql.WithEngineOptions(engine.WithListener(m)))
		}
		extra = append(extra, sql.WithEngineOptions(engine.WithProgressListener(func(pr engine.Progress) {
			fmt.Fprintf(stdout, "progress: %s: batch %d, %d rows in, %d rows out, %d ms\n", s.Name, pr.BatchID, pr.NumInputRows, sinkRows(pr), pr.BatchDurationMs)
		})))
		q, err := p.Open(runCtx, s.Name, extra...)
		if err != nil {
			return &redactedError{msg: p.Redact(err.Error()), err: err}
		}
		queries = append(queries, q)
	}
	stopped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-stopped:
			return
		}
		fmt.Fprintln(stdout, "onceflow run: stopping after the batches in flight; signal again to abort them")
		for _, q := range queries {
			q.Stop()
		}
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(ch)
		select {
		case <-ch:
			abort()
		case <-stopped:
		}
	}()
	errs := make([]error, len(queries))
	var wg sync.WaitGroup
	for i, q := range queries {
		wg.Go(func() {
			err := q.Run(runCtx)
			if err != nil {
				errs[i] = fmt.Errorf("sink %s: %w", q.Sink.Name, err)
				for _, other := range queries {
					other.Stop()
				}
			}
		})
	}
	if len(monitors) > 0 {
		go func() {
			for i, m := range monitors {
				for m.StatusAddr() == "" {
					select {
					case <-stopped:
						return
					case <-runCtx.Done():
						return
					default:
					}
					waitBriefly(runCtx)
				}
				fmt.Fprintf(stdout, "onceflow run: %s: status on http://%s/\n", sinks[i].Name, m.StatusAddr())
			}
		}()
	}
	wg.Wait()
	close(stopped)
	err = errors.Join(errs...)
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) {
		err = fmt.Errorf("aborted by a second signal: %w", err)
	}
	return &redactedError{msg: p.Redact(err.Error()), err: err}
}

// redactedError is err with the SQL file's secret values masked in its
// message.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func waitBriefly(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(20 * time.Millisecond):
	}
}

// lockedWriter serializes the writes of queries running side by side.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func sinkRows(p engine.Progress) int64 {
	var n int64
	for _, s := range p.Sinks {
		n += s.NumOutputRows
	}
	return n
}
