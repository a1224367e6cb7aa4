// Command nomonitor is a query program that does not import monitor.
// TestProgramWithoutMonitorLinksNoMetricsOrHTTPServer builds it and reads
// its symbols; it is never run.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/source/rate"
	"github.com/onceflow/onceflow/storage"
)

func main() {
	if err := run(context.Background(), os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir string) error {
	cp, err := storage.OpenLocal(dir, storage.LocalOptions{})
	if err != nil {
		return err
	}
	src, err := rate.New()
	if err != nil {
		return err
	}
	q, err := engine.NewQuery(engine.ReadStream(src), engine.WithCheckpoint(cp), engine.WithSink(memsink.New("out")),
		engine.WithTrigger(engine.Once()), engine.WithProgressListener(func(p engine.Progress) { fmt.Println(p.BatchID) }))
	if err != nil {
		return err
	}
	return q.Run(ctx)
}
