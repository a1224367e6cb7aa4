package scaleout_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/internal/kafkadev"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/monitor"
	"github.com/onceflow/onceflow/scaleout"
	"github.com/onceflow/onceflow/source/kafka"
	"github.com/onceflow/onceflow/storage"
)

const parts = 4

// fixture is a group of in-process workers over one topic, with a memory
// sink per task shared by all workers (so a task's output survives its
// moves, as a real shared sink's does) and local checkpoints under one
// root.
type fixture struct {
	t     *testing.T
	c     *kafkadev.Cluster
	cl    *kgo.Client
	root  storage.Store
	dir   string
	sinks [parts]*memsink.Sink
	sent  int

	mu      sync.Mutex
	mon     *monitor.Listener // task 0's, with the status server of its worker
	running map[int32]string  // task → worker running its query now
	overlap []string
	events  []string
	workers map[string]func(*scaleout.Worker) // hands each build its worker
}

func newFixture(t *testing.T) *fixture {
	c := testenv.Kafka(t, map[string]int32{"pay": parts})
	dir := t.TempDir()
	root, err := storage.OpenLocal(dir, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, c: c, root: root, dir: dir, running: map[int32]string{}, workers: map[string]func(*scaleout.Worker){},
		cl: testenv.KafkaClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))}
	for i := range f.sinks {
		f.sinks[i] = memsink.New(fmt.Sprint("task-", i))
	}
	return f
}

// produce writes n records to every partition.
func (f *fixture) produce(n int) {
	var recs []*kgo.Record
	for p := range parts {
		for range n {
			recs = append(recs, &kgo.Record{Topic: "pay", Partition: int32(p), Value: []byte("v")})
		}
	}
	if err := f.cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		f.t.Fatal(err)
	}
	f.sent += n
}

// build is the query definition every worker runs: each task's records,
// as they are, into its memory sink.
func (f *fixture) build(worker string) scaleout.BuildFunc {
	var w *scaleout.Worker
	f.mu.Lock()
	f.workers[worker] = func(ws *scaleout.Worker) { w = ws }
	f.mu.Unlock()
	return func(ctx context.Context, t scaleout.Task) (scaleout.Query, func() error, error) {
		var extra []engine.Option
		if t.Partition == 0 {
			mon := monitor.New(monitor.WithStatusServer("127.0.0.1:0"), monitor.WithTasks(func() any { return w.Tasks() }))
			f.mu.Lock()
			f.mon = mon
			f.mu.Unlock()
			extra = append(extra, engine.WithListener(mon))
		}
		src, err := kafka.New(kafka.WithBrokers(f.c.Addrs()...), kafka.WithTopics("pay"), kafka.WithPartitions(t.Partition))
		if err != nil {
			return nil, nil, err
		}
		q, err := engine.NewQuery(engine.ReadStream(src), append([]engine.Option{
			engine.WithName(t.Name("pay")),
			engine.WithCheckpoint(t.Checkpoint(f.root)),
			engine.WithSink(f.sinks[t.Partition]),
			engine.WithTrigger(engine.Every(20 * time.Millisecond)),
		}, extra...)...)
		if err != nil {
			_ = src.Close()
			return nil, nil, err
		}
		return &tracked{Query: q, f: f, worker: worker, task: t.Partition}, src.Close, nil
	}
}

// tracked records which worker runs a task's query, and any overlap.
type tracked struct {
	*engine.Query
	f      *fixture
	worker string
	task   int32
}

func (q *tracked) Run(ctx context.Context) error {
	f := q.f
	f.mu.Lock()
	if other, ok := f.running[q.task]; ok {
		f.overlap = append(f.overlap, fmt.Sprintf("task %d run by %s while %s runs it", q.task, q.worker, other))
	}
	f.running[q.task] = q.worker
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		if f.running[q.task] == q.worker {
			delete(f.running, q.task)
		}
		f.mu.Unlock()
	}()
	return q.Query.Run(ctx)
}

// start runs a worker until the returned stop is called (which waits for
// Run to return).
func (f *fixture) start(name string, extra ...scaleout.Option) (*scaleout.Worker, func()) {
	opts := append([]scaleout.Option{
		scaleout.WithBrokers(f.c.Addrs()...), scaleout.WithGroup("pay-query"), scaleout.WithTopic("pay"),
		scaleout.WithSessionTimeout(6 * time.Second), scaleout.WithRetryBackoff(20*time.Millisecond, 200*time.Millisecond),
		scaleout.WithTaskListener(func(e scaleout.Event) {
			f.mu.Lock()
			f.events = append(f.events, fmt.Sprintf("%s %s %s %v", name, e.Kind, e.Task.ID(), e.Err))
			f.mu.Unlock()
		}),
	}, extra...)
	w, err := scaleout.NewWorker(f.build(name), opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	f.workers[name](w)
	f.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return w, func() {
		cancel()
		if err := <-done; err != nil {
			f.t.Errorf("%s: Run: %v", name, err)
		}
	}
}

// waitFor polls cond for up to 30 s.
func (f *fixture) waitFor(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.t.Fatalf("timed out waiting for %s; events:\n%v", what, f.events)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// caughtUp reports whether every task's sink holds every record sent.
func (f *fixture) caughtUp() bool {
	for _, s := range f.sinks {
		if len(s.All()) != f.sent {
			return false
		}
	}
	return true
}

func owned(ws ...*scaleout.Worker) []int {
	var n []int
	for _, w := range ws {
		n = append(n, len(w.Tasks()))
	}
	return n
}

// TestWorkersShareTasksAndMoveThemWithoutOverlap runs the worker life
// cycle in one process with real queries: one worker takes all four tasks;
// a task whose checkpoint is locked by a previous owner is retried until
// the lock goes; a second worker takes half the tasks; the first leaves
// and the second takes them all. Every task's output holds each record
// once, and no task was ever run by two workers at a time.
func TestWorkersShareTasksAndMoveThemWithoutOverlap(t *testing.T) {
	f := newFixture(t)
	f.produce(25)

	// The previous owner of task 3 still holds its checkpoint's lock.
	lockDir := filepath.Join(f.dir, "tasks", "3")
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(lockDir, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	a, stopA := f.start("a")
	f.waitFor("task 3 to fail on the held lock", func() bool {
		for _, s := range a.Tasks() {
			if s.Partition == 3 && s.State == "retrying" && s.Attempts >= 1 {
				return true
			}
		}
		return false
	})
	for _, s := range a.Tasks() {
		if s.Partition == 3 && !strings.Contains(s.LastError, "locked by another driver") {
			t.Errorf("task 3 retrying with error %q, want the engine's lock refusal", s.LastError)
		}
	}
	_ = lock.Close() // the previous owner goes away
	f.waitFor("worker a to own 4 tasks and catch up", func() bool { return len(a.Tasks()) == parts && f.caughtUp() })
	f.checkStatusTasks(parts)

	b, stopB := f.start("b")
	f.waitFor("2 tasks each", func() bool { n := owned(a, b); return n[0] == 2 && n[1] == 2 })
	f.produce(25)
	f.waitFor("both to catch up", f.caughtUp)

	stopA()
	f.waitFor("worker b to own 4 tasks", func() bool { return len(b.Tasks()) == parts })
	f.waitFor("task 0's status server on b", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.mon != nil && f.mon.StatusAddr() != ""
	})
	f.checkStatusTasks(parts)
	f.produce(25)
	f.waitFor("b to catch up", f.caughtUp)
	stopB()

	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.overlap) > 0 {
		t.Errorf("tasks run by two workers at once: %v", f.overlap)
	}
	for i, s := range f.sinks {
		seen := map[int64]bool{}
		for _, r := range s.All() {
			off := r[s.Schema().FieldIndices(kafka.ColOffset)[0]].(int64)
			if seen[off] {
				t.Errorf("task %d: offset %d delivered twice", i, off)
			}
			seen[off] = true
		}
		if len(seen) != f.sent {
			t.Errorf("task %d: %d distinct records, want %d", i, len(seen), f.sent)
		}
	}
}

func TestNewWorkerRefusesBadOptions(t *testing.T) {
	build := func(context.Context, scaleout.Task) (scaleout.Query, func() error, error) { return nil, nil, nil }
	for name, opts := range map[string][]scaleout.Option{
		"no brokers":            {scaleout.WithGroup("g"), scaleout.WithTopic("t")},
		"no group":              {scaleout.WithBrokers("127.0.0.1:1"), scaleout.WithTopic("t")},
		"stop beyond rebalance": {scaleout.WithBrokers("127.0.0.1:1"), scaleout.WithGroup("g"), scaleout.WithTopic("t"), scaleout.WithStopTimeout(time.Minute), scaleout.WithRebalanceTimeout(time.Second)},
		"backoff max below min": {scaleout.WithBrokers("127.0.0.1:1"), scaleout.WithGroup("g"), scaleout.WithTopic("t"), scaleout.WithRetryBackoff(time.Second, time.Millisecond)},
	} {
		if _, err := scaleout.NewWorker(build, opts...); !errors.Is(err, scaleout.ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", name, err)
		}
	}
	if _, err := scaleout.NewWorker(nil, scaleout.WithBrokers("x:1"), scaleout.WithGroup("g"), scaleout.WithTopic("t")); !errors.Is(err, scaleout.ErrConfig) {
		t.Errorf("nil build: err = %v, want ErrConfig", err)
	}
}

// checkStatusTasks reads /status of task 0's query and checks that it
// lists the n tasks its worker owns, running.
func (f *fixture) checkStatusTasks(n int) {
	f.t.Helper()
	f.mu.Lock()
	addr := f.mon.StatusAddr()
	f.mu.Unlock()
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Name  string                `json:"name"`
		Tasks []scaleout.TaskStatus `json:"tasks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		f.t.Fatal(err)
	}
	if st.Name != "pay-t0" || len(st.Tasks) != n {
		f.t.Fatalf("/status of task 0: name %q, tasks %+v; want pay-t0 and %d tasks", st.Name, st.Tasks, n)
	}
	for _, ts := range st.Tasks {
		if ts.State != "running" {
			f.t.Errorf("/status lists task %s %s, want running", ts.ID, ts.State)
		}
	}
}
