package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/monitor"
)

// checkpoint serve refuses what is not a checkpoint before it listens,
// serves the page's JSON of one that is, and stops on interrupt with exit
// status 0. (The page itself is checked in a browser by
// TestStatusPageInBrowser.)
func TestCheckpointServe(t *testing.T) {
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "nope")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing directory", []string{"checkpoint", "serve", missing}, 1, "open " + missing},
		{"not a checkpoint", []string{"checkpoint", "serve", t.TempDir()}, 1, "metadata"},
		{"no batches", []string{"checkpoint", "serve", "-n", "0", t.TempDir()}, 2, "-n 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(ctx, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, want %d; stderr %q should name %q", code, tc.code, errOut, tc.want)
			}
		})
	}

	cp := ledgerCheckpoint(t, 20)
	sctx, stop := context.WithCancel(ctx)
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(sctx, []string{"checkpoint", "serve", "-addr", "127.0.0.1:0", "-n", "2", cp}, &out, &out)
	}()
	var base string
	for deadline := time.Now().Add(20 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := regexp.MustCompile(`at (http://[0-9.:]+)/`).FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		stop()
		t.Fatalf("no address printed (exit %d):\n%s", <-done, out.String())
	}
	resp, err := http.Get(base + "/api/page")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Status  monitor.Status `json:"status"`
		History int            `json:"history"`
		Batches []struct {
			BatchID int64 `json:"batchId"`
		} `json:"batches"`
	}
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if doc.History != 2 || len(doc.Batches) != 2 || doc.Status.State != "stopped" || doc.Status.Name == "" {
		t.Errorf("/api/page of %s: %+v", cp, doc)
	}
	stop()
	if code := <-done; code != 0 {
		t.Errorf("exit %d after interrupt:\n%s", code, out.String())
	}
}

// demo -status serves the status page while it runs.
func TestDemoServesStatusPage(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"demo", "-batches", "0", "-trigger", "100ms", "-status", "127.0.0.1:0", "-checkpoint", filepath.Join(t.TempDir(), "cp")}, &out, &out)
	}()
	var base string
	for deadline := time.Now().Add(20 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := regexp.MustCompile(`status page: (http://[0-9.:]+)/`).FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		cancel()
		t.Fatalf("no status page line (exit %d):\n%s", <-done, out.String())
	}
	for _, path := range []string{"/", "/api/page", "/status", "/metrics"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %s", path, resp.Status)
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("demo exit %d:\n%s", code, out.String())
	}
}
