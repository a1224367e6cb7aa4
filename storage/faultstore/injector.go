package faultstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Config is what an Injector injects.
type Config struct {
	// Seed makes the probabilistic choices and the length of torn
	// writes; the same seed and the same calls give the same faults.
	Seed uint64
	// Rules are tried in order; the first that fires decides the call.
	Rules []Rule
	// OnInject, when set, is called with every fault before it takes
	// effect (on the calling goroutine; it must not call the store).
	OnInject func(Event)
}

// Event is one injected fault.
type Event struct {
	Seq   int    // 1 for the first fault of the injector, then 2, ...
	Rule  int    // index into Config.Rules
	Op    Op     // the single operation hit
	Name  string // the object name (file-system calls: relative to the root)
	Fault Fault
}

func (e Event) String() string {
	return fmt.Sprintf("faultstore: injected %s into %s %s (rule %d)", e.Fault, e.Op, e.Name, e.Rule+1)
}

// Injector decides, call by call, which operations get a fault. One
// injector may serve a Store and an FS at once, so one rule set covers
// both layers of a local store. Safe for concurrent use.
type Injector struct {
	seed     uint64
	rules    []Rule
	onInject func(Event)

	mu struct {
		sync.Mutex
		off      bool
		selected []int          // per rule: selected calls so far
		fired    []int          // per rule: faults injected
		seen     map[string]int // rule/op/name → calls so far
		events   []Event
	}
}

// New returns an injector for cfg, or an error listing every bad rule.
func New(cfg Config) (*Injector, error) {
	var errs []error
	for i, r := range cfg.Rules {
		for _, e := range r.validate() {
			errs = append(errs, fmt.Errorf("faultstore: rule %d (%s): %s", i+1, r, e))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	in := &Injector{seed: cfg.Seed, rules: append([]Rule(nil), cfg.Rules...), onInject: cfg.OnInject}
	in.mu.selected = make([]int, len(cfg.Rules))
	in.mu.fired = make([]int, len(cfg.Rules))
	in.mu.seen = map[string]int{}
	return in, nil
}

// SetEnabled turns injection off (the fault clears) or back on. Calls are
// not counted while it is off.
func (in *Injector) SetEnabled(on bool) {
	in.mu.Lock()
	in.mu.off = !on
	in.mu.Unlock()
}

// Events returns the faults injected so far, in order.
func (in *Injector) Events() []Event {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]Event(nil), in.mu.events...)
}

// Injected returns how many faults were injected so far.
func (in *Injector) Injected() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.mu.events)
}

// decision is what happens to one call.
type decision struct {
	ev    Event
	delay time.Duration
	keep  int // Torn: bytes that get through
}

// decide returns the fault for a call of op on name, if any. size is the
// byte count of a write (for Torn).
func (in *Injector) decide(op Op, name string, size int) (decision, bool) {
	if in == nil {
		return decision{}, false
	}
	in.mu.Lock()
	if in.mu.off {
		in.mu.Unlock()
		return decision{}, false
	}
	for i, r := range in.rules {
		if r.ops()&op == 0 || !matchPath(r.Path, name) {
			continue
		}
		if r.Fault == Torn && size < 1 {
			continue // nothing to cut
		}
		in.mu.selected[i]++
		key := strconv.Itoa(i) + "/" + op.String() + "/" + name
		occ := in.mu.seen[key]
		in.mu.seen[key] = occ + 1
		if in.mu.selected[i] < max(r.Nth, 1) || in.mu.fired[i] >= r.times() {
			continue
		}
		if p := r.prob(); p < 1 && draw(in.seed, i, op, name, occ) >= p {
			continue
		}
		in.mu.fired[i]++
		ev := Event{Seq: len(in.mu.events) + 1, Rule: i, Op: op, Name: name, Fault: r.Fault}
		in.mu.events = append(in.mu.events, ev)
		d := decision{ev: ev, delay: r.Delay}
		if r.Fault == Torn {
			d.keep = int(draw(in.seed^0x5bd1e995, i, op, name, occ) * float64(size)) // in [0, size)
		}
		in.mu.Unlock()
		if in.onInject != nil {
			in.onInject(ev)
		}
		return d, true
	}
	in.mu.Unlock()
	return decision{}, false
}

// InjectedError is the error of a call that got a fault. It wraps
// ErrInjected and the system error the fault stands for (syscall.ENOSPC,
// syscall.EIO, io.ErrShortWrite), so errors.Is finds either.
type InjectedError struct {
	Event Event
	Err   error
}

func (e *InjectedError) Error() string {
	return fmt.Sprintf("%s: %s: %v", e.Event, what(e.Event.Fault), e.Err)
}

// Unwrap returns ErrInjected and the system error.
func (e *InjectedError) Unwrap() []error { return []error{ErrInjected, e.Err} }

func what(f Fault) string {
	switch f {
	case Torn:
		return "write cut short"
	case SyncFail:
		return "the change was made, then its durability could not be confirmed"
	}
	return "call failed"
}

func (d decision) err() error {
	var e error
	switch d.ev.Fault {
	case ENOSPC:
		e = syscall.ENOSPC
	case EIO, SyncFail:
		e = syscall.EIO
	case Torn:
		e = io.ErrShortWrite
	default:
		return nil
	}
	return &InjectedError{Event: d.ev, Err: e}
}

// wait sleeps for a Slow fault, or until ctx ends.
func (d decision) wait(ctx context.Context) error {
	if d.ev.Fault != Slow {
		return nil
	}
	t := time.NewTimer(d.delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Parse reads a fault spec: clauses separated by ";", each either
// "seed=N" or a rule of space-separated key=value fields:
//
//	op=OPS       operations, joined by | (put-if-absent, put, get, list,
//	             delete, fs.create, fs.write, fs.sync, fs.link, fs.rename,
//	             fs.remove, fs.read, fs.walk, fs.syncdir; groups write,
//	             read, store, fs, any); default store
//	path=GLOB    object names (see Rule.Path); default all
//	nth=N        first selected call that may get the fault; default 1
//	times=N      most faults from this rule; default 1, or no limit with p
//	p=P          probability per selected call; default 1
//	fault=F      enospc, eio, torn, syncfail or slow (required)
//	delay=D      how long slow waits (a Go duration)
//
// For example "seed=7; op=put-if-absent path=commits/* nth=3 fault=eio".
// An empty spec has no rules.
func Parse(spec string) (Config, error) {
	var cfg Config
	var errs []error
	for ci, clause := range strings.Split(spec, ";") {
		clause = strings.TrimSpace(clause)
		if clause == "" {
			continue
		}
		bad := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("faultstore: spec clause %d %q: %s", ci+1, clause, fmt.Sprintf(format, a...)))
		}
		if v, ok := strings.CutPrefix(clause, "seed="); ok && !strings.ContainsAny(v, " \t") {
			s, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				bad("seed %q is not an unsigned integer", v)
			}
			cfg.Seed = s
			continue
		}
		var r Rule
		for _, field := range strings.Fields(clause) {
			k, v, ok := strings.Cut(field, "=")
			if !ok {
				bad("field %q is not key=value", field)
				continue
			}
			var err error
			switch k {
			case "op":
				r.Ops, err = ParseOp(v)
			case "path":
				r.Path = v
			case "nth":
				r.Nth, err = positive(v)
			case "times":
				r.Times, err = positive(v)
			case "p":
				r.Prob, err = strconv.ParseFloat(v, 64)
				if err == nil && (r.Prob <= 0 || r.Prob > 1) {
					err = fmt.Errorf("%s is outside (0, 1]", v)
				}
			case "fault":
				r.Fault, err = ParseFault(v)
			case "delay":
				r.Delay, err = time.ParseDuration(v)
			default:
				err = fmt.Errorf("unknown key (want op, path, nth, times, p, fault, delay)")
			}
			if err != nil {
				bad("field %q: %v", field, err)
			}
		}
		if r.Fault == 0 {
			bad("no fault= field")
			continue
		}
		if r.Ops == 0 {
			r.Ops = OpStore
		}
		cfg.Rules = append(cfg.Rules, r)
	}
	return cfg, errors.Join(errs...)
}

func positive(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%q is not a positive integer", s)
	}
	return n, nil
}
