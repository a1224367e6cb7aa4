package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/onceflow/onceflow/storage"
)

// Store is a storage.Store on an S3 bucket, below a key prefix. Safe for
// concurrent use.
type Store struct {
	client *s3.Client
	creds  aws.CredentialsProvider // for scrubbing messages; may be nil
	bucket string
	prefix string // "" or ends in "/"
	o      Options
}

var _ storage.Store = (*Store)(nil)

// New returns a store on bucket below prefix (a folder such as
// "checkpoints/q1"; slashes around it do not matter). Configuration not in o
// comes from the environment and the shared AWS config through the SDK
// (config.LoadDefaultConfig): credentials, roles, region, endpoint; the
// SDK's retries apply to every request. New makes no request: a missing
// bucket or bad credentials show at the first operation.
func New(ctx context.Context, bucket, prefix string, o Options) (*Store, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if bucket == "" || strings.ContainsAny(bucket, "/\\ ") {
		return nil, fmt.Errorf("s3store: bad bucket name %q", bucket)
	}
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		if err := storage.ValidateName(prefix); err != nil {
			return nil, fmt.Errorf("s3store: prefix of s3://%s: %w", bucket, err)
		}
		prefix += "/"
	}

	var loads []func(*config.LoadOptions) error
	if o.Region != "" {
		loads = append(loads, config.WithRegion(o.Region))
	}
	if o.Credentials != nil {
		loads = append(loads, config.WithCredentialsProvider(o.Credentials))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return nil, fmt.Errorf("s3store: load AWS config for s3://%s: %w", bucket, scrub(err, nil))
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	client := s3.NewFromConfig(cfg, func(so *s3.Options) {
		// The client has resolved AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL
		// and the shared config's endpoint_url by now.
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		so.UsePathStyle = o.PathStyle || (so.BaseEndpoint != nil && loopbackOrIP(*so.BaseEndpoint))
		so.Retryer = retry.AddWithErrorCodes(so.Retryer, "ConditionalRequestConflict")
		if o.MaxAttempts > 0 {
			so.Retryer = retry.AddWithMaxAttempts(so.Retryer, o.MaxAttempts)
		}
	})
	return &Store{client: client, creds: cfg.Credentials, bucket: bucket, prefix: prefix, o: o}, nil
}

// Bucket returns the bucket the store lives in.
func (s *Store) Bucket() string { return s.bucket }

// Prefix returns the key prefix of the store: "" or a folder ending in "/".
func (s *Store) Prefix() string { return s.prefix }

// URL implements storage.Store: s3://bucket/prefix, without credentials or
// endpoint.
func (s *Store) URL() string {
	return "s3://" + s.bucket + "/" + strings.TrimSuffix(s.prefix, "/")
}

// Close implements storage.Store. The store holds nothing that needs
// releasing today; call it anyway.
func (s *Store) Close() error { return nil }

func (s *Store) key(name string) (string, error) {
	if err := storage.ValidateName(name); err != nil {
		return "", err
	}
	return s.prefix + name, nil
}

// PutIfAbsent implements storage.Store with a conditional create:
// PutObject (or, above the multipart threshold, CompleteMultipartUpload)
// with "If-None-Match: *". The server decides the race; 412
// PreconditionFailed, and 409 ConditionalRequestConflict once the SDK's
// retries of it are spent, become storage.ErrExist.
func (s *Store) PutIfAbsent(ctx context.Context, name string, data []byte) error {
	key, err := s.key(name)
	if err != nil {
		return err
	}
	if err := s.upload(ctx, key, data, true); err != nil {
		return s.fail(ctx, "put", name, err)
	}
	return nil
}

// Put implements storage.Store with one PutObject (or a multipart upload):
// S3 shows the object only once the upload completed, so a reader sees the
// old object or the new one.
func (s *Store) Put(ctx context.Context, name string, data []byte) error {
	key, err := s.key(name)
	if err != nil {
		return err
	}
	if err := s.upload(ctx, key, data, false); err != nil {
		return s.fail(ctx, "put", name, err)
	}
	return nil
}

func (s *Store) upload(ctx context.Context, key string, data []byte, ifAbsent bool) error {
	if int64(len(data)) > s.o.MultipartThreshold {
		return s.uploadParts(ctx, key, data, ifAbsent)
	}
	in := &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	}
	if ifAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	_, err := s.client.PutObject(ctx, in)
	return err
}

// uploadParts uploads data in parts of PartSize, a few at a time, and
// completes the upload (conditionally for put-if-absent). On failure it
// aborts the upload so no parts are left to pay for.
func (s *Store) uploadParts(ctx context.Context, key string, data []byte, ifAbsent bool) (err error) {
	n := (int64(len(data)) + s.o.PartSize - 1) / s.o.PartSize
	if n > maxParts {
		return fmt.Errorf("object of %d bytes needs %d parts of %d bytes, more than S3's %d; raise Options.PartSize", len(data), n, s.o.PartSize, maxParts)
	}
	created, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(key),
	})
	if err != nil {
		return err
	}
	id := created.UploadId
	defer func() {
		if err == nil {
			return
		}
		// Abort even when ctx is done; the upload id is useless to anyone else.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
		defer cancel()
		_, aerr := s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{
			Bucket: aws.String(s.bucket), Key: aws.String(key), UploadId: id,
		})
		if aerr != nil {
			err = errors.Join(err, fmt.Errorf("abort multipart upload: %w", aerr))
		}
	}()

	parts := make([]types.CompletedPart, n)
	errs := make([]error, n)
	sem := make(chan struct{}, partConcurrency)
	var wg sync.WaitGroup
	for i := range n {
		lo := i * s.o.PartSize
		hi := min(lo+s.o.PartSize, int64(len(data)))
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			num := int32(i + 1)
			out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
				Bucket:        aws.String(s.bucket),
				Key:           aws.String(key),
				UploadId:      id,
				PartNumber:    aws.Int32(num),
				Body:          bytes.NewReader(data[lo:hi]),
				ContentLength: aws.Int64(hi - lo),
			})
			if err != nil {
				errs[i] = fmt.Errorf("upload part %d of %d: %w", num, n, err)
				return
			}
			parts[i] = types.CompletedPart{PartNumber: aws.Int32(num), ETag: out.ETag}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	in := &s3.CompleteMultipartUploadInput{
		Bucket:          aws.String(s.bucket),
		Key:             aws.String(key),
		UploadId:        id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}
	if ifAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	_, err = s.client.CompleteMultipartUpload(ctx, in)
	return err
}

// Get implements storage.Store.
func (s *Store) Get(ctx context.Context, name string) ([]byte, error) {
	key, err := s.key(name)
	if err != nil {
		return nil, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		return nil, s.fail(ctx, "get", name, err)
	}
	defer func() { _ = out.Body.Close() }()
	var buf bytes.Buffer
	if out.ContentLength != nil && *out.ContentLength > 0 {
		buf.Grow(int(*out.ContentLength))
	}
	if _, err := buf.ReadFrom(out.Body); err != nil {
		return nil, s.fail(ctx, "read", name, err)
	}
	if out.ContentLength != nil && int64(buf.Len()) != *out.ContentLength {
		return nil, fmt.Errorf("s3store: read %s/%s: got %d bytes of %d", s.URL(), name, buf.Len(), *out.ContentLength)
	}
	return buf.Bytes(), nil
}

// List implements storage.Store with ListObjectsV2, page by page. Keys
// below the prefix that are not valid object names (folder markers ending
// in "/", for instance) are not objects of this store and are left out.
func (s *Store) List(ctx context.Context, prefix string) ([]storage.ObjectInfo, error) {
	if err := storage.ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	var out []storage.ObjectInfo
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket),
		Prefix: aws.String(s.prefix + prefix),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.fail(ctx, "list", prefix, err)
		}
		for _, obj := range page.Contents {
			name, ok := strings.CutPrefix(aws.ToString(obj.Key), s.prefix)
			if !ok || storage.ValidateName(name) != nil {
				continue
			}
			info := storage.ObjectInfo{Name: name, Size: aws.ToInt64(obj.Size)}
			if obj.LastModified != nil {
				info.ModTime = obj.LastModified.UnixNano()
			}
			out = append(out, info)
		}
	}
	// S3 lists in UTF-8 byte order already; not every S3 server does.
	slices.SortFunc(out, func(a, b storage.ObjectInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Delete implements storage.Store with DeleteObjects, 1000 keys a request.
// Every key the server could not delete is reported.
func (s *Store) Delete(ctx context.Context, names ...string) error {
	keys := make([]string, 0, len(names))
	for _, n := range names {
		k, err := s.key(n)
		if err != nil {
			return err
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	var errs []error
	for chunk := range slices.Chunk(keys, deleteBatch) {
		ids := make([]types.ObjectIdentifier, len(chunk))
		for i, k := range chunk {
			ids[i] = types.ObjectIdentifier{Key: aws.String(k)}
		}
		out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: aws.String(s.bucket),
			Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		})
		if err != nil {
			return errors.Join(append(errs, s.fail(ctx, "delete", fmt.Sprintf("%d objects from %s", len(chunk), strings.TrimPrefix(chunk[0], s.prefix)), err))...)
		}
		for _, e := range out.Errors {
			if aws.ToString(e.Code) == "NoSuchKey" {
				continue
			}
			errs = append(errs, s.fail(ctx, "delete", strings.TrimPrefix(aws.ToString(e.Key), s.prefix),
				fmt.Errorf("%s: %s", aws.ToString(e.Code), aws.ToString(e.Message))))
		}
	}
	return errors.Join(errs...)
}
