//go:build !linux

package storage

// markTopDir is a placement hint for Linux's ext2/3/4 (see
// placement_linux.go); elsewhere it does nothing.
func markTopDir(string) {}
