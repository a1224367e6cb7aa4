package filesink_test

import (
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/filesink"
)

// The sink meets the engine's contracts structurally; only this test
// imports the engine.
var (
	_ engine.Sink            = (*filesink.Sink)(nil)
	_ engine.SinkStarter     = (*filesink.Sink)(nil)
	_ engine.SchemaValidator = (*filesink.Sink)(nil)
	_ engine.Describer       = (*filesink.Sink)(nil)
)
