package sql

import (
	"os"
	"testing"
)

// BenchmarkCompileSettlements compiles the settlements twin: parse,
// compile, and the engine's check of the plan.
func BenchmarkCompileSettlements(b *testing.B) {
	text, err := os.ReadFile("../examples/sql/settlements.sql")
	if err != nil {
		b.Fatal(err)
	}
	env := WithEnv(func(string) (string, bool) { return "127.0.0.1:9092", true })
	for b.Loop() {
		if _, err := Compile(string(text), env); err != nil {
			b.Fatal(err)
		}
	}
}
