package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// command is one node of the command tree: a group, whose first argument
// picks one of subs, or a leaf, which declares its flags in setup and runs
// the action setup returns once they are parsed.
type command struct {
	name    string
	args    string // the usage after the name, e.g. "[-o table|json|jsonl] DIR"
	summary string
	// nargs is the number of positional arguments a leaf takes.
	nargs int
	// hidden commands are old names kept for scripts: they run, and are
	// not listed.
	hidden bool
	subs   []*command
	setup  func(fs *flag.FlagSet) action
}

// action runs a leaf command on its positional arguments.
type action func(ctx context.Context, args []string, stdout io.Writer) error

// errUsage marks an error caused by the command line (exit 2).
var errUsage = errors.New("usage")

// alias is c under an old name, hidden from the listings.
func alias(name string, c *command) *command {
	a := renamed(name, c)
	a.hidden = true
	return a
}

// renamed is c under another name.
func renamed(name string, c *command) *command {
	a := *c
	a.name = name
	return &a
}

func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// dispatch runs the command args name below root and returns the exit
// code: 0, 1 when the command failed, 2 for a usage error. Help that was
// asked for (-h, --help, help) goes to stdout with exit 0; usage errors go
// to stderr.
func dispatch(ctx context.Context, root *command, args []string, stdout, stderr io.Writer) int {
	c, path := root, root.name
	for c.subs != nil {
		if len(args) == 0 {
			printGroupHelp(stderr, c, path)
			return 2
		}
		if isHelp(args[0]) {
			if len(args) > 1 && c == root && args[0] == "help" {
				// "onceflow help checkpoint inspect" is "onceflow checkpoint inspect -h".
				return dispatch(ctx, root, append(args[1:], "-h"), stdout, stderr)
			}
			printGroupHelp(stdout, c, path)
			return 0
		}
		sub := c.find(args[0])
		if sub == nil {
			fmt.Fprintf(stderr, "%s: unknown command %q\n\n", path, args[0])
			printGroupHelp(stderr, c, path)
			return 2
		}
		c, path, args = sub, path+" "+sub.name, args[1:]
	}

	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are printed once, below
	act := c.setup(fs)
	err := fs.Parse(splitFlags(fs, args))
	switch {
	case errors.Is(err, flag.ErrHelp):
		printLeafHelp(stdout, c, path, fs)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\nusage: %s %s (-h for help)\n", path, err, path, c.args)
		return 2
	case fs.NArg() != c.nargs:
		fmt.Fprintf(stderr, "%s: got %d arguments %q, want %d\nusage: %s %s (-h for help)\n", path, fs.NArg(), fs.Args(), c.nargs, path, c.args)
		return 2
	}
	if err := act(ctx, fs.Args(), stdout); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", path, err)
		if errors.Is(err, errUsage) {
			fmt.Fprintf(stderr, "usage: %s %s (-h for help)\n", path, c.args)
			return 2
		}
		return 1
	}
	return 0
}

func (c *command) find(name string) *command {
	for _, s := range c.subs {
		if s.name == name {
			return s
		}
	}
	return nil
}

// leaves lists the visible leaf commands below c with their paths
// relative to c.
func (c *command) leaves(prefix string) (paths []string, cmds []*command) {
	for _, s := range c.subs {
		if s.hidden {
			continue
		}
		p := strings.TrimSpace(prefix + " " + s.name)
		if s.subs == nil {
			paths, cmds = append(paths, p), append(cmds, s)
			continue
		}
		ps, cs := s.leaves(p)
		paths, cmds = append(paths, ps...), append(cmds, cs...)
	}
	return paths, cmds
}

func printGroupHelp(w io.Writer, c *command, path string) {
	fmt.Fprintf(w, "usage: %s COMMAND [flags] [arguments]\n", path)
	if c.summary != "" {
		fmt.Fprintf(w, "\n%s\n", c.summary)
	}
	fmt.Fprintln(w, "\ncommands:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	paths, cmds := c.leaves(strings.TrimPrefix(strings.TrimPrefix(path, "onceflow"), " "))
	for i, p := range paths {
		fmt.Fprintf(tw, "  %s\t%s\n", p, cmds[i].summary)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nRun \"%s COMMAND -h\" for a command's flags.\n", path)
}

func printLeafHelp(w io.Writer, c *command, path string, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s %s\n\n%s\n", path, c.args, c.summary)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w, "\nflags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

// splitFlags moves flags after positional arguments to the front, so
// "inspect DIR -o json" works like "inspect -o json DIR". A flag takes the
// next argument as its value unless it has "=value" or fs says it is
// boolean (its flag.Value has IsBoolFlag() true); an unknown flag is left
// for fs.Parse to report.
func splitFlags(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || len(a) == 1 {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil || isBoolFlag(f) || i+1 == len(args) {
			continue
		}
		flags = append(flags, args[i+1])
		i++
	}
	return append(flags, pos...)
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
