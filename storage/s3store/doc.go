// Package s3store is the S3 backend of package storage: a storage.Store on a
// bucket below a key prefix, built on aws-sdk-go-v2. It is the only package
// of onceflow that imports the AWS SDK.
//
// # Opening
//
// New(ctx, bucket, prefix, Options{}) or, through a location,
//
//	storage.Open(ctx, "s3://bucket/prefix", map[string]storage.Opener{"s3": s3store.Open})
//
// Credentials, region and endpoint come as for any AWS SDK program
// (config.LoadDefaultConfig: the environment, the shared config and
// credentials files, SSO, web identity and instance roles). ONCEFLOW_S3_ENDPOINT
// and ONCEFLOW_S3_PATH_STYLE=true, or the URL query
// ?endpoint=http://127.0.0.1:PORT&path_style=true, point it at another S3
// server; the SDK's own AWS_ENDPOINT_URL_S3 and AWS_ENDPOINT_URL work too.
// Credentials in the URL are refused. New makes no request.
//
// # Guarantees and how
//
//   - PutIfAbsent is a conditional create, PutObject with "If-None-Match: *":
//     the server decides the race, so exactly one of any number of writers,
//     in any number of processes, succeeds. 412 PreconditionFailed means
//     storage.ErrExist; 409 ConditionalRequestConflict (a concurrent
//     conditional write in flight) is retried by the SDK and, if it
//     persists, also reported as storage.ErrExist. The SDK retries a request
//     whose answer was lost; if the first attempt had stored the object, the
//     retry gets 412 and the caller whose bytes are stored sees ErrExist
//     (package storage documents this; compare the stored bytes to tell).
//   - Put is one PutObject. Objects above Options.MultipartThreshold (64 MiB)
//     are uploaded in parts of Options.PartSize (16 MiB), four at a time, and
//     appear only when CompleteMultipartUpload succeeds, which carries the
//     same condition for PutIfAbsent; a failed upload is aborted.
//   - No rename is used anywhere: S3 has none.
//   - Get maps NoSuchKey (404) to storage.ErrNotExist; a missing bucket is
//     a different error naming it.
//   - List pages through ListObjectsV2 and returns names sorted; keys below
//     the prefix that are not valid object names (folder markers ending in
//     "/") are not objects of the store and are skipped.
//   - Delete sends DeleteObjects with up to 1000 keys a request and reports
//     every key the server could not delete.
//   - No error text carries the access key, secret or session token: every
//     error is scrubbed of the credentials the store signs with. URL returns
//     s3://bucket/prefix only.
//
// # Servers
//
// The tests run against versitygw v1.8.0 (scripts/s3-server.sh), whose posix
// backend honours "If-None-Match: *" on PutObject and on
// CompleteMultipartUpload, checked under a per-key lock, and answers 412
// when the key exists. Its check reads the object's ETag extended attribute,
// so the gateway must not run with --nometa, and files placed in its
// directory by other means count as absent.
//
// A Store is safe for concurrent use. Close releases nothing today but
// must still be called.
package s3store
