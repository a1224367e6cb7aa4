package monitor_test

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/monitor"
)

// The README's "Operating it" lines, compiled: metrics on the caller's
// registry and the status server, as a listener of the query.
func ExampleNew() {
	reg := prometheus.NewRegistry()
	m := monitor.New(monitor.WithMetrics(reg), monitor.WithStatusServer("127.0.0.1:8080"))
	_ = []engine.Option{engine.WithListener(m)} // with the query's other options, to engine.NewQuery
	// While Run runs, m.StatusAddr() is the server's address.
}
