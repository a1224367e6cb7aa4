package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceflow/onceflow/storage/s3store"
)

// S3EnvVar names the environment variable holding the endpoint of the S3
// server the tests may use (scripts/s3-server.sh start prints it, with the
// credentials and region).
const S3EnvVar = "ONCEFLOW_TEST_S3_ENDPOINT"

const s3HowTo = "S3 tests need an S3 server: run `eval \"$(scripts/s3-server.sh start)\"` " +
	"(or run scripts/s3-server.sh start and export the printed variables: " +
	S3EnvVar + ", AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION)"

// RequireServicesEnvVar, set to 1 (as CI does), turns the skip of a test
// whose service is not configured into a failure, so a CI run cannot pass by
// skipping.
const RequireServicesEnvVar = "ONCEFLOW_REQUIRE_SERVICES"

// SkipMissing skips the test with howTo, or fails it when
// ONCEFLOW_REQUIRE_SERVICES=1. For helpers whose service is not configured.
func SkipMissing(t testing.TB, howTo string) {
	t.Helper()
	if os.Getenv(RequireServicesEnvVar) == "1" {
		t.Fatalf("%s=1 but the service is not configured: %s", RequireServicesEnvVar, howTo)
	}
	t.Skip(howTo)
}

// S3Location is a fresh bucket of the test S3 server, described so that this
// process or a child process can open it.
type S3Location struct {
	// Bucket is the bucket's name, unique to the test.
	Bucket string
	// URL opens the bucket with storage.Open and s3store.Open:
	// s3://BUCKET?endpoint=...&path_style=true. It holds no credential.
	URL string
	// Env is what a child process needs in its environment besides URL:
	// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, and
	// ONCEFLOW_S3_ENDPOINT and ONCEFLOW_S3_PATH_STYLE for code that
	// builds an s3:// location without the query. Append it to os.Environ().
	Env []string
	// Options are the s3store.Options that reach the server.
	Options s3store.Options
}

// S3Bucket creates a bucket of its own for the test on the server
// ONCEFLOW_TEST_S3_ENDPOINT names, and skips the test when that is unset.
// When the test ends the bucket is emptied and removed, unless the test
// failed: then it is left for inspection and its name logged.
func S3Bucket(t testing.TB) S3Location {
	t.Helper()
	endpoint := os.Getenv(S3EnvVar)
	if endpoint == "" {
		SkipMissing(t, s3HowTo)
	}
	if _, err := url.Parse(endpoint); err != nil {
		t.Fatalf("%s=%q is not a URL", S3EnvVar, endpoint)
	}
	access, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if access == "" || secret == "" {
		t.Fatalf("%s is set but AWS_ACCESS_KEY_ID or AWS_SECRET_ACCESS_KEY is not; %s", S3EnvVar, s3HowTo)
	}
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = s3store.DefaultRegion
	}
	bucket := s3BucketName(t.Name())
	loc := S3Location{
		Bucket: bucket,
		URL:    "s3://" + bucket + "?" + url.Values{"endpoint": {endpoint}, "path_style": {"true"}}.Encode(),
		Env: []string{
			"AWS_ACCESS_KEY_ID=" + access,
			"AWS_SECRET_ACCESS_KEY=" + secret,
			"AWS_REGION=" + region,
			s3store.EnvEndpoint + "=" + endpoint,
			s3store.EnvPathStyle + "=true",
		},
		Options: s3store.Options{Endpoint: endpoint, PathStyle: true, Region: region},
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := s3Client(ctx, endpoint, region)
	if err != nil {
		t.Fatalf("S3 client for %s: %v", endpoint, err)
	}
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s at %s: %v", bucket, endpoint, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("left bucket %s at %s for inspection", bucket, endpoint)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := s3EmptyBucket(ctx, client, bucket); err != nil {
			t.Errorf("empty bucket %s: %v", bucket, err)
			return
		}
		if _, err := client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)}); err != nil {
			t.Errorf("delete bucket %s: %v", bucket, err)
		}
	})
	return loc
}

// S3 returns a store on a fresh bucket of the test S3 server (see
// S3Bucket), closed when the test ends; it skips the test when
// ONCEFLOW_TEST_S3_ENDPOINT is unset.
func S3(t testing.TB) *s3store.Store {
	t.Helper()
	loc := S3Bucket(t)
	s, err := s3store.New(context.Background(), loc.Bucket, "", loc.Options)
	if err != nil {
		t.Fatalf("open %s: %v", loc.URL, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func s3Client(ctx context.Context, endpoint, region string) (*s3.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(region))
	if err != nil {
		return nil, err
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
	}), nil
}

// s3EmptyBucket deletes every object and unfinished upload in bucket.
func s3EmptyBucket(ctx context.Context, client *s3.Client, bucket string) error {
	p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, o := range page.Contents {
			if _, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: o.Key}); err != nil {
				return err
			}
		}
	}
	ups, err := client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		return err
	}
	for _, u := range ups.Uploads {
		if _, err := client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
			Bucket: aws.String(bucket), Key: u.Key, UploadId: u.UploadId,
		}); err != nil {
			return err
		}
	}
	return nil
}

// s3BucketName makes a valid, unique bucket name from a test name:
// lowercase letters, digits and single hyphens, at most 63 characters.
func s3BucketName(test string) string {
	var b strings.Builder
	b.WriteString("of-")
	dash := true
	for _, r := range strings.ToLower(test) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
			dash = false
		case !dash:
			b.WriteByte('-')
			dash = true
		}
	}
	name := strings.TrimSuffix(b.String(), "-")
	if len(name) > 44 {
		name = strings.TrimSuffix(name[:44], "-")
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	return name + "-" + hex.EncodeToString(rnd[:])
}
