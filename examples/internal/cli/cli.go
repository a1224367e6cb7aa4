package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/examples/internal/payments"
	"github.com/onceflow/onceflow/storage"
	"github.com/onceflow/onceflow/storage/s3store"
)

// Command is one example program while it runs: its name, the shared flags
// it registered, and what it opened through it.
type Command struct {
	name   string
	fs     *flag.FlagSet
	args   []string
	stderr io.Writer

	checkpoint string
	trigger    string
	generate   int
	merchants  int
	retain     *int // nil: no -retain flag, the engine's default applies
	verbose    bool

	logger       *slog.Logger
	trig         engine.Trigger
	checkpointSt storage.Store
	closers      []func() error
}

// Main runs run with a Command named name on the process's flags and
// arguments, closes what run opened through the Command, and when either
// fails prints "name: error" to stderr and exits 1.
func Main(name string, run func(ctx context.Context, c *Command) error) {
	c := &Command{name: name, fs: flag.CommandLine, args: os.Args[1:], stderr: os.Stderr}
	err := run(context.Background(), c)
	if err = errors.Join(err, c.close()); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// FlagSet is where the program registers its own flags.
func (c *Command) FlagSet() *flag.FlagSet { return c.fs }

// CheckpointFlag registers -checkpoint, a directory or s3:// location,
// with default def.
func (c *Command) CheckpointFlag(def, usage string) {
	c.fs.StringVar(&c.checkpoint, "checkpoint", def, usage)
}

// TriggerFlag registers -trigger, default 1s.
func (c *Command) TriggerFlag() {
	c.fs.StringVar(&c.trigger, "trigger", "1s", "processing-time interval, once, or available-now")
}

// GenerateFlags registers -generate (default 0: generate nothing) and
// -merchants (default 50).
func (c *Command) GenerateFlags(usage string) {
	c.fs.IntVar(&c.generate, "generate", 0, usage)
	c.fs.IntVar(&c.merchants, "merchants", 50, "distinct merchants of generated payments")
}

// RetainFlag registers -retain, default engine.DefaultMinBatchesToRetain,
// which Run passes to the query. Without it the engine's default applies.
func (c *Command) RetainFlag() {
	c.retain = c.fs.Int("retain", engine.DefaultMinBatchesToRetain, "batches of checkpoint logs kept for recovery and inspection")
}

// VerboseFlag registers -v, which sends the logger's output to stderr.
func (c *Command) VerboseFlag(usage string) {
	c.fs.BoolVar(&c.verbose, "v", false, usage)
}

// Parse parses the arguments, fails with the usage when one of the flags
// named in required is empty, and then builds the logger and the trigger.
func (c *Command) Parse(required ...string) error {
	if err := c.fs.Parse(c.args); err != nil {
		return err
	}
	for _, name := range required {
		if f := c.fs.Lookup(name); f != nil && f.Value.String() == "" {
			c.fs.Usage()
			return fmt.Errorf("%s %s required", listFlags(required), isAre(len(required)))
		}
	}
	c.logger = slog.New(slog.DiscardHandler)
	if c.verbose {
		c.logger = slog.New(slog.NewTextHandler(c.stderr, nil))
	}
	if c.trigger != "" { // empty only without TriggerFlag
		t, err := engine.ParseTrigger(c.trigger)
		if err != nil {
			return err
		}
		c.trig = t
	}
	return nil
}

// listFlags writes names as "-a", "-a and -b" or "-a, -b and -c".
func listFlags(names []string) string {
	dashed := make([]string, len(names))
	for i, n := range names {
		dashed[i] = "-" + n
	}
	if len(dashed) < 2 {
		return strings.Join(dashed, "")
	}
	return strings.Join(dashed[:len(dashed)-1], ", ") + " and " + dashed[len(dashed)-1]
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// Logger is the logger -v chose: stderr, or nothing. Valid after Parse.
func (c *Command) Logger() *slog.Logger { return c.logger }

// Generate is the value of -generate.
func (c *Command) Generate() int { return c.generate }

// Merchants is the value of -merchants.
func (c *Command) Merchants() int { return c.merchants }

// Land lands the -generate payments in dir as landing files of 1000
// payments each (files already there are kept) and says how many it wrote.
// With -generate 0 it does nothing.
func (c *Command) Land(dir string) error {
	if c.generate <= 0 {
		return nil
	}
	n, err := payments.Generate(dir, c.generate, 1000, c.merchants)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "%s: landed %d generated files in %s\n", c.name, n, dir)
	return nil
}

// Open opens the store at location, a directory or an s3:// URL, and
// closes it when the program ends. what names it in the error.
func (c *Command) Open(ctx context.Context, what, location string) (storage.Store, error) {
	st, err := storage.Open(ctx, location, map[string]storage.Opener{"s3": s3store.Open})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", what, err)
	}
	c.Defer(st.Close)
	return st, nil
}

// OpenCheckpoint opens the -checkpoint store, which Run gives the query.
func (c *Command) OpenCheckpoint(ctx context.Context) error {
	st, err := c.Open(ctx, "checkpoint", c.checkpoint)
	if err != nil {
		return err
	}
	c.checkpointSt = st
	return nil
}

// Defer has close called when the program ends, after everything opened
// later.
func (c *Command) Defer(close func() error) { c.closers = append(c.closers, close) }

func (c *Command) close() error {
	var err error
	for i := len(c.closers) - 1; i >= 0; i-- {
		err = errors.Join(err, c.closers[i]())
	}
	c.closers = nil
	return err
}

// Run runs stream into sink with the checkpoint, trigger, logger and (when
// registered) -retain until SIGTERM or SIGINT, printing one line per batch
// to stderr: "name: batch <id>: <describe(p)>, <ms> ms". opts are the
// program's own query options.
func (c *Command) Run(ctx context.Context, stream *engine.Stream, sink engine.Sink, describe func(engine.Progress) string, opts ...engine.Option) error {
	q, err := c.Query("", c.checkpointSt, stream, sink, describe, opts...)
	if err != nil {
		return err
	}
	return c.RunQueries(ctx, q)
}

// Query builds a query of stream into sink as Run does, but named
// "<program>-<name>" (the program's name when name is empty), checkpointed
// in cp (a Sub of Checkpoint, say) and not run: a program with several
// queries builds each and runs them together with RunQueries. Its progress
// lines read "<program>-<name>: batch <id>: …".
func (c *Command) Query(name string, cp storage.Store, stream *engine.Stream, sink engine.Sink, describe func(engine.Progress) string, opts ...engine.Option) (*engine.Query, error) {
	full, logger := c.name, c.logger
	if name != "" {
		full += "-" + name
		logger = logger.With("query", full)
	}
	all := []engine.Option{
		engine.WithName(full),
		engine.WithCheckpoint(cp),
		engine.WithSink(sink),
		engine.WithTrigger(c.trig),
		engine.WithLogger(logger),
		engine.WithProgressListener(func(p engine.Progress) {
			fmt.Fprintf(c.stderr, "%s: batch %d: %s, %d ms\n", full, p.BatchID, describe(p), p.BatchDurationMs)
		}),
	}
	if c.retain != nil {
		all = append(all, engine.WithMinBatchesToRetain(*c.retain))
	}
	return engine.NewQuery(stream, append(all, opts...)...)
}

// Checkpoint is the -checkpoint store, once OpenCheckpoint has opened it.
func (c *Command) Checkpoint() storage.Store { return c.checkpointSt }

// Finite reports whether the -trigger ends by itself (once, available-now):
// the queries return once they have processed what was there.
func (c *Command) Finite() bool {
	s := c.trig.String()
	return s == "once" || s == "available-now"
}

// RunQueries runs the queries side by side, each until it ends by itself
// or SIGTERM or SIGINT stops it (engine.RunUntilSignal: every query
// commits its batch in flight), and returns when all have returned. When
// one fails, the others are cancelled (their batch in flight is re-run on
// restart) and the first error is returned.
func (c *Command) RunQueries(ctx context.Context, qs ...*engine.Query) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(qs))
	for _, q := range qs {
		go func() {
			err := engine.RunUntilSignal(ctx, q)
			if err != nil {
				cancel()
			}
			errs <- err
		}()
	}
	var first error
	for range qs {
		if err := <-errs; err != nil && (first == nil || errors.Is(first, context.Canceled)) {
			first = err
		}
	}
	return first
}
