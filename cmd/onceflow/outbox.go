package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/onceflow/onceflow/outbox"
)

// headerFlags collects repeated --header "Name: value" flags.
type headerFlags []string

func (h *headerFlags) String() string { return fmt.Sprintf("%d header(s)", len(*h)) }
func (h *headerFlags) Set(v string) error {
	if name, _, ok := strings.Cut(v, ":"); !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("want \"Name: value\"") // the value may be a secret: not echoed
	}
	*h = append(*h, v)
	return nil
}

// outboxCommand is `onceflow outbox`: it runs an outbox worker (package
// outbox) that POSTs the committed intents of a Kafka topic to an HTTP
// endpoint, with its position in its own checkpoint.
func outboxCommand() *command {
	return &command{
		name: "outbox", args: "(--brokers HOST:PORT,… --topic T | --postgres-env VAR --table T) --checkpoint DIR --endpoint URL [--header 'Name: value']… [--max-attempts N] [--backoff D] [--backoff-max D] [--idle-exit D] [--metrics-addr HOST:PORT]",
		summary: "deliver a query's committed intents to an HTTP endpoint, once per Idempotency-Key",
		setup: func(fs *flag.FlagSet) action {
			brokers := fs.String("brokers", "", "seed brokers, host:port,…; required")
			topic := fs.String("topic", "", "the intents topic (written by the query's transactional Kafka sink)")
			pgEnv := fs.String("postgres-env", "", "read an outbox table instead of Kafka: the name of the environment variable holding the PostgreSQL URL (the URL, with its password, stays out of the command line)")
			table := fs.String("table", "", "with --postgres-env: the outbox table (a seq bigserial column, written under the offsets-in-sink guard)")
			cpLoc := fs.String("checkpoint", "", "the worker's own checkpoint (a directory, file:// or s3:// URL); required")
			endpoint := fs.String("endpoint", "", "the URL each intent is POSTed to; required")
			var headers headerFlags
			fs.Var(&headers, "header", "a header added to every POST, \"Name: value\" (repeatable; values are never printed)")
			maxAttempts := fs.Int("max-attempts", 5, "failed attempts before an intent goes to the dead letter (<checkpoint>/deadletter/)")
			backoff := fs.Duration("backoff", 100*time.Millisecond, "wait after the first failed attempt, doubled after each further one")
			backoffMax := fs.Duration("backoff-max", 10*time.Second, "the longest wait between attempts")
			idField := fs.String("id-field", "id", "the JSON field of an intent that holds its id")
			idle := fs.Duration("idle-exit", 0, "exit once no intent arrived for this long (0: run until interrupted)")
			metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics at http://HOST:PORT/metrics (default: none)")
			return func(ctx context.Context, _ []string, stdout io.Writer) error {
				kafka, pg := *brokers != "" || *topic != "", *pgEnv != "" || *table != ""
				if kafka == pg || (kafka && (*brokers == "" || *topic == "")) || (pg && (*pgEnv == "" || *table == "")) || *cpLoc == "" || *endpoint == "" {
					return fmt.Errorf("%w: --checkpoint, --endpoint and either --brokers with --topic or --postgres-env with --table are required", errUsage)
				}
				cp, err := openStore(ctx, *cpLoc)
				if err != nil {
					return err
				}
				defer cp.Close()
				reg := prometheus.NewRegistry()
				opts := []outbox.Option{
					outbox.WithCheckpoint(cp), outbox.WithEndpoint(*endpoint), outbox.WithMaxAttempts(*maxAttempts), outbox.WithBackoff(*backoff, *backoffMax),
					outbox.WithIDField(*idField), outbox.WithIdleExit(*idle), outbox.WithRegisterer(reg),
				}
				if kafka {
					opts = append(opts, outbox.WithBrokers(strings.Split(*brokers, ",")...), outbox.WithTopic(*topic))
				} else {
					dsn := os.Getenv(*pgEnv)
					if dsn == "" {
						return fmt.Errorf("outbox: environment variable %s (--postgres-env) is empty", *pgEnv)
					}
					pool, err := pgxpool.New(ctx, dsn)
					if err != nil {
						return fmt.Errorf("outbox: PostgreSQL URL in %s: %v", *pgEnv, hidePGURL(err))
					}
					defer pool.Close()
					opts = append(opts, outbox.WithPostgres(pool, *table))
				}
				for _, h := range headers {
					name, value, _ := strings.Cut(h, ":")
					opts = append(opts, outbox.WithHeader(strings.TrimSpace(name), strings.TrimSpace(value)))
				}
				w, err := outbox.New(opts...)
				if err != nil {
					return err
				}
				defer w.Close()
				if *metricsAddr != "" {
					ln, err := net.Listen("tcp", *metricsAddr)
					if err != nil {
						return fmt.Errorf("outbox: metrics address: %w", err)
					}
					mux := http.NewServeMux()
					mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
					srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
					go func() { _ = srv.Serve(ln) }()
					defer srv.Close()
					fmt.Fprintf(stdout, "metrics at http://%s/metrics\n", ln.Addr())
				}
				err = w.Run(ctx)
				st := w.Stats()
				fmt.Fprintf(stdout, "delivered %d, failed attempts %d, dead-lettered %d\n", st.Delivered, st.FailedAttempts, st.DeadLettered)
				if errors.Is(err, context.Canceled) {
					return nil // interrupted: the checkpoint holds the position
				}
				return err
			}
		},
	}
}

// hidePGURL keeps a parse error of a PostgreSQL URL from echoing it: pgx
// quotes the string it could not parse, password included.
func hidePGURL(err error) error {
	if strings.Contains(err.Error(), "://") || strings.Contains(err.Error(), "password") {
		return errors.New("cannot parse the URL (not shown: it may hold a password)")
	}
	return err
}
