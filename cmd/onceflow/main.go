// Command onceflow runs the demo and looks at what queries leave behind:
// checkpoints, their progress and state, file-sink tables; it audits a
// query's output against its input and runs a development Kafka broker.
//
//	onceflow demo [-checkpoint DIR] [-trigger 1s] [-rows-per-second N] [-keys N] [-batches N] [-status HOST:PORT] [-v]
//	onceflow checkpoint inspect [-o table|json|jsonl] DIR
//	onceflow checkpoint fork SRC DST --from-batch N
//	onceflow checkpoint progress [-o table|json|jsonl] [-n N] DIR
//	onceflow checkpoint state [-o table|json|jsonl] [--partition P] [--version N] --operator ID DIR
//	onceflow checkpoint serve [-addr HOST:PORT] [-n N] DIR
//	onceflow lake files [-o table|json|jsonl] DIR
//	onceflow lake query [-o table|json|jsonl] [--limit N] DIR
//	onceflow lake vacuum [-o table|json|jsonl] [--older-than D] [--delete] DIR
//	onceflow audit [-o table|json|jsonl] --checkpoint DIR --input … --output … --key COL --value COL […]
//	onceflow fence --brokers HOST:PORT,… --transactional-id ID [--transaction-timeout D]
//	onceflow dev kafka [-port 9092] [-topics NAME:PARTITIONS,…] [-data DIR]
//	onceflow version [-o table|json|jsonl]
//	onceflow help [COMMAND …]
//
// Every command takes -h (or --help, or "help COMMAND") and prints its
// usage and flags to standard output with exit status 0. Flags may come
// before or after the arguments. -o picks the output: a table for people
// (times in RFC 3339, UTC; the default, except for lake query, whose
// default is jsonl), json (one document; a list is one array) or jsonl (one
// JSON value a line); the JSON field names are a contract. The deprecated
// --json of inspect, audit (-o json), progress, state and lake files (-o
// jsonl) still works.
//
// Exit status: 0 on success, 1 when the command failed (or audit found
// differences), 2 for a usage error. The old names "progress", "state dump"
// and "kafka" still run "checkpoint progress", "checkpoint state" and "dev
// kafka" and are not listed.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return dispatch(ctx, commands(), args, stdout, stderr)
}

// commands is the command tree. Each file named after a command builds
// its node.
func commands() *command {
	progress, state, kafka := progressCommand(), stateCommand(), kafkaCommand()
	return &command{name: "onceflow", subs: []*command{
		demoCommand(),
		sqlRunCommand(),
		sqlExplainCommand(),
		{name: "checkpoint", summary: "look at or fork a query's checkpoint", subs: []*command{
			inspectCommand(), forkCommand(), progress, state, serveCommand(),
		}},
		lakeCommand(),
		auditCommand(),
		fenceCommand(),
		outboxCommand(),
		{name: "dev", summary: "tools for development", subs: []*command{kafka}},
		versionCommand(),
		// Old names, kept for scripts.
		alias("progress", progress),
		{name: "state", hidden: true, subs: []*command{renamed("dump", state)}},
		alias("kafka", kafka),
	}}
}
