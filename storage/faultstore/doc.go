// Package faultstore injects storage faults for tests: a storage.Store
// wrapper (any backend) and a storage.FS wrapper (the local backend's file
// system calls) that fail the operations a rule selects, in the spirit of
// pebble's vfs/errorfs. It owns no data: every call it lets through goes to
// the store or file system it wraps, unchanged. Nothing in onceflow's
// production code imports it.
//
// # Rules
//
// A rule selects calls by operation kind (Op: put-if-absent, put, get, list,
// delete, and the file-system calls fs.create, fs.write, fs.sync, fs.link,
// fs.rename, fs.remove, fs.read, fs.walk, fs.syncdir), by a glob over the
// object name ("commits/*", "state/**"), and then by position (the Nth
// selected call, Times calls from there) or by probability. It says what
// happens (Fault):
//
//	enospc    the call fails with ENOSPC; nothing happens
//	eio       the call fails with EIO; nothing happens
//	torn      a write is cut short: on the file system the file gets the
//	          first part of the bytes and the write reports a short write
//	          (the local store then discards its temporary file); on a
//	          store write the inner store gets the first part as the whole
//	          object, which no real backend allows, to show what readers
//	          make of a damaged object
//	syncfail  the failed fsync-equivalent of a store change: the change is
//	          made, then the call fails with EIO (the caller cannot tell
//	          whether it took)
//	slow      the call waits Delay (or until its context ends), then runs
//
// Parse reads the same rules from a one-line spec for command-line flags:
//
//	seed=7; op=put-if-absent path=commits/* nth=3 fault=eio; op=fs.write path=state/** p=0.05 fault=torn
//
// # Determinism
//
// The same seed and the same calls give the same faults. A probabilistic
// choice is drawn from the seed, the rule, the operation, the name and how
// many times that operation had that name before, so it does not depend on
// how calls of different names interleave across goroutines. Nth and Times
// count selected calls in the order they arrive, which is the program's
// order when the calls a rule selects come from one goroutine (commits/*,
// offsets/*, a sink's log) and may vary when they do not (state/**).
//
// # Lifecycle
//
// New(Config) makes an Injector; Wrap(store, injector) and WrapFS(fs, root,
// injector) apply it, and OpenLocal does both for a local directory, so one
// rule set reaches both layers. SetEnabled(false) clears the fault (and
// stops counting); Events lists what was injected; Config.OnInject reports
// each fault as it happens. Every error the package makes up is an
// *InjectedError wrapping ErrInjected and the system error it stands for
// (syscall.ENOSPC, syscall.EIO, io.ErrShortWrite), naming the operation,
// the object and the rule.
//
// A wrapped store answers Unwrap, so storage.LocalDir still finds a wrapped
// local directory (and the engine still locks a wrapped local checkpoint).
//
// Injectors, stores and file systems here are safe for concurrent use.
package faultstore
