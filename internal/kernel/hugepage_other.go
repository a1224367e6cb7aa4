//go:build !linux

package kernel

import "unsafe"

// adviseHuge does nothing outside Linux (see hugepage_linux.go).
func adviseHuge(p unsafe.Pointer, size int) {}
