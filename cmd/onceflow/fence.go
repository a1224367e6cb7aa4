package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/onceflow/onceflow/kafkasink"
)

// fenceCommand is `onceflow fence --brokers B --transactional-id ID`: it
// aborts the transaction an abandoned Kafka transactional id left open
// (kafkasink.FenceTransactionalID), so read_committed readers of the
// output topic stop waiting for it.
func fenceCommand() *command {
	return &command{
		name: "fence", args: "--brokers HOST:PORT,… --transactional-id ID [--transaction-timeout D]",
		summary: "abort the open transaction of an abandoned Kafka transactional id, and fence its producer",
		setup: func(fs *flag.FlagSet) action {
			brokers := fs.String("brokers", "", "seed brokers, host:port,…; required")
			id := fs.String("transactional-id", "", "the transactional id no query uses any more; required")
			timeout := fs.Duration("transaction-timeout", 60*time.Second, "the transaction timeout the fencing producer asks for (at most the brokers' transaction.max.timeout.ms)")
			return func(ctx context.Context, _ []string, stdout io.Writer) error {
				if *brokers == "" || *id == "" {
					return fmt.Errorf("%w: --brokers and --transactional-id are required", errUsage)
				}
				err := kafkasink.FenceTransactionalID(ctx, *id,
					kafkasink.WithBrokers(strings.Split(*brokers, ",")...),
					kafkasink.WithTransactionTimeout(*timeout))
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "fenced transactional id %q: its open transaction, if any, is aborted, and a producer still using it fails with a fencing error\n", *id)
				return nil
			}
		},
	}
}
