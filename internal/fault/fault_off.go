//go:build !onceflow_faults

package fault

// Enabled reports whether this binary was built with Tag, so its fault
// points can kill it. It is not: the points below are no-ops.
const Enabled = false

// Point marks the named step (a constant of points.go). Built without Tag
// it does nothing and the compiler removes the call.
func Point(string) {}
