package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/monitor"
	"github.com/onceflow/onceflow/source/kafka"
	"github.com/onceflow/onceflow/storage"
)

// chromiumPath finds a Chromium for the browser tests: $ONCEFLOW_CHROMIUM,
// else chromium (Debian's package) or a Chrome on PATH. Without one the
// test skips with how to get it, or fails under ONCEFLOW_REQUIRE_SERVICES=1
// (scripts/test.sh installs it with scripts/chromium.sh).
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("ONCEFLOW_CHROMIUM"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			testenv.SkipMissing(t, fmt.Sprintf("ONCEFLOW_CHROMIUM=%s is not an executable (%v): run `bash scripts/chromium.sh` (as root it runs apt-get install -y chromium) and set it to the path that prints", p, err))
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.SkipMissing(t, "no Chromium for the status page's browser test: run `bash scripts/chromium.sh` (as root it runs apt-get install -y chromium), or set ONCEFLOW_CHROMIUM to a Chrome or Chromium binary")
	return ""
}

// testOutputDir is where a test leaves files for people to look at
// (screenshots): $ONCEFLOW_TEST_OUTPUT/<test name>, by default under
// ${TMPDIR:-/tmp}/onceflow-test-output. Never in the repository.
func testOutputDir(t *testing.T) string {
	t.Helper()
	base := os.Getenv("ONCEFLOW_TEST_OUTPUT")
	if base == "" {
		base = filepath.Join(os.TempDir(), "onceflow-test-output")
	}
	dir := filepath.Join(base, regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser starts a headless Chromium for the test and returns a tab's
// context. Every page it opens counts Content-Security-Policy violations
// in window.__cspViolations; uncaught exceptions and console errors are
// collected in errs.
func browser(t *testing.T, ctx context.Context, errs *atomic.Pointer[[]string]) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // tests run as root in CI
		chromedp.WindowSize(1400, 1000),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("lang", "en-US"),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	// Start the browser on the parent context (a timeout on the first
	// Run would stop it), then listen.
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[chromedp.Void]("1")); err != nil {
		t.Fatalf("start Chromium (%s): %v", chromiumPath(t), err)
	}
	err := chromedp.Listen(bctx, func(ev any) {
		var msg string
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg = "exception: " + e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
		case *runtime.EventConsoleAPICalled:
			if e.Type != runtime.ConsoleAPICalledTypeError {
				return
			}
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, string(a.Value)+a.Description)
			}
			msg = "console.error: " + strings.Join(parts, " ")
		default:
			return
		}
		for {
			old := errs.Load()
			next := append(append([]string(nil), *old...), msg)
			if errs.CompareAndSwap(old, &next) {
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = chromedp.Run(bctx, func(ctx context.Context, tg *chromedp.Target) (page.AddScriptToEvaluateOnNewDocumentResult, error) {
		return cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', function (e) { window.__cspViolations.push(e.violatedDirective + ' ' + e.blockedURI); });`})
	})
	if err != nil {
		t.Fatalf("Chromium: %v", err)
	}
	return bctx
}

// domReport is what the test reads out of the page.
type domReport struct {
	Polls  int                   `json:"polls"`
	Charts map[string]chartState `json:"charts"`
	Rows   int                   `json:"rows"`
	Links  []string              `json:"links"`
	Values map[string]string     `json:"values"` // element id → data-value
	Texts  map[string]string     `json:"texts"`  // element id → text
	Plan   []string              `json:"plan"`   // dt: dd
	CSP    []string              `json:"csp"`
}

type chartState struct {
	Points int `json:"points"`
	Series int `json:"series"`
	// Inked is how many canvas pixels are not transparent.
	Inked int    `json:"inked"`
	Empty string `json:"empty"`
}

const readDOM = `(function () {
  function attr(id) { var e = document.getElementById(id); return e ? (e.getAttribute('data-value') || '') : ''; }
  function text(id) { var e = document.getElementById(id); return e ? e.textContent : ''; }
  var charts = {};
  document.querySelectorAll('figure.chart').forEach(function (f) {
    var inked = 0;
    var cv = f.querySelector('canvas');
    if (cv && cv.width > 0) {
      var d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
      for (var i = 3; i < d.length; i += 4) { if (d[i] !== 0) { inked++; } }
    }
    var empty = f.querySelector('.empty');
    charts[f.id] = { points: Number(f.getAttribute('data-points') || 0), series: Number(f.getAttribute('data-series') || 0), inked: inked, empty: empty ? empty.textContent : '' };
  });
  var ids = ['q-id', 'q-run', 'q-trigger', 'q-last-batch', 'q-last-rows', 'q-last-duration', 'q-last-rate', 'q-health', 'n-batches'];
  var values = {}, texts = {};
  ids.concat(['q-name', 'q-state']).forEach(function (id) { values[id] = attr(id); texts[id] = text(id); });
  var plan = [];
  document.querySelectorAll('#plan dt').forEach(function (dt) { plan.push(dt.textContent + ': ' + dt.nextElementSibling.textContent); });
  return {
    polls: Number(document.body.getAttribute('data-polls') || 0),
    charts: charts,
    rows: document.querySelectorAll('#batches tbody tr').length,
    links: Array.prototype.map.call(document.querySelectorAll('#batches tbody a'), function (a) { return a.href; }),
    values: values, texts: texts, plan: plan, csp: window.__cspViolations || []
  };
})()`

// chartsDrawn is true once every chart has data points and ink.
const chartsDrawn = `(function () {
  var figs = document.querySelectorAll('figure.chart');
  if (figs.length === 0 || !document.body.getAttribute('data-polls')) { return false; }
  for (var i = 0; i < figs.length; i++) {
    if (Number(figs[i].getAttribute('data-points') || 0) === 0 || !figs[i].querySelector('canvas')) { return false; }
  }
  return document.querySelectorAll('#batches tbody tr').length > 0;
})()`

// wantCharts are the charts the page draws, by figure id.
var wantCharts = []string{"chart-rates", "chart-phases", "chart-state-rows", "chart-state-bytes", "chart-lag", "chart-watermark", "chart-late"}

// checkPage opens base in the browser, waits for the charts, and checks
// the DOM against base/status; it saves a screenshot as shot and runs the
// accessibility lint.
func checkPage(t *testing.T, bctx context.Context, base, shot string) (domReport, monitor.Status) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bctx, 45*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatalf("open %s: %v", base, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](chartsDrawn, chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(200*time.Millisecond))); err != nil {
		rep, _ := chromedp.Run(bctx, chromedp.Evaluate[domReport](readDOM))
		t.Fatalf("%s: the charts did not draw: %v\npage: %+v", base, err, rep)
	}

	// Read the DOM and /status; a batch committed in between means read
	// both again.
	var rep domReport
	var st monitor.Status
	for attempt := 0; ; attempt++ {
		var err error
		if rep, err = chromedp.Run(ctx, chromedp.Evaluate[domReport](readDOM)); err != nil {
			t.Fatal(err)
		}
		st = getStatus(t, base)
		if st.LastProgress != nil && rep.Values["q-last-batch"] == strconv.FormatInt(st.LastProgress.BatchID, 10) || attempt == 5 {
			break
		}
		time.Sleep(2500 * time.Millisecond) // the page polls every 2 s
	}

	for _, id := range wantCharts {
		c, ok := rep.Charts[id]
		switch {
		case !ok:
			t.Errorf("no chart %s on the page", id)
		case c.Points == 0 || c.Series == 0 || c.Inked < 200:
			t.Errorf("chart %s: %d points in %d series, %d pixels drawn: want data drawn", id, c.Points, c.Series, c.Inked)
		}
	}
	if rep.Rows == 0 || len(rep.Links) != rep.Rows {
		t.Errorf("batch table: %d rows, %d links", rep.Rows, len(rep.Links))
	}
	if len(rep.CSP) > 0 {
		t.Errorf("Content-Security-Policy violations: %q", rep.CSP)
	}
	lp := st.LastProgress
	if lp == nil {
		t.Fatalf("/status has no last progress: %+v", st)
	}
	for id, want := range map[string]string{
		"q-id": st.ID, "q-run": st.RunID, "q-trigger": st.Trigger,
		"q-last-batch": strconv.FormatInt(lp.BatchID, 10), "q-last-rows": strconv.FormatInt(lp.NumInputRows, 10),
		"q-last-duration": strconv.FormatInt(lp.BatchDurationMs, 10), "q-health": strconv.FormatBool(st.Healthy),
	} {
		if got := rep.Values[id]; got != want {
			t.Errorf("#%s shows %q, /status has %q", id, got, want)
		}
	}
	if got, _ := strconv.ParseFloat(rep.Values["q-last-rate"], 64); got != lp.ProcessedRowsPerSecond {
		t.Errorf("#q-last-rate shows %v, /status has %v", got, lp.ProcessedRowsPerSecond)
	}
	if rep.Texts["q-name"] != st.Name || rep.Texts["q-state"] != st.State {
		t.Errorf("header says %q %q, /status has %q %q", rep.Texts["q-name"], rep.Texts["q-state"], st.Name, st.State)
	}
	// The newest row links to the newest batch's progress record.
	if len(rep.Links) > 0 {
		var p engine.Progress
		getJSON(t, rep.Links[0], &p)
		if p.BatchID != lp.BatchID || p.NumInputRows != lp.NumInputRows {
			t.Errorf("%s is batch %d with %d rows, want the last progress %d with %d", rep.Links[0], p.BatchID, p.NumInputRows, lp.BatchID, lp.NumInputRows)
		}
	}

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(testOutputDir(t), shot)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	checkAccessibility(t, ctx)
	return rep, st
}

// checkAccessibility runs axe-core (testdata/axe, vendored from npm for
// the tests only) in the page and fails on any WCAG 2.1 A/AA violation:
// missing labels, low contrast, bad structure.
func checkAccessibility(t *testing.T, ctx context.Context) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "axe", "axe.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	type axeResult struct {
		Violations []struct {
			ID, Impact, Help string
			Nodes            []struct {
				Target         []any  `json:"target"`
				FailureSummary string `json:"failureSummary"`
			} `json:"nodes"`
		} `json:"violations"`
		Passes []struct {
			ID string `json:"id"`
		} `json:"passes"`
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](string(src)+";true")); err != nil {
		t.Fatalf("load axe-core: %v", err)
	}
	res, err := chromedp.Run(ctx, chromedp.Evaluate[axeResult](`axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}, resultTypes: ['violations']})`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("axe-core: %v", err)
	}
	if len(res.Passes) < 10 {
		t.Errorf("axe-core passed only %d rules; did it run on the page?", len(res.Passes))
	}
	t.Logf("axe-core (WCAG 2.1 A and AA): %d rules passed, %d violated", len(res.Passes), len(res.Violations))
	passed := map[string]bool{}
	for _, p := range res.Passes {
		passed[p.ID] = true
	}
	for _, rule := range []string{"color-contrast", "document-title", "html-has-lang", "role-img-alt", "link-name"} {
		if !passed[rule] {
			t.Errorf("axe-core rule %s did not pass (passed: %v)", rule, passed)
		}
	}
	for _, v := range res.Violations {
		var where []string
		for _, n := range v.Nodes {
			where = append(where, fmt.Sprintf("%v: %s", n.Target, n.FailureSummary))
		}
		t.Errorf("accessibility (axe %s, %s): %s\n  %s", v.ID, v.Impact, v.Help, strings.Join(where, "\n  "))
	}
}

func getJSON(t *testing.T, url string, into any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

func getStatus(t *testing.T, base string) monitor.Status {
	t.Helper()
	var st monitor.Status
	getJSON(t, base+"/status", &st)
	return st
}

// TestStatusPageInBrowser runs a windowed aggregation over a Kafka topic
// (kfake) with the status server, so that the page has rates, phases,
// state, lag, a watermark and late rows, opens the page in headless
// Chromium and checks what it draws against /status; then it serves the
// checkpoint the run left with `onceflow checkpoint serve` and checks the
// same page drawn from it. Screenshots go to testOutputDir.
func TestStatusPageInBrowser(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var errsPtr atomic.Pointer[[]string]
	errsPtr.Store(&[]string{})
	bctx := browser(t, ctx, &errsPtr)

	// The input: 3 partitions, event times one second apart (ending about
	// now, so the watermark delay is minutes, as in production), then rows
	// an hour older than the watermark, which the window drops as late.
	const topic, onTime, late = "payments", 300, 30
	cluster := testenv.Kafka(t, map[string]int32{topic: 3})
	t0 := time.Now().Add(-10 * time.Minute).Truncate(time.Minute)
	var recs []*kgo.Record
	for i := range onTime + late {
		ts := t0.Add(time.Duration(i) * time.Second)
		if i >= onTime {
			ts = t0.Add(-time.Hour)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 3), Key: []byte("k" + strconv.Itoa(i%5)), Value: []byte("1"), Timestamp: ts})
	}
	cl := testenv.KafkaClient(t, cluster, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	src, err := kafka.New(kafka.WithBrokers(cluster.Addrs()...), kafka.WithTopics(topic), kafka.WithMaxOffsetsPerTrigger(30))
	if err != nil {
		t.Fatal(err)
	}
	stream := engine.ReadStream(src).
		WithWatermark(kafka.ColTimestamp, 5*time.Second).
		GroupByWindow(engine.TumblingWindow(kafka.ColTimestamp, 10*time.Second), kafka.ColKey).ID("payments-per-10s").
		Agg(batch.CountRows().As("n"))
	dir := filepath.Join(t.TempDir(), "cp")
	store, err := storage.OpenLocal(dir, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	mon := monitor.New(monitor.WithStatusServer("127.0.0.1:0"), monitor.WithHistory(300))
	var rows, dropped atomic.Int64
	q, err := engine.NewQuery(stream, engine.WithName("payments-per-window"), engine.WithCheckpoint(store), engine.WithSink(memsink.New("windows")),
		engine.WithTrigger(engine.Every(50*time.Millisecond)), engine.WithOutputMode(engine.Append), engine.WithListener(mon),
		engine.WithProgressListener(func(p engine.Progress) {
			rows.Add(p.NumInputRows)
			for _, op := range p.StateOperators {
				dropped.Add(op.NumRowsDroppedByWatermark)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	qctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(qctx) }()
	stopQuery := sync.OnceValue(func() error { stop(); return <-done })
	defer stopQuery()
	for rows.Load() < onTime+late {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("the query stopped: %v", err)
		case <-ctx.Done():
			t.Fatalf("the query read %d of %d rows", rows.Load(), onTime+late)
		case <-time.After(20 * time.Millisecond):
		}
	}

	live, st := checkPage(t, bctx, "http://"+mon.StatusAddr(), "query.png")
	if st.State != "running" || live.Texts["q-trigger"] != "every 50ms" {
		t.Errorf("live page: state %q, trigger %q", st.State, live.Texts["q-trigger"])
	}
	if !planHas(live.Plan, "Stateful operators: payments-per-10s (windowAggregate)", "Sinks: memory[windows]: exactly-once", "Watermark: timestamp - 5s", "Output mode: append") {
		t.Errorf("plan on the page: %q", live.Plan)
	}
	if dropped.Load() == 0 {
		t.Errorf("no late rows were dropped; the late-rows chart would be flat")
	}
	if err := stopQuery(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}

	// The same page from the checkpoint alone, with the command line.
	var out syncBuffer
	sctx, stopServe := context.WithCancel(ctx)
	served := make(chan int, 1)
	go func() {
		served <- run(sctx, []string{"checkpoint", "serve", "-addr", "127.0.0.1:0", "-n", "300", dir}, &out, &out)
	}()
	stopServing := sync.OnceValue(func() int { stopServe(); return <-served })
	defer stopServing()
	addr := regexp.MustCompile(`at http://([0-9.:]+)/`)
	var base string
	for base == "" {
		if m := addr.FindStringSubmatch(out.String()); m != nil {
			base = "http://" + m[1]
			break
		}
		select {
		case code := <-served:
			served <- code
			t.Fatalf("checkpoint serve exited %d:\n%s", code, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	fromCP, cst := checkPage(t, bctx, base, "checkpoint.png")
	if cst.State != "stopped" || cst.ID != st.ID || cst.RunID != st.RunID || fromCP.Rows != live.Rows {
		t.Errorf("checkpoint page: state %q id %q run %q, %d rows; the live page: id %q run %q, %d rows", cst.State, cst.ID, cst.RunID, fromCP.Rows, st.ID, st.RunID, live.Rows)
	}
	if code := stopServing(); code != 0 {
		t.Errorf("checkpoint serve exited %d:\n%s", code, out.String())
	}
	if errs := *errsPtr.Load(); len(errs) > 0 {
		t.Errorf("the browser reported errors:\n%s", strings.Join(errs, "\n"))
	}
}

func planHas(plan []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, p := range plan {
			if strings.HasPrefix(p, w) || strings.Contains(p, w) {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
