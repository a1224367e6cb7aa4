package s3store_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/storage"
	"github.com/onceflow/onceflow/storage/s3store"
	"github.com/onceflow/onceflow/storage/storagetest"
)

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store { return testenv.S3(t) })
}

// TestConformanceMultipart runs the suite with a threshold low enough that
// its 20 MiB objects go up in parts, the conditional header on the
// completion.
func TestConformanceMultipart(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		loc := testenv.S3Bucket(t)
		o := loc.Options
		o.PartSize = 5 << 20
		o.MultipartThreshold = 6 << 20
		s, err := s3store.New(t.Context(), loc.Bucket, "under/a/prefix", o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestPutIfAbsentRace has many writers, through separate clients, create
// the same objects; the server must pick exactly one each time, for small
// objects and for multipart ones.
func TestPutIfAbsentRace(t *testing.T) {
	loc := testenv.S3Bucket(t)
	cases := []struct {
		name    string
		writers int
		size    int
	}{
		{"small", 64, 100},
		{"multipart", 4, 11 << 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			stores := make([]*s3store.Store, c.writers)
			for i := range stores {
				o := loc.Options
				o.PartSize = 5 << 20
				o.MultipartThreshold = 6 << 20
				s, err := s3store.New(ctx, loc.Bucket, "race", o)
				if err != nil {
					t.Fatal(err)
				}
				stores[i] = s
			}
			payload := func(i int) []byte {
				return bytes.Repeat([]byte(fmt.Sprintf("<%s writer %d>", c.name, i)), c.size/16+1)[:c.size]
			}
			for round := range 3 {
				name := fmt.Sprintf("%s/commits/%d", c.name, round)
				errs := make([]error, c.writers)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range c.writers {
					wg.Go(func() {
						<-start
						errs[i] = stores[i].PutIfAbsent(ctx, name, payload(i))
					})
				}
				close(start)
				wg.Wait()
				winner := -1
				for i, err := range errs {
					switch {
					case err == nil && winner >= 0:
						t.Fatalf("round %d: writers %d and %d both won", round, winner, i)
					case err == nil:
						winner = i
					case !errors.Is(err, storage.ErrExist):
						t.Fatalf("round %d: writer %d: %v", round, i, err)
					}
				}
				if winner < 0 {
					t.Fatalf("round %d: nobody won", round)
				}
				got, err := stores[0].Get(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, payload(winner)) {
					t.Fatalf("round %d: stored bytes are not the winner's (writer %d)", round, winner)
				}
			}
		})
	}
}

// TestNoSecretInErrors provokes errors with known credentials and checks no
// message carries them.
func TestNoSecretInErrors(t *testing.T) {
	const (
		access = "AKIAONCEFLOWKNOWNKEY7"
		secret = "onceflow+known/secret+value+0123456789abcdef"
	)
	loc := testenv.S3Bucket(t)
	check := func(t *testing.T, what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		msg := fmt.Sprintf("%v %+v %#v", err, err, err.Error())
		for _, s := range []string{access, secret, url.QueryEscape(secret), url.PathEscape(secret)} {
			if strings.Contains(msg, s) {
				t.Fatalf("%s: error text carries a credential: %s", what, msg)
			}
		}
	}
	ctx := t.Context()
	endpoints := map[string]string{
		"wrong credentials": loc.Options.Endpoint,
		"unreachable":       "http://127.0.0.1:1",
	}
	for _, label := range []string{"unreachable", "wrong credentials"} {
		t.Run(label, func(t *testing.T) {
			o := s3store.Options{
				Endpoint:    endpoints[label],
				PathStyle:   true,
				Region:      "us-east-1",
				MaxAttempts: 1,
				Credentials: credentials.NewStaticCredentialsProvider(access, secret, ""),
			}
			s, err := s3store.New(ctx, loc.Bucket, "p", o)
			if err != nil {
				t.Fatal(err)
			}
			err = s.PutIfAbsent(ctx, "x", []byte("x"))
			check(t, "put-if-absent", err)
			if errors.Is(err, storage.ErrExist) {
				t.Fatalf("put-if-absent with bad credentials claims the object exists: %v", err)
			}
			check(t, "put", s.Put(ctx, "x", []byte("x")))
			_, err = s.Get(ctx, "x")
			check(t, "get", err)
			if errors.Is(err, storage.ErrNotExist) {
				t.Fatalf("get with bad credentials claims the object is missing: %v", err)
			}
			_, err = s.List(ctx, "")
			check(t, "list", err)
			check(t, "delete", s.Delete(ctx, "x"))
		})
	}
	t.Run("credentials in URL", func(t *testing.T) {
		loc := "s3://" + access + ":" + url.QueryEscape(secret) + "@" + loc.Bucket + "/p"
		_, err := storage.Open(ctx, loc, map[string]storage.Opener{"s3": s3store.Open})
		check(t, "open", err)
		_, err = storage.Open(ctx, loc+"%zz", map[string]storage.Opener{"s3": s3store.Open})
		check(t, "open a bad URL", err)
		_, err = storage.Open(ctx, loc, nil)
		check(t, "open with no s3 backend", err)
	})
}

func TestOpen(t *testing.T) {
	ctx := t.Context()
	cases := []struct {
		location string
		url      string // "" when Open must fail
		errHas   string
	}{
		{"s3://bucket", "s3://bucket/", ""},
		{"s3://bucket/", "s3://bucket/", ""},
		{"s3://bucket/a/b/", "s3://bucket/a/b", ""},
		{"s3://bucket/a/b?endpoint=http://127.0.0.1:9000&path_style=true&region=eu-west-1", "s3://bucket/a/b", ""},
		{"s3://bucket/a?path_style=maybe", "", "path_style"},
		{"s3://bucket/a?color=blue", "", `unknown query parameter "color"`},
		{"s3://bucket/a?endpoint=ftp://x", "", "not an http or https URL"},
		{"s3:///a", "", "names no bucket"},
		{"s3://bucket/a/../b", "", "bad object name"},
	}
	for _, c := range cases {
		t.Run(c.location, func(t *testing.T) {
			u, err := url.Parse(c.location)
			if err != nil {
				t.Fatal(err)
			}
			s, err := s3store.Open(ctx, u)
			if c.url == "" {
				if err == nil || !strings.Contains(err.Error(), c.errHas) {
					t.Fatalf("Open(%s) = %v, want an error containing %q", c.location, err, c.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.URL() != c.url {
				t.Fatalf("URL() = %q, want %q", s.URL(), c.url)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	o := s3store.Options{PartSize: 1, MultipartThreshold: -1, MaxAttempts: -2, Endpoint: "nope"}
	err := o.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"part size", "threshold", "max attempts", "endpoint"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %q, missing a word on %s", err, want)
		}
	}
	var zero s3store.Options
	zero.EnsureDefaults()
	if err := zero.Validate(); err != nil {
		t.Fatalf("zero options after EnsureDefaults: %v", err)
	}
}

// TestPrefixes checks stores on one bucket under different prefixes do not
// see each other's objects, and that a missing bucket is not a missing
// object.
func TestPrefixes(t *testing.T) {
	loc := testenv.S3Bucket(t)
	ctx := t.Context()
	a, err := s3store.New(ctx, loc.Bucket, "q/a", loc.Options)
	if err != nil {
		t.Fatal(err)
	}
	ab, err := s3store.New(ctx, loc.Bucket, "q/ab", loc.Options)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Put(ctx, "x", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := ab.Put(ctx, "x", []byte("ab")); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*s3store.Store{a, ab} {
		infos, err := s.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) != 1 || infos[0].Name != "x" {
			t.Fatalf("%s lists %+v, want just x", s.URL(), infos)
		}
	}
	if got, err := ab.Get(ctx, "x"); err != nil || string(got) != "ab" {
		t.Fatalf("get x from %s = %q, %v", ab.URL(), got, err)
	}

	nb, err := s3store.New(ctx, loc.Bucket+"-missing", "", loc.Options)
	if err != nil {
		t.Fatal(err)
	}
	_, err = nb.Get(ctx, "x")
	if err == nil || errors.Is(err, storage.ErrNotExist) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("get from a missing bucket: %v, want an error naming the bucket, not ErrNotExist", err)
	}
}

// TestEndpointFromEnvironment opens stores whose endpoint comes only from
// the environment: ONCEFLOW_S3_ENDPOINT, and the SDK's AWS_ENDPOINT_URL_S3
// and AWS_ENDPOINT_URL. Path style follows from the loopback address.
func TestEndpointFromEnvironment(t *testing.T) {
	loc := testenv.S3Bucket(t)
	for _, v := range []string{s3store.EnvEndpoint, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"} {
		t.Run(v, func(t *testing.T) {
			for _, other := range []string{s3store.EnvEndpoint, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", s3store.EnvPathStyle} {
				t.Setenv(other, "")
				os.Unsetenv(other)
			}
			t.Setenv(v, loc.Options.Endpoint)
			u, err := url.Parse("s3://" + loc.Bucket + "/env")
			if err != nil {
				t.Fatal(err)
			}
			s, err := s3store.Open(t.Context(), u)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Put(t.Context(), v, []byte(v)); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Get(t.Context(), v); err != nil || string(got) != v {
				t.Fatalf("get = (%q, %v)", got, err)
			}
		})
	}
}
