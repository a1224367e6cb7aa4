package faultstore

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
)

// Op is a set of operation kinds a rule selects: store calls (PutIfAbsent,
// Put, Get, List, Delete) and, for the local backend, the file-system calls
// storage.Local makes through storage.FS.
type Op uint32

// Store operations.
const (
	OpPutIfAbsent Op = 1 << iota
	OpPut
	OpGet
	OpList
	OpDelete

	// File-system operations (FS).
	OpFSCreate  // create a temporary file
	OpFSWrite   // write its bytes
	OpFSSync    // fsync it
	OpFSLink    // link it to its final name (put-if-absent)
	OpFSRename  // rename it over its final name (put)
	OpFSRemove  // remove a file
	OpFSRead    // read a whole file
	OpFSWalk    // list a directory tree
	OpFSSyncDir // fsync a directory
	opEnd
)

// Groups of operations.
const (
	// OpWrite is every store call that creates or replaces an object.
	OpWrite = OpPutIfAbsent | OpPut
	// OpRead is every store call that reads: Get and List.
	OpRead = OpGet | OpList
	// OpStore is every store call.
	OpStore = OpWrite | OpRead | OpDelete
	// OpFS is every file-system call.
	OpFS = OpFSCreate | OpFSWrite | OpFSSync | OpFSLink | OpFSRename | OpFSRemove | OpFSRead | OpFSWalk | OpFSSyncDir
	// OpAny is every operation.
	OpAny = OpStore | OpFS
)

var opNames = []struct {
	name string
	op   Op
}{
	{"put-if-absent", OpPutIfAbsent},
	{"put", OpPut},
	{"get", OpGet},
	{"list", OpList},
	{"delete", OpDelete},
	{"fs.create", OpFSCreate},
	{"fs.write", OpFSWrite},
	{"fs.sync", OpFSSync},
	{"fs.link", OpFSLink},
	{"fs.rename", OpFSRename},
	{"fs.remove", OpFSRemove},
	{"fs.read", OpFSRead},
	{"fs.walk", OpFSWalk},
	{"fs.syncdir", OpFSSyncDir},
	// groups last, so String prefers single names
	{"write", OpWrite},
	{"read", OpRead},
	{"store", OpStore},
	{"fs", OpFS},
	{"any", OpAny},
}

// String names the operation (a single one) or lists a set as a|b.
func (o Op) String() string {
	for _, n := range opNames {
		if n.op == o {
			return n.name
		}
	}
	var parts []string
	for b := Op(1); b < opEnd; b <<= 1 {
		if o&b != 0 {
			parts = append(parts, b.String())
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "|")
}

// ParseOp parses an operation name or group, or several joined by "|".
func ParseOp(s string) (Op, error) {
	var o Op
	for _, part := range strings.Split(s, "|") {
		found := false
		for _, n := range opNames {
			if n.name == part {
				o |= n.op
				found = true
				break
			}
		}
		if !found {
			return 0, fmt.Errorf("unknown operation %q (want %s)", part, opList())
		}
	}
	return o, nil
}

func opList() string {
	names := make([]string, len(opNames))
	for i, n := range opNames {
		names[i] = n.name
	}
	return strings.Join(names, ", ")
}

// Fault is what an injected fault does to the operation it hits.
type Fault uint8

const (
	// ENOSPC fails the call with an error wrapping syscall.ENOSPC; the
	// operation does not happen.
	ENOSPC Fault = iota + 1
	// EIO fails the call with an error wrapping syscall.EIO; the operation
	// does not happen.
	EIO
	// Torn cuts a write short. On the file system (OpFSWrite) the file
	// receives the first part of the bytes and the write reports
	// io.ErrShortWrite, as a full disk or a failing device does; the local
	// store then discards its temporary file. On a store write (OpPut,
	// OpPutIfAbsent) the inner store receives the first part of the bytes
	// as the whole object and the call reports io.ErrShortWrite: that
	// breaks the whole-object promise every real backend keeps, and shows
	// what a reader makes of a damaged object.
	Torn
	// SyncFail is the failed fsync-equivalent: the operation happens, and
	// then the call fails with an error wrapping syscall.EIO, so the
	// caller cannot tell whether the change took (a lost answer). On the
	// file system use EIO on OpFSSync or OpFSSyncDir instead: the real
	// call is the fsync.
	SyncFail
	// Slow delays the call by Rule.Delay (or until its context ends),
	// then performs it normally.
	Slow
)

var faultNames = map[Fault]string{ENOSPC: "enospc", EIO: "eio", Torn: "torn", SyncFail: "syncfail", Slow: "slow"}

func (f Fault) String() string {
	if n, ok := faultNames[f]; ok {
		return n
	}
	return "Fault(" + strconv.Itoa(int(f)) + ")"
}

// ParseFault parses a fault name: enospc, eio, torn, syncfail, slow.
func ParseFault(s string) (Fault, error) {
	for f, n := range faultNames {
		if n == s {
			return f, nil
		}
	}
	return 0, fmt.Errorf("unknown fault %q (want enospc, eio, torn, syncfail or slow)", s)
}

// Rule selects operations and says what to do to them. An operation is
// selected when its kind is in Ops and its object name matches Path; the
// selected calls are counted from 1 per rule. Call number m gets the fault
// when m >= Nth, fewer than Times faults came from this rule so far, and
// the seeded draw for the call falls below Prob.
type Rule struct {
	// Ops are the operation kinds selected. Zero means OpStore.
	Ops Op
	// Path is a glob over the object name, its elements matched as by
	// path.Match, with "**" matching any number of elements
	// ("state/**", "commits/*", "**/*.parquet"). Empty matches every
	// name. File-system calls match on the name relative to the store
	// root, temporary files under the name of the object they become.
	Path string
	// Nth is the first selected call that may get the fault (1-based).
	// Zero means 1.
	Nth int
	// Times is the most faults this rule injects. Zero means 1 when Prob
	// is 1 (the Nth call only) and no limit otherwise.
	Times int
	// Prob is the probability that a selected call from Nth on gets the
	// fault, drawn from the seed, the rule, the operation, the name and
	// how often that operation had that name before. Zero means 1.
	Prob float64
	// Fault is what happens.
	Fault Fault
	// Delay is how long Slow waits.
	Delay time.Duration
}

func (r Rule) ops() Op {
	if r.Ops == 0 {
		return OpStore
	}
	return r.Ops
}

func (r Rule) prob() float64 {
	if r.Prob == 0 {
		return 1
	}
	return r.Prob
}

func (r Rule) times() int {
	switch {
	case r.Times > 0:
		return r.Times
	case r.prob() < 1:
		return int(^uint(0) >> 1)
	}
	return 1
}

// validate reports every problem with r.
func (r Rule) validate() []string {
	var errs []string
	if r.Ops&^OpAny != 0 {
		errs = append(errs, fmt.Sprintf("unknown operation bits %#x", uint32(r.Ops&^OpAny)))
	}
	if _, ok := faultNames[r.Fault]; !ok {
		errs = append(errs, "no fault (want enospc, eio, torn, syncfail or slow)")
	}
	if r.Nth < 0 || r.Times < 0 {
		errs = append(errs, fmt.Sprintf("nth %d and times %d must not be negative", r.Nth, r.Times))
	}
	if r.Prob < 0 || r.Prob > 1 {
		errs = append(errs, fmt.Sprintf("probability %v is outside [0, 1]", r.Prob))
	}
	if r.Fault == Slow && r.Delay <= 0 {
		errs = append(errs, "slow needs a positive delay")
	}
	if r.Fault == Torn && r.ops()&^(OpWrite|OpFSWrite) != 0 {
		errs = append(errs, fmt.Sprintf("torn cuts writes only (put-if-absent, put, fs.write), not %s", r.ops()&^(OpWrite|OpFSWrite)))
	}
	if r.Fault == SyncFail && r.ops()&^(OpWrite|OpDelete) != 0 {
		errs = append(errs, fmt.Sprintf("syncfail applies to store changes only (put-if-absent, put, delete), not %s; on the file system use eio on fs.sync or fs.syncdir", r.ops()&^(OpWrite|OpDelete)))
	}
	if r.Path != "" {
		if _, err := path.Match(strings.ReplaceAll(r.Path, "**", "x"), ""); err != nil {
			errs = append(errs, fmt.Sprintf("path %q: %v", r.Path, err))
		}
	}
	return errs
}

// String renders r in the spec syntax Parse reads.
func (r Rule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "op=%s", r.ops())
	if r.Path != "" {
		fmt.Fprintf(&b, " path=%s", r.Path)
	}
	if r.Nth > 1 {
		fmt.Fprintf(&b, " nth=%d", r.Nth)
	}
	if r.Times > 0 {
		fmt.Fprintf(&b, " times=%d", r.Times)
	}
	if r.Prob > 0 && r.Prob < 1 {
		fmt.Fprintf(&b, " p=%s", strconv.FormatFloat(r.Prob, 'g', -1, 64))
	}
	fmt.Fprintf(&b, " fault=%s", r.Fault)
	if r.Delay > 0 {
		fmt.Fprintf(&b, " delay=%s", r.Delay)
	}
	return b.String()
}

// matchPath reports whether name matches the glob pattern (see Rule.Path).
func matchPath(pattern, name string) bool {
	if pattern == "" {
		return true
	}
	return matchElems(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

func matchElems(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if matchElems(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// draw returns a deterministic number in [0, 1) from the seed and the
// identity of one call.
func draw(seed uint64, rule int, op Op, name string, occurrence int) float64 {
	h := mix(seed ^ 0x9e3779b97f4a7c15)
	h = mix(h ^ uint64(rule))
	h = mix(h ^ uint64(op))
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * 0x100000001b3
	}
	h = mix(h ^ uint64(occurrence))
	return float64(h>>11) / (1 << 53)
}

// mix is splitmix64's finalizer.
func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
