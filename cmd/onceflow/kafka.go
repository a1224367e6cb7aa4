package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/onceflow/onceflow/internal/kafkadev"
)

// kafkaCommand runs the embedded development Kafka (kfake) on a loopback
// port until interrupted, so examples and tests in other processes can
// share one broker that outlives them.
func kafkaCommand() *command {
	return &command{
		name: "kafka", args: "[-port 9092] [-topics NAME:PARTITIONS,…] [-data DIR] [-transaction-max-timeout-ms MS]",
		summary: "run the embedded Kafka broker (kfake) on a loopback port",
		setup: func(fs *flag.FlagSet) action {
			port := fs.Int("port", 9092, "TCP port on 127.0.0.1 (0: a free port)")
			topics := fs.String("topics", "", "topics to create, as name:partitions,… (e.g. payments:4,settlements:4)")
			dataDir := fs.String("data", "", "directory that keeps the broker's data across restarts (default: memory only)")
			maxTxn := fs.Int("transaction-max-timeout-ms", 900000, "the broker's transaction.max.timeout.ms")
			return func(ctx context.Context, _ []string, stdout io.Writer) error {
				o := kafkadev.Options{Port: *port, DataDir: *dataDir, TransactionMaxTimeoutMs: *maxTxn, Topics: map[string]int32{}}
				for _, t := range strings.Split(*topics, ",") {
					if t == "" {
						continue
					}
					name, parts, ok := strings.Cut(t, ":")
					n := 1
					if ok {
						v, err := strconv.Atoi(parts)
						if err != nil || v < 1 {
							return fmt.Errorf("%w: topic %q: partitions must be a positive number", errUsage, t)
						}
						n = v
					}
					o.Topics[name] = int32(n)
				}
				c, err := kafkadev.Start(ctx, o)
				if err != nil {
					return err
				}
				defer c.Close()
				fmt.Fprintf(stdout, "onceflow dev kafka: embedded broker listening on %s\n", strings.Join(c.Addrs(), ","))
				<-ctx.Done()
				return nil
			}
		},
	}
}
