// Package tests holds the end-to-end tests that run real query processes
// and kill them: the crash tests of the batch protocol. The programs they
// run live in the subdirectories.
package tests
