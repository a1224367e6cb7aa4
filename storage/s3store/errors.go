package s3store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/onceflow/onceflow/storage"
)

const (
	abortTimeout    = 30 * time.Second
	scrubTimeout    = 5 * time.Second
	partConcurrency = 4
)

// fail turns an SDK error from operation op on name into the error the
// store returns: one wrapping storage.ErrExist or storage.ErrNotExist where
// the server said so, otherwise the SDK's error with the store's location,
// and in every case with no credential in its text.
func (s *Store) fail(ctx context.Context, op, name string, err error) error {
	code, status := "", 0
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	// Decide on the error code: some servers answer other failures (an
	// unknown access key, for one) with the same status, and taking those
	// for a missing object would be a silent disaster. A bare status counts
	// only when the answer had no code at all.
	switch {
	case op == "put" && (code == "PreconditionFailed" || code == "ConditionalRequestConflict" || (code == "" && status == 412)):
		return fmt.Errorf("put %s: %w", name, storage.ErrExist)
	case op == "get" && (code == "NoSuchKey" || (code == "" && status == 404)):
		return fmt.Errorf("get %s: %w", name, storage.ErrNotExist)
	}
	var wrapped error
	if code == "NoSuchBucket" {
		wrapped = fmt.Errorf("s3store: %s %s/%s: bucket %q does not exist: %w", op, s.URL(), name, s.bucket, err)
	} else {
		wrapped = fmt.Errorf("s3store: %s %s/%s: %w", op, s.URL(), name, err)
	}
	return scrub(wrapped, s.secrets(ctx))
}

// secrets returns the credentials the store signs with, to be kept out of
// messages. The credentials cache answers from memory once a request was
// signed.
func (s *Store) secrets(ctx context.Context) []string {
	var out []string
	for _, p := range []aws.CredentialsProvider{s.creds, s.o.Credentials} {
		if p == nil {
			continue
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), scrubTimeout)
		c, err := p.Retrieve(rctx)
		cancel()
		if err != nil {
			continue
		}
		out = append(out, c.AccessKeyID, c.SecretAccessKey, c.SessionToken)
	}
	return out
}

// scrubbed is an error whose text had credentials replaced. Unwrap keeps
// errors.Is and errors.As working on the original.
type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// scrub returns err with every secret in its text replaced by "[redacted]".
func scrub(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	out := msg
	for _, s := range secrets {
		if len(s) >= 4 { // never blank out fragments like "a"
			out = strings.ReplaceAll(out, s, "[redacted]")
		}
	}
	if out == msg {
		return err
	}
	return &scrubbed{msg: out, err: err}
}
