package scaleout

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Worker is one member of a scaled-out query's group. Build it with
// NewWorker and Run it once.
type Worker struct {
	cfg   config
	build BuildFunc
	ran   atomic.Bool

	// tasksCtx is the context of every task's Run; cancelled only when a
	// stop times out or Run returns.
	tasksCtx    context.Context
	cancelTasks context.CancelFunc

	mu struct {
		sync.Mutex
		tasks   map[int32]*task
		closing bool
	}
	emitMu sync.Mutex
}

// task is one task this worker owns.
type task struct {
	t      Task
	done   chan struct{} // closed when the task's goroutine returns
	stopCh chan struct{} // closed by stop
	cancel context.CancelFunc

	mu struct {
		sync.Mutex
		q        Query
		stopping bool
		state    string
		attempts int
		lastErr  string
	}
}

// NewWorker checks the options and returns a worker that runs build's
// queries. It does not contact the brokers; Run does.
func NewWorker(build BuildFunc, opts ...Option) (*Worker, error) {
	cfg := defaults()
	for _, o := range opts {
		o(&cfg)
	}
	if build == nil {
		return nil, fmt.Errorf("%w: no BuildFunc", ErrConfig)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, build: build}
	w.mu.tasks = map[int32]*task{}
	return w, nil
}

// Run joins the group and runs the tasks it assigns until ctx ends. Then
// it stops every task (each finishes its batch in flight, up to
// WithStopTimeout), leaves the group and returns nil. It returns an error
// only when it cannot join (a bad client configuration) or was already run.
func (w *Worker) Run(ctx context.Context) error {
	if !w.ran.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: a Worker runs once", ErrConfig)
	}
	// Tasks outlive ctx: a graceful stop needs them running until Stop
	// has finished their batch.
	w.tasksCtx, w.cancelTasks = context.WithCancel(context.WithoutCancel(ctx))
	defer w.cancelTasks()
	opts := []kgo.Opt{
		kgo.SeedBrokers(w.cfg.brokers...),
		kgo.ConsumerGroup(w.cfg.group),
		kgo.ConsumeTopics(w.cfg.topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.BlockRebalanceOnPoll(),
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(w.cfg.sessionTimeout),
		kgo.RebalanceTimeout(w.cfg.rebalanceTimeout),
		kgo.HeartbeatInterval(w.cfg.heartbeat),
		kgo.OnPartitionsAssigned(w.assigned),
		kgo.OnPartitionsRevoked(w.revoked),
		kgo.OnPartitionsLost(w.revoked),
	}
	cl, err := kgo.NewClient(append(opts, w.cfg.extra...)...)
	if err != nil {
		return fmt.Errorf("scaleout: group %q: client: %w", w.cfg.group, err)
	}
	// The group only assigns: nothing is fetched, nothing committed.
	cl.PauseFetchTopics(w.cfg.topic)
	w.cfg.logger.Info("scaleout: joining", "group", w.cfg.group, "topic", w.cfg.topic)
	<-ctx.Done()

	// Stop the tasks before leaving, so that no other member gets a task
	// while it still runs here.
	w.mu.Lock()
	w.mu.closing = true
	w.mu.Unlock()
	w.stopAll()
	cl.Close() // leaves the group; its revoke callback finds no task left
	w.cfg.logger.Info("scaleout: left", "group", w.cfg.group)
	return nil
}

// Tasks lists the tasks this worker owns, by partition.
func (w *Worker) Tasks() []TaskStatus {
	w.mu.Lock()
	tks := make([]*task, 0, len(w.mu.tasks))
	for _, tk := range w.mu.tasks {
		tks = append(tks, tk)
	}
	w.mu.Unlock()
	out := make([]TaskStatus, 0, len(tks))
	for _, tk := range tks {
		tk.mu.Lock()
		out = append(out, TaskStatus{ID: tk.t.ID(), Partition: tk.t.Partition, State: tk.mu.state,
			Attempts: tk.mu.attempts, LastError: tk.mu.lastErr})
		tk.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out
}

func (w *Worker) emit(e Event) {
	if w.cfg.listener == nil {
		return
	}
	w.emitMu.Lock()
	defer w.emitMu.Unlock()
	w.cfg.listener(e)
}

// assigned starts the newly assigned tasks.
func (w *Worker) assigned(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	type started struct {
		tk  *task
		ctx context.Context
	}
	var news []started
	w.mu.Lock()
	for _, p := range m[w.cfg.topic] {
		if _, ok := w.mu.tasks[p]; ok || w.mu.closing {
			continue
		}
		tk := &task{t: Task{Partition: p}, done: make(chan struct{}), stopCh: make(chan struct{})}
		tk.mu.state = "starting"
		var ctx context.Context
		ctx, tk.cancel = context.WithCancel(w.tasksCtx)
		w.mu.tasks[p] = tk
		news = append(news, started{tk, ctx})
	}
	w.mu.Unlock()
	for _, n := range news {
		w.emit(Event{Kind: EventAssigned, Task: n.tk.t})
		w.cfg.logger.Info("scaleout: task assigned", "task", n.tk.t.ID())
		go w.runTask(n.ctx, n.tk)
	}
}

// revoked stops the revoked (or lost) tasks and waits for them.
func (w *Worker) revoked(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	w.mu.Lock()
	var tks []*task
	for _, p := range m[w.cfg.topic] {
		if tk, ok := w.mu.tasks[p]; ok {
			tks = append(tks, tk)
			delete(w.mu.tasks, p)
		}
	}
	w.mu.Unlock()
	w.stopTasks(tks)
}

// stopAll stops every task.
func (w *Worker) stopAll() {
	w.mu.Lock()
	tks := make([]*task, 0, len(w.mu.tasks))
	for p, tk := range w.mu.tasks {
		tks = append(tks, tk)
		delete(w.mu.tasks, p)
	}
	w.mu.Unlock()
	w.stopTasks(tks)
}

// stopTasks stops tks in parallel and waits for each, cancelling one that
// takes longer than the stop timeout.
func (w *Worker) stopTasks(tks []*task) {
	var wg sync.WaitGroup
	for _, tk := range tks {
		wg.Go(func() {
			w.emit(Event{Kind: EventRevoked, Task: tk.t})
			tk.stop()
			var err error
			select {
			case <-tk.done:
			case <-time.After(w.cfg.stopTimeout):
				err = fmt.Errorf("scaleout: task %s did not stop within %s; its batch in flight is abandoned (the next owner re-runs it)", tk.t.ID(), w.cfg.stopTimeout)
				tk.cancel()
				<-tk.done
			}
			tk.cancel()
			w.cfg.logger.Info("scaleout: task stopped", "task", tk.t.ID(), "err", err)
			w.emit(Event{Kind: EventStopped, Task: tk.t, Err: err})
		})
	}
	wg.Wait()
}

// stop asks the task to stop: its query's Stop, and no more retries.
func (tk *task) stop() {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	if tk.mu.stopping {
		return
	}
	tk.mu.stopping = true
	tk.mu.state = "stopping"
	close(tk.stopCh)
	if tk.mu.q != nil {
		tk.mu.q.Stop()
	}
}

// setQuery records the running query, stopping it at once when the task
// is being stopped. It reports whether the task may run.
func (tk *task) setQuery(q Query) bool {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	tk.mu.q = q
	if q == nil {
		return false
	}
	tk.mu.attempts++
	if tk.mu.stopping {
		q.Stop() // a Run after Stop returns at once
		return false
	}
	tk.mu.state = "running"
	return true
}

func (tk *task) setState(state string, err error) {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	if !tk.mu.stopping {
		tk.mu.state = state
	}
	if err != nil {
		tk.mu.lastErr = err.Error()
	}
}

func (tk *task) stopping() bool {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	return tk.mu.stopping
}

// runTask builds and runs the task's query until it is stopped, retrying
// a failed Run after a backoff.
func (w *Worker) runTask(ctx context.Context, tk *task) {
	defer close(tk.done)
	backoff := w.cfg.retryMin
	for !tk.stopping() && ctx.Err() == nil {
		err := w.runOnce(ctx, tk)
		if tk.stopping() || ctx.Err() != nil {
			return
		}
		if err == nil {
			tk.setState("finished", nil)
			w.cfg.logger.Info("scaleout: task finished", "task", tk.t.ID())
			w.emit(Event{Kind: EventFinished, Task: tk.t})
			return
		}
		tk.setState("retrying", err)
		w.cfg.logger.Warn("scaleout: task failed; retrying", "task", tk.t.ID(), "backoff", backoff, "err", err)
		w.emit(Event{Kind: EventFailed, Task: tk.t, Err: err, Backoff: backoff.String()})
		select {
		case <-time.After(backoff):
		case <-tk.stopCh:
		case <-ctx.Done():
		}
		backoff = min(2*backoff, w.cfg.retryMax)
	}
}

// runOnce builds the task's query, runs it, and releases it.
func (w *Worker) runOnce(ctx context.Context, tk *task) (err error) {
	q, release, err := w.build(ctx, tk.t)
	if err != nil {
		return fmt.Errorf("scaleout: task %s: build: %w", tk.t.ID(), err)
	}
	if release != nil {
		defer func() {
			if rerr := release(); rerr != nil {
				err = errors.Join(err, fmt.Errorf("scaleout: task %s: release: %w", tk.t.ID(), rerr))
			}
		}()
	}
	if q == nil {
		return fmt.Errorf("scaleout: task %s: BuildFunc returned no query", tk.t.ID())
	}
	if !tk.setQuery(q) {
		tk.setQuery(nil)
		return nil
	}
	w.emit(Event{Kind: EventStarted, Task: tk.t})
	err = q.Run(ctx)
	tk.setQuery(nil)
	if err != nil {
		return fmt.Errorf("scaleout: task %s: %w", tk.t.ID(), err)
	}
	return nil
}
