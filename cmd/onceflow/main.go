// Command onceflow runs the demo and inspects checkpoints, state, progress
// and lakes.
//
//	onceflow demo [-checkpoint DIR] [-trigger 1s] [-rows-per-second N] [-batches N]
//	onceflow checkpoint inspect [--json] DIR
//	onceflow state dump DIR --operator ID [--partition P] [--version N]
//	onceflow progress [--json] [-n N] DIR
//	onceflow lake files|query|vacuum …
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// command is one subcommand: it parses args itself and writes to stdout.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout io.Writer) error
}

// commands lists every subcommand. Files named after a command add theirs
// here.
func commands() map[string]command {
	return map[string]command{
		"demo":       {"run a rate-source query with a processing-time trigger and print its progress", demoCommand},
		"checkpoint": {"inspect or fork a checkpoint: checkpoint inspect [--json] DIR | checkpoint fork SRC DST --from-batch N", checkpointCommand},
		"state":      {"print a stateful operator's rows: state dump DIR --operator ID [--version N]", stateCommand},
		"progress":   {"print a query's progress log as a table: progress [--json] [-n N] DIR", progressCommand},
		"lake":       {"look at a file-sink table: lake files|query|vacuum DIR", lakeCommand},
		"audit":      {"reconcile a query's committed output with its input: audit --checkpoint DIR --input … --output … --key K --value V", auditCommand},
		"kafka":      {"run the embedded development Kafka broker on a loopback port: kafka [-port 9092] [-topics t:4,…]", kafkaCommand},
	}
}

// errUsage marks an error caused by the command line.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "onceflow: unknown command %q\n\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	if err := c.run(ctx, args[1:], stdout); err != nil {
		fmt.Fprintf(stderr, "onceflow %s: %v\n", args[0], err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: onceflow COMMAND [flags]\n\ncommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, cmds[n].summary)
	}
}

// splitFlags moves flags after positional arguments to the front, so
// "inspect DIR --json" works like "inspect --json DIR".
func splitFlags(args []string, boolFlags ...string) []string {
	isBool := map[string]bool{}
	for _, b := range boolFlags {
		isBool[b] = true
	}
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if !strings.Contains(name, "=") && !isBool[name] && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, pos...)
}
