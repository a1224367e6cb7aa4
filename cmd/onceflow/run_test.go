package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe to read while a command writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestDemo(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "cp")
	start := time.Now()
	code, out, errOut := runCLI(ctx, "demo", "-batches", "2", "-trigger", "100ms", "-rows-per-second", "1000", "-checkpoint", dir)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("demo of 2 batches took %s", d)
	}
	if !strings.HasPrefix(out, "onceflow demo: checkpoint file://"+dir+", trigger ") || !strings.Contains(out, "onceflow checkpoint inspect "+dir) {
		t.Errorf("first line does not name the checkpoint:\n%s", out)
	}
	progress := regexp.MustCompile(`(?m)^progress: batch (\d+), (\d+) rows in, `).FindAllStringSubmatch(out, -1)
	if len(progress) != 2 || progress[0][1] != "0" || progress[1][1] != "1" {
		t.Errorf("progress lines %v, want batches 0 and 1:\n%s", progress, out)
	}
	if !regexp.MustCompile(`(?m)^stopped after 2 batches in `).MatchString(out) {
		t.Errorf("no stop line:\n%s", out)
	}

	// What it left is a checkpoint the other commands read: two batches,
	// both committed, and the totals-by-key state.
	code, out, errOut = runCLI(ctx, "checkpoint", "inspect", "-o", "json", dir)
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, errOut)
	}
	var rep inspectJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.CommitBatches) != 2 || rep.Uncommitted != nil || rep.Metadata.Name != "demo" ||
		len(rep.StateOperators) != 1 || rep.StateOperators[0].ID != "totals-by-key" || rep.StateOperators[0].Keys == 0 {
		t.Errorf("demo checkpoint: %s", out)
	}

	// A second run continues the same checkpoint.
	code, out, errOut = runCLI(ctx, "demo", "-batches", "1", "-trigger", "once", "-checkpoint", dir)
	if code != 0 || !strings.Contains(out, "progress: batch 2, ") {
		t.Errorf("second run: exit %d, want batch 2\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

func TestDemoStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"demo", "-batches", "0", "-trigger", "50ms", "-rows-per-second", "100", "-checkpoint", t.TempDir()}, &stdout, &stderr)
	}()
	waitFor(t, &stdout, "progress: batch 0,", done)
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d after cancel: %s", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("demo did not stop within 15s of the cancel")
	}
	if !strings.Contains(stdout.String(), "stopped after ") {
		t.Errorf("no stop line:\n%s", stdout.String())
	}
}

// waitFor waits until out contains s, failing if the command ends first or
// 15 s pass.
func waitFor(t *testing.T, out *syncBuffer, s string, done <-chan int) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for !strings.Contains(out.String(), s) {
		select {
		case code := <-done:
			t.Fatalf("the command ended (exit %d) before printing %q:\n%s", code, s, out.String())
		case <-deadline:
			t.Fatalf("no %q within 15s:\n%s", s, out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestKafka(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"dev", "kafka", "-port", "0", "-topics", "payments:4,settlements"}, &stdout, &stderr)
	}()
	waitFor(t, &stdout, "\n", done)
	m := regexp.MustCompile(`^onceflow dev kafka: embedded broker listening on (127\.0\.0\.1:\d+)`).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("first line %q", stdout.String())
	}
	conn, err := net.DialTimeout("tcp", m[1], 5*time.Second)
	if err != nil {
		t.Fatalf("dial the broker at %s: %v", m[1], err)
	}
	conn.Close()

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d after cancel: %s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("kafka did not stop within 10s of the cancel")
	}
	// The port is released.
	if c, err := net.DialTimeout("tcp", m[1], time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after the broker stopped", m[1])
	}
}

// TestS3WithoutServer points every command that takes a location at an S3
// endpoint where nothing listens: each fails (exit 1) naming the location,
// and no credential reaches stdout or stderr.
func TestS3WithoutServer(t *testing.T) {
	const (
		keyID  = "AKIAONCEFLOWTESTKEY1"
		secret = "onceflow/TEST/secret+Zm9vYmFyYmF6cXV4"
		token  = "onceflowTestSessionToken"
	)
	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String()
	l.Close()
	home := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID":           keyID,
		"AWS_SECRET_ACCESS_KEY":       secret,
		"AWS_SESSION_TOKEN":           token,
		"AWS_REGION":                  "us-east-1",
		"AWS_CONFIG_FILE":             filepath.Join(home, "config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(home, "credentials"),
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_PROFILE":                 "",
		"AWS_ENDPOINT_URL":            "",
		"AWS_ENDPOINT_URL_S3":         "",
		"ONCEFLOW_S3_ENDPOINT":        endpoint,
		"ONCEFLOW_S3_PATH_STYLE":      "true",
	} {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	const loc = "s3://onceflow-test-bucket/cp"
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"checkpoint", "inspect", loc}, 1, "onceflow-test-bucket"},
		{[]string{"checkpoint", "inspect", "-o", "json", loc}, 1, "onceflow-test-bucket"},
		{[]string{"checkpoint", "progress", loc}, 1, "onceflow-test-bucket"},
		{[]string{"checkpoint", "state", loc, "--operator", "x"}, 1, "onceflow-test-bucket"},
		{[]string{"lake", "files", loc}, 1, "onceflow-test-bucket"},
		{[]string{"lake", "query", loc}, 1, "onceflow-test-bucket"},
		{[]string{"lake", "vacuum", "--delete", loc}, 1, "onceflow-test-bucket"},
		{[]string{"demo", "-batches", "1", "-trigger", "once", "-checkpoint", loc}, 1, "onceflow-test-bucket"},
		// Credentials in the URL are refused, and not repeated.
		{[]string{"checkpoint", "inspect", "s3://" + keyID + ":" + secret + "@onceflow-test-bucket/cp"}, 1, "parse location \"s3://…\""},
		{[]string{"lake", "files", "s3://" + keyID + ":" + strings.ReplaceAll(secret, "/", "%2F") + "@onceflow-test-bucket/t"}, 1, "carries credentials in the URL"},
	} {
		t.Run(strings.Join(tc.args[:2], " "), func(t *testing.T) {
			start := time.Now()
			code, out, errOut := runCLI(ctx, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
			}
			for _, s := range []string{secret, strings.ReplaceAll(secret, "/", "%2F"), keyID, token} {
				if strings.Contains(out+errOut, s) {
					t.Errorf("%v printed a credential:\nstdout:\n%s\nstderr:\n%s", tc.args, out, errOut)
				}
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("%v took %s to fail", tc.args, d)
			}
		})
	}

	// No S3 server configured and an incomplete key pair: the SDK finds no
	// credentials and the command fails before any request.
	t.Run("no endpoint, no access key id", func(t *testing.T) {
		t.Setenv("ONCEFLOW_S3_ENDPOINT", "")
		t.Setenv("AWS_ACCESS_KEY_ID", "")
		t.Setenv("AWS_SESSION_TOKEN", "")
		for _, args := range [][]string{
			{"checkpoint", "inspect", loc},
			{"lake", "files", loc},
		} {
			code, out, errOut := runCLI(ctx, args...)
			if code != 1 || !strings.Contains(errOut, "s3://onceflow-test-bucket/") || !strings.Contains(errOut, "credentials") {
				t.Errorf("%v: exit %d, stderr %q; want 1 naming the location and the missing credentials", args, code, errOut)
			}
			if strings.Contains(out+errOut, secret) {
				t.Errorf("%v printed the secret:\n%s%s", args, out, errOut)
			}
		}
	})
}

// TestDemoOnAnotherQuerysCheckpoint: the demo pointed at the ledger query's
// checkpoint refuses to start, says why, and leaves the checkpoint as it was.
func TestDemoOnAnotherQuerysCheckpoint(t *testing.T) {
	ctx := context.Background()
	cp := ledgerCheckpoint(t, 20)
	_, before, _ := runCLI(ctx, "checkpoint", "inspect", "-o", "json", cp)
	code, out, errOut := runCLI(ctx, "demo", "-batches", "1", "-trigger", "once", "-checkpoint", cp)
	if code != 1 || !strings.Contains(errOut, "incompatible restart") || !strings.Contains(errOut, `stateful operator "totals" was removed`) {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if strings.Contains(out, "progress: batch") {
		t.Errorf("the demo ran a batch:\n%s", out)
	}
	if _, after, _ := runCLI(ctx, "checkpoint", "inspect", "-o", "json", cp); after != before {
		t.Errorf("the checkpoint changed:\n%s\nbecame\n%s", before, after)
	}
}
