// Command brokerprog runs the scale-out test's Kafka (franz-go's kfake,
// through internal/kafkadev) in a process of its own, so the workers reach
// it over loopback as they would a real cluster, and killing a worker
// never touches it. It prints "kafka ADDR" once listening and runs until
// SIGTERM or SIGINT.
//
//	brokerprog -topics payments:12,settlements:12
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/onceflow/onceflow/internal/kafkadev"
)

func main() {
	topics := flag.String("topics", "", "topics to create: name:partitions,…")
	flag.Parse()
	if err := run(*topics); err != nil {
		fmt.Fprintln(os.Stderr, "brokerprog:", err)
		os.Exit(1)
	}
}

func run(spec string) error {
	ts := map[string]int32{}
	for _, f := range strings.Split(spec, ",") {
		if f == "" {
			continue
		}
		name, n, ok := strings.Cut(f, ":")
		p, err := strconv.Atoi(n)
		if !ok || err != nil || p < 1 {
			return fmt.Errorf("-topics: %q is not name:partitions", f)
		}
		ts[name] = int32(p)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	c, err := kafkadev.Start(ctx, kafkadev.Options{Topics: ts})
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Println("kafka", strings.Join(c.Addrs(), ","))
	<-ctx.Done()
	return nil
}
