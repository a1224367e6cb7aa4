// Package chaos is the chaos harness: it runs the settlement pipeline as a
// real process (chaosprog) with all four sink protocols attached, kills it
// with SIGKILL at named fault points and random moments while payments keep
// arriving, restarts it, and at the end reconciles every sink with the input
// through package audit (and once through `onceflow audit`). The broker runs
// in its own `onceflow dev kafka` process so it outlives the kills.
//
//	go test -race ./tests/chaos/                          a short run (a few dozen kills)
//	go test ./tests/chaos/ -run TestChaos -chaos.kills=1000 -timeout 2h -v
//
// The PostgreSQL sink takes part when ONCEFLOW_TEST_PG_URL is set (see
// scripts/pg-setup.sh); without it the harness runs the other three sinks
// and says so. See docs/chaos.md.
package chaos
