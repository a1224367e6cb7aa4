package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/onceflow/onceflow/storage"
)

// GetRange implements storage.RangeGetter with one ranged GetObject. A
// range that starts at or past the object's end reads nothing (S3 answers
// it with InvalidRange).
func (s *Store) GetRange(ctx context.Context, name string, off, n int64) ([]byte, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("s3store: read %s/%s: bad range %d+%d", s.URL(), name, off, n)
	}
	key, err := s.key(name)
	if err != nil {
		return nil, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(key),
		// A range of no bytes cannot be asked for: ask for one and drop
		// it, so that a missing object is still reported.
		Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+max(n, 1)-1)),
	})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "InvalidRange" {
			return nil, nil
		}
		return nil, s.fail(ctx, "get", name, err)
	}
	defer func() { _ = out.Body.Close() }()
	if n == 0 {
		return nil, nil
	}
	var buf bytes.Buffer
	if out.ContentLength != nil && *out.ContentLength > 0 {
		buf.Grow(int(*out.ContentLength))
	}
	if _, err := buf.ReadFrom(out.Body); err != nil {
		return nil, s.fail(ctx, "read", name, err)
	}
	if int64(buf.Len()) > n {
		return nil, fmt.Errorf("s3store: read %s/%s: asked for %d bytes from %d, got %d", s.URL(), name, n, off, buf.Len())
	}
	return buf.Bytes(), nil
}

var _ storage.RangeGetter = (*Store)(nil)
