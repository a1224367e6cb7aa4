package monitor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/storage"
)

// CheckpointHandler serves the status page of the query whose checkpoint
// is store, read-only, from its progress/ records (the last WithHistory
// batches the retention has left): / (the page), /api/page,
// /api/progress/{id} and /status (the Status document, as far as a
// checkpoint tells it). It never writes the checkpoint and never takes its
// lock: whether a driver runs is read from the kernel's table of file
// locks (/proc/locks) for a local checkpoint, and is "unknown" on object
// storage or where that table is missing. Options other than WithHistory
// have no effect. The handler is safe for concurrent use; it reads the
// checkpoint on each request, caching the progress records it has read.
//
// This is what `onceflow checkpoint serve DIR` serves.
func CheckpointHandler(store storage.Store, opts ...Option) http.Handler {
	l := New(opts...)
	c := &checkpointPage{rd: checkpoint.NewReader(store), store: store, n: l.historySize(), now: time.Now}
	c.mu.cache = map[int64]*engine.Progress{}
	mux := http.NewServeMux()
	addPageRoutes(mux, c)
	mux.Handle("GET /status", secure(func(w http.ResponseWriter, r *http.Request) {
		doc, err := c.page(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, doc.Status)
	}))
	return mux
}

// checkpointPage is a pageSource reading a checkpoint.
type checkpointPage struct {
	rd    *checkpoint.Reader
	store storage.Store
	n     int
	now   func() time.Time // test knob; time.Now
	mu    struct {
		sync.Mutex
		cache map[int64]*engine.Progress // progress records read, by batch id
	}
}

func (c *checkpointPage) where() string { return storage.Redact(c.store.URL()) }

func (c *checkpointPage) page(ctx context.Context) (pageDoc, error) {
	meta, err := c.rd.Metadata(ctx)
	if err != nil {
		return pageDoc{}, fmt.Errorf("monitor: checkpoint %s: %w", c.where(), err)
	}
	ids, err := c.rd.ProgressIDs(ctx)
	if err != nil {
		return pageDoc{}, fmt.Errorf("monitor: checkpoint %s: list progress: %w", c.where(), err)
	}
	if len(ids) > c.n {
		ids = ids[len(ids)-c.n:]
	}
	h := history{n: c.n}
	keep := make(map[int64]*engine.Progress, len(ids))
	for _, id := range ids {
		p, err := c.read(ctx, id)
		if errors.Is(err, offsetlog.ErrNotFound) {
			continue // purged by the retention since the listing
		}
		if errors.Is(err, offsetlog.ErrCorrupt) {
			continue // written without fsync and torn by a machine crash
		}
		if err != nil {
			return pageDoc{}, err
		}
		keep[id] = p
		h.add(p)
	}
	c.mu.Lock()
	c.mu.cache = keep // forget what fell out of the window
	c.mu.Unlock()

	now := c.now()
	state, note := driverState(c.store)
	st := Status{ID: meta.ID, Name: meta.Name, State: state, Started: "", Healthy: state == "running"}
	if !st.Healthy {
		st.HealthReason = "read from a checkpoint: the driver is " + state
	}
	doc := pageDoc{From: "checkpoint", History: c.n, Batches: h.points(), Note: note}
	if k := len(h.recs); k > 0 {
		last := h.recs[k-1]
		st.RunID = last.RunID
		st.LastProgress = last
		if ts, err := time.Parse(time.RFC3339Nano, last.Timestamp); err == nil {
			at := ts.Add(time.Duration(last.BatchDurationMs) * time.Millisecond)
			st.LastCommit = at.UTC().Format(time.RFC3339Nano)
			st.SecondsSinceLastCommit = now.Sub(at).Seconds()
		}
	}
	doc.Status = st
	doc.Plan = c.plan(ctx, meta.Name, st.LastProgress)
	return doc, nil
}

// plan is what the checkpoint tells of the query: sources, operators and
// state partitions from the newest write-ahead entry's configuration,
// sinks from the newest progress record. The steps, watermark and output
// mode are not recorded.
func (c *checkpointPage) plan(ctx context.Context, name string, last *engine.Progress) *engine.Plan {
	p := &engine.Plan{Name: name}
	if _, e, ok, err := c.rd.LatestOffsets(ctx); err == nil && ok {
		p.Sources = e.Conf.Sources
		p.Partitions = e.Conf.StatePartitions
		for _, op := range e.Conf.Operators {
			p.Operators = append(p.Operators, engine.OperatorPlan{ID: op.ID, Kind: op.Kind, Keys: op.Keys, Stores: op.Stores, Params: op.Params})
		}
	}
	if last != nil {
		for _, s := range last.Sinks {
			p.Sinks = append(p.Sinks, engine.SinkPlan{Description: s.Description, Guarantee: s.Guarantee})
		}
		if len(p.Sources) == 0 {
			for _, s := range last.Sources {
				p.Sources = append(p.Sources, s.Description)
			}
		}
	}
	return p
}

// read returns batch id's progress record, from the cache when it was
// read before (a committed batch's record does not change).
func (c *checkpointPage) read(ctx context.Context, id int64) (*engine.Progress, error) {
	c.mu.Lock()
	p, ok := c.mu.cache[id]
	c.mu.Unlock()
	if ok {
		return p, nil
	}
	p = new(engine.Progress)
	if err := c.rd.Progress(ctx, id, p); err != nil {
		if errors.Is(err, offsetlog.ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("monitor: checkpoint %s: %w", c.where(), err)
	}
	c.mu.Lock()
	c.mu.cache[id] = p
	c.mu.Unlock()
	return p, nil
}

func (c *checkpointPage) progress(ctx context.Context, id int64) (*engine.Progress, error) {
	p, err := c.read(ctx, id)
	if errors.Is(err, offsetlog.ErrNotFound) {
		return nil, nil
	}
	return p, err
}

// driverState says whether a driver runs on the checkpoint: "running",
// "stopped" or "unknown" (with a note saying why), without taking the
// lock. The engine holds an flock on <checkpoint>/.lock while Run runs
// (engine/lock.go); the kernel lists it in /proc/locks by device and
// inode. Trying the lock instead would, for a moment, hold it and make a
// driver starting then fail.
func driverState(store storage.Store) (state, note string) {
	dir, ok := storage.LocalDir(store)
	if !ok {
		return "unknown", "the checkpoint is on object storage, where drivers take no lock: whether one runs cannot be told from it"
	}
	fi, err := os.Stat(filepath.Join(dir, ".lock"))
	if errors.Is(err, os.ErrNotExist) {
		return "stopped", ""
	}
	if err != nil {
		return "unknown", fmt.Sprintf("stat the lock file: %v", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "unknown", "this system does not report file inodes"
	}
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return "unknown", "no /proc/locks on this system to tell whether a driver holds the lock"
	}
	if flockHeld(locks, uint64(st.Dev), uint64(st.Ino)) {
		return "running", ""
	}
	return "stopped", ""
}

// flockHeld reports whether /proc/locks (its bytes) lists a granted FLOCK
// on the file of device dev and inode ino. A line reads
//
//	1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF
//
// and a waiter's line has "->" after the number. The device must match
// too, unless stat reports an anonymous device (major 0: overlay file
// systems, where the kernel prints the underlying one); then the inode
// alone decides.
func flockHeld(locks []byte, dev, ino uint64) bool {
	major := (dev>>8)&0xfff | (dev>>32)&^uint64(0xfff)
	minor := dev&0xff | (dev>>12)&^uint64(0xff)
	sc := bufio.NewScanner(bytes.NewReader(locks))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] == "->" || f[1] != "FLOCK" {
			continue
		}
		parts := strings.Split(f[5], ":")
		if len(parts) != 3 {
			continue
		}
		i, err := strconv.ParseUint(parts[2], 10, 64)
		if err != nil || i != ino {
			continue
		}
		ma, err1 := strconv.ParseUint(parts[0], 16, 64)
		mi, err2 := strconv.ParseUint(parts[1], 16, 64)
		if err1 != nil || err2 != nil || (ma == major && mi == minor) {
			return true
		}
		// Another device: an overlay's stat reports an anonymous device
		// (major 0) while the kernel prints the upper file system's.
		if major == 0 {
			return true
		}
	}
	return false
}
