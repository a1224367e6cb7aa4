// Package cron parses schedules and tells when they fire next: standard
// five-field cron expressions (Parse, MustParse) and aligned intervals
// (Every). Both types have the method set the engine's Scheduled trigger
// takes, Next(after) and String:
//
//	engine.Scheduled(cron.MustParse("*/15 * * * *"))
//	engine.Scheduled(cron.Every(15 * time.Minute))
//
// The package is pure: no clock, no goroutines, no I/O beyond loading the
// time-zone database for a TZ= prefix. A Schedule and an Interval are
// immutable and safe for concurrent use. Next is strictly after its
// argument, so a tick time gives the following tick. Daylight-saving
// changes are handled as Parse documents: with a restricted hour field, a
// skipped time fires once at the gap's end and a repeated time fires once;
// with a "*" hour, every real matching instant fires.
package cron
