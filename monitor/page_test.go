package monitor

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/storage"
)

func getResp(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// pageSeen is what a test fetched from the page's endpoints while the
// query ran.
type pageSeen struct {
	index, js, uplot *http.Response
	indexBody        string
	doc              pageDoc
	status           Status
	progress         engine.Progress
	missing          int
	badID            int
}

func fetchPage(t *testing.T, base string, lastID int64) pageSeen {
	t.Helper()
	var s pageSeen
	s.index, s.indexBody = getResp(t, base+"/")
	s.js, _ = getResp(t, base+"/assets/app.js")
	s.uplot, _ = getResp(t, base+"/assets/vendor/uplot/uPlot.iife.min.js")
	_, body := getResp(t, base+"/api/page")
	if err := json.Unmarshal([]byte(body), &s.doc); err != nil {
		t.Fatalf("/api/page: %v\n%s", err, body)
	}
	_, body = getResp(t, base+"/status")
	if err := json.Unmarshal([]byte(body), &s.status); err != nil {
		t.Fatalf("/status: %v\n%s", err, body)
	}
	_, body = getResp(t, base+"/api/progress/"+strconv.FormatInt(lastID, 10))
	if err := json.Unmarshal([]byte(body), &s.progress); err != nil {
		t.Fatalf("/api/progress: %v\n%s", err, body)
	}
	resp, _ := getResp(t, base+"/api/progress/999999")
	s.missing = resp.StatusCode
	resp, _ = getResp(t, base+"/api/progress/x")
	s.badID = resp.StatusCode
	return s
}

// checkPageServed checks what every page server owes: the page and its
// assets under the Content-Security-Policy, the history, a progress record
// by id, and clear answers for a batch it does not have.
func checkPageServed(t *testing.T, s pageSeen, wantBatches int, lastID int64) {
	t.Helper()
	for name, r := range map[string]*http.Response{"/": s.index, "app.js": s.js, "uPlot": s.uplot} {
		if r.StatusCode != 200 {
			t.Errorf("%s: %s", name, r.Status)
		}
		if r.Header.Get("Content-Security-Policy") != contentSecurityPolicy {
			t.Errorf("%s: Content-Security-Policy %q", name, r.Header.Get("Content-Security-Policy"))
		}
	}
	if ct := s.index.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("/ content type %q", ct)
	}
	if !strings.Contains(s.indexBody, `id="chart-rates"`) {
		t.Errorf("/ is not the page:\n%s", s.indexBody)
	}
	if len(s.doc.Batches) != wantBatches || s.doc.History != 3 {
		t.Fatalf("/api/page has %d batches, history %d; want %d, 3", len(s.doc.Batches), s.doc.History, wantBatches)
	}
	if got := s.doc.Batches[len(s.doc.Batches)-1].BatchID; got != lastID {
		t.Errorf("newest batch on the page %d, want %d", got, lastID)
	}
	for i := 1; i < len(s.doc.Batches); i++ {
		if s.doc.Batches[i].BatchID <= s.doc.Batches[i-1].BatchID {
			t.Errorf("batches not ascending: %d after %d", s.doc.Batches[i].BatchID, s.doc.Batches[i-1].BatchID)
		}
	}
	if s.progress.BatchID != lastID || s.progress.NumInputRows == 0 {
		t.Errorf("/api/progress/%d: %+v", lastID, s.progress)
	}
	if s.missing != 404 || s.badID != 400 {
		t.Errorf("/api/progress of a batch not kept: %d (want 404); of a non-number: %d (want 400)", s.missing, s.badID)
	}
	if s.doc.Plan == nil || len(s.doc.Plan.Operators) != 1 || s.doc.Plan.Operators[0].ID != "totals" ||
		len(s.doc.Plan.Sinks) != 1 || s.doc.Plan.Sinks[0].Guarantee != engine.ExactlyOnce {
		t.Errorf("plan %+v", s.doc.Plan)
	}
	last := s.doc.Batches[len(s.doc.Batches)-1]
	if len(last.State) != 1 || last.State[0].ID != "totals" || last.State[0].Rows != 3 || last.Offsets[0] != "seq: 20 → 25" {
		t.Errorf("newest batch point %+v", last)
	}
}

// The status server serves the page, the history of the last WithHistory
// batches and each one's progress, consistent with /status.
func TestStatusServerServesThePage(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cp := localStore(t)
	stream := engine.ReadStream(newSeq(25, 5, 3)).GroupBy("key").ID("totals").Agg(batch.Sum(batch.Col("amount")).As("total"))
	mon := New(WithStatusServer("127.0.0.1:0"), WithHistory(3))
	var seen pageSeen
	q, err := engine.NewQuery(stream, engine.WithName("payments"), engine.WithCheckpoint(cp), engine.WithSink(memsink.New("out")),
		engine.WithTrigger(engine.AvailableNow()), engine.WithListener(mon),
		engine.WithProgressListener(func(p engine.Progress) {
			if p.BatchID == 4 {
				seen = fetchPage(t, "http://"+mon.StatusAddr(), 4)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := q.Run(ctx); err != nil {
		t.Fatal(err)
	}
	checkPageServed(t, seen, 3, 4)
	if seen.doc.Status.State != "running" || seen.doc.From != "query" || seen.doc.Status.LastProgress.BatchID != 4 ||
		seen.status.LastProgress == nil || seen.status.LastProgress.BatchID != 4 || seen.status.RunID != seen.doc.Status.RunID {
		t.Errorf("page status %+v, /status %+v", seen.doc.Status, seen.status)
	}
	if len(seen.doc.Plan.Steps) != 1 || len(seen.doc.Plan.Sources) != 1 || seen.doc.Plan.Sources[0] != "seq" || seen.doc.Plan.OutputMode == "" {
		t.Errorf("plan %+v", seen.doc.Plan)
	}

	// The same page, read-only, from what the run left in the checkpoint.
	srv := httptest.NewServer(CheckpointHandler(cp, WithHistory(3)))
	defer srv.Close()
	s := fetchPage(t, srv.URL, 4)
	checkPageServed(t, s, 3, 4)
	if s.doc.From != "checkpoint" || s.doc.Status.State != "stopped" || s.status.State != "stopped" ||
		s.doc.Status.ID != q.ID() || s.doc.Status.Name != "payments" || s.doc.Status.RunID != seen.doc.Status.RunID || s.doc.Status.LastCommit == "" {
		t.Errorf("checkpoint page status %+v", s.doc.Status)
	}
}

// A checkpoint page tells a running driver by its lock, without taking it.
func TestCheckpointPageSeesTheDriverRunning(t *testing.T) {
	cp := localStore(t)
	src := newSeq(10, 5, 3)
	stream := engine.ReadStream(src).GroupBy("key").ID("totals").Agg(batch.Sum(batch.Col("amount")).As("total"))
	h := CheckpointHandler(cp)
	state := func() string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/status", nil))
		var st Status
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
			t.Fatalf("/status %d: %v\n%s", rec.Code, err, rec.Body)
		}
		return st.State
	}
	var during []string
	q, err := engine.NewQuery(stream, engine.WithName("payments"), engine.WithCheckpoint(cp), engine.WithSink(memsink.New("out")),
		engine.WithTrigger(engine.AvailableNow()),
		engine.WithProgressListener(func(engine.Progress) { during = append(during, state()) }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := q.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if len(during) != 2 || during[0] != "running" || during[1] != "running" {
		t.Errorf("while Run ran the checkpoint page said %q, want running", during)
	}
	if got := state(); got != "stopped" {
		t.Errorf("after Run: %q, want stopped", got)
	}
}

func TestFlockHeld(t *testing.T) {
	const locks = `1: POSIX  ADVISORY  WRITE 77 fe:00:123 0 EOF
2: FLOCK  ADVISORY  WRITE 88 fe:00:9978128 0 EOF
2: -> FLOCK  ADVISORY  WRITE 89 fe:00:555 0 EOF
3: FLOCK  ADVISORY  WRITE 90 00:2f:777 0 EOF
`
	dev := func(major, minor uint64) uint64 {
		return (major&0xfff)<<8 | (minor & 0xff) | (major&^0xfff)<<32 | (minor&^0xff)<<12
	}
	for _, c := range []struct {
		name     string
		dev, ino uint64
		want     bool
	}{
		{"held by flock", dev(0xfe, 0), 9978128, true},
		{"a POSIX lock is not the engine's", dev(0xfe, 0), 123, false},
		{"a waiter does not hold it", dev(0xfe, 0), 555, false},
		{"same inode on another device", dev(0x08, 1), 9978128, false},
		{"overlay: anonymous device, inode decides", dev(0, 0x40), 9978128, true},
		{"no lock", dev(0xfe, 0), 1, false},
	} {
		if got := flockHeld([]byte(locks), c.dev, c.ino); got != c.want {
			t.Errorf("%s: flockHeld = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestCheckpointPageOnObjectStorageSaysUnknown(t *testing.T) {
	// A store that is not a local directory: a prefix view of one is
	// still local, so wrap it in a type LocalDir does not know.
	st, note := driverState(notLocal{localStore(t)})
	if st != "unknown" || !strings.Contains(note, "object storage") {
		t.Errorf("driverState = %q, %q", st, note)
	}
}

type notLocal struct{ storage.Store }

// The page sets text with textContent only, loads nothing from another
// origin, and ships uPlot's license beside it.
func TestPageAssetsAreSelfContained(t *testing.T) {
	js, err := fs.ReadFile(assets, "assets/app.js")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function`).Find(js); m != nil {
		t.Errorf("app.js uses %s; set text with textContent", m)
	}
	err = fs.WalkDir(assets, "assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".html") || strings.HasSuffix(path, ".css") || path == "assets/app.js") {
			return err
		}
		b, err := fs.ReadFile(assets, path)
		if err != nil {
			return err
		}
		if m := regexp.MustCompile(`(src|href)="(https?:)?//|url\((https?:)?//|<script>|<style|style="`).Find(b); m != nil {
			t.Errorf("%s: %s (the page loads nothing from elsewhere and has no inline script or style)", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(assets, "assets/vendor/uplot/LICENSE"); err != nil {
		t.Errorf("uPlot's license is not embedded beside it: %v", err)
	}
}
