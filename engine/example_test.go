package engine_test

import (
	"fmt"
	"time"

	"github.com/onceflow/onceflow/cron"
	"github.com/onceflow/onceflow/engine"
)

// The README's schedule spelling, compiled.
func ExampleScheduled() {
	fmt.Println(engine.Scheduled(cron.MustParse("*/15 * * * *")))
	fmt.Println(engine.Scheduled(cron.Every(15 * time.Minute)))
	// Output:
	// scheduled cron */15 * * * *
	// scheduled every 15m0s
}
