package s3store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/onceflow/onceflow/storage"
)

// Environment variables New reads when the matching Options field is empty.
// The SDK itself also reads AWS_ENDPOINT_URL_S3 and AWS_ENDPOINT_URL, the
// credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE, roles)
// and AWS_REGION.
const (
	// EnvEndpoint overrides the S3 endpoint, e.g. http://127.0.0.1:7070.
	EnvEndpoint = "ONCEFLOW_S3_ENDPOINT"
	// EnvPathStyle set to "true" addresses buckets in the path
	// (http://host/bucket/key) instead of the host name.
	EnvPathStyle = "ONCEFLOW_S3_PATH_STYLE"
)

const (
	// DefaultPartSize is the size of one part of a multipart upload.
	DefaultPartSize = 16 << 20
	// DefaultMultipartThreshold is the object size above which an upload
	// is multipart.
	DefaultMultipartThreshold = 64 << 20
	// DefaultRegion is the region used when neither Options, the
	// environment nor the shared config names one.
	DefaultRegion = "us-east-1"

	minPartSize = 5 << 20 // S3's smallest part but the last
	maxPartSize = 5 << 30 // S3's largest part
	maxParts    = 10000   // S3's most parts in one upload
	deleteBatch = 1000    // S3's most keys in one DeleteObjects
)

// Options configures a Store. The zero value works: endpoint, region and
// credentials then come from the environment and the shared AWS config, as
// for any AWS SDK program.
type Options struct {
	// Endpoint is the S3 endpoint URL (http or https). Empty means
	// $ONCEFLOW_S3_ENDPOINT, else the SDK's own resolution
	// (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the shared config's
	// endpoint_url, else AWS).
	Endpoint string
	// PathStyle addresses the bucket in the URL path. It is also on when
	// $ONCEFLOW_S3_PATH_STYLE is "true" and when the endpoint's host is an
	// IP address or localhost, where bucket host names cannot resolve.
	PathStyle bool
	// Region is the signing region. Empty means the SDK's resolution
	// (AWS_REGION, the shared config), else DefaultRegion.
	Region string
	// PartSize is the part size of multipart uploads, at least 5 MiB.
	// Zero means DefaultPartSize.
	PartSize int64
	// MultipartThreshold is the size above which an object is uploaded in
	// parts. Zero means DefaultMultipartThreshold.
	MultipartThreshold int64
	// MaxAttempts bounds the SDK's attempts per request (retries included).
	// Zero means the SDK's default (3).
	MaxAttempts int
	// Credentials replaces the SDK's default credential chain when set.
	Credentials aws.CredentialsProvider
}

// EnsureDefaults fills in the zero fields that have a fixed default and
// applies the environment overrides. It does not read the AWS config.
func (o *Options) EnsureDefaults() {
	if o.Endpoint == "" {
		o.Endpoint = os.Getenv(EnvEndpoint)
	}
	if !o.PathStyle {
		if v, err := strconv.ParseBool(os.Getenv(EnvPathStyle)); err == nil && v {
			o.PathStyle = true
		}
	}
	if o.PartSize == 0 {
		o.PartSize = DefaultPartSize
	}
	if o.MultipartThreshold == 0 {
		o.MultipartThreshold = DefaultMultipartThreshold
	}
}

// Validate reports every problem with o at once.
func (o *Options) Validate() error {
	var errs []error
	if o.Endpoint != "" {
		if _, err := parseEndpoint(o.Endpoint); err != nil {
			errs = append(errs, err)
		}
	}
	if o.PartSize < minPartSize || o.PartSize > maxPartSize {
		errs = append(errs, fmt.Errorf("s3store: part size %d is outside [%d, %d]", o.PartSize, minPartSize, maxPartSize))
	}
	if o.MultipartThreshold < 1 {
		errs = append(errs, fmt.Errorf("s3store: multipart threshold %d is not positive", o.MultipartThreshold))
	}
	if o.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("s3store: max attempts %d is negative", o.MaxAttempts))
	}
	return errors.Join(errs...)
}

func parseEndpoint(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("s3store: endpoint %q is not an http or https URL with a host", redactURL(s))
	}
	if u.User != nil {
		return nil, fmt.Errorf("s3store: endpoint %q carries credentials; pass them through the environment or the shared AWS config", redactURL(s))
	}
	return u, nil
}

// loopbackOrIP reports whether endpoint's host is an IP address or
// localhost, where virtual-host addressing cannot work.
func loopbackOrIP(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	h := u.Hostname()
	return h == "localhost" || net.ParseIP(h) != nil
}

// redactURL drops user information and the query from a URL for a message.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if i := strings.Index(s, "://"); i >= 0 {
			return s[:i+3] + "…"
		}
		return "…"
	}
	u.User = nil
	u.RawQuery = ""
	return u.String()
}

// Open opens the store an "s3://bucket/prefix" URL names; it has the
// storage.Opener signature, for storage.Open(ctx, location,
// map[string]storage.Opener{"s3": s3store.Open}). The query may set
// endpoint (an http or https URL), path_style (true or false) and region;
// everything else comes from the environment as for New with zero Options.
// Credentials in the URL are refused: they would end up in logs.
func Open(ctx context.Context, u *url.URL) (storage.Store, error) {
	if u.Scheme != "s3" {
		return nil, fmt.Errorf("s3store: scheme %q is not s3", u.Scheme)
	}
	if u.User != nil {
		return nil, fmt.Errorf("s3store: s3://%s carries credentials in the URL; pass them through the environment or the shared AWS config", u.Host)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("s3store: %q names no bucket; use s3://bucket/prefix", redactURL(u.String()))
	}
	var o Options
	q := u.Query()
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(q)) {
		v := q.Get(k)
		switch k {
		case "endpoint":
			o.Endpoint = v
		case "region":
			o.Region = v
		case "path_style":
			b, err := strconv.ParseBool(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("s3store: s3://%s: path_style=%q is not true or false", u.Host, v))
			}
			o.PathStyle = b
		default:
			errs = append(errs, fmt.Errorf("s3store: s3://%s: unknown query parameter %q (known: endpoint, path_style, region)", u.Host, k))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s, err := New(ctx, u.Host, u.Path, o)
	if err != nil {
		return nil, err
	}
	return s, nil
}
