// Package s3fault is a fault-injecting HTTP reverse proxy for S3 tests: it
// sits on a loopback port in front of one S3 server (versitygw in the
// tests) and, for the requests its rules pick, answers 500 InternalError
// or 503 SlowDown, resets the connection in the middle of a body, stalls
// (10 s unless told), or performs the request and then loses the answer.
// Every other request passes unchanged, Host header included, so SigV4
// signatures made for the proxy's address verify at the server.
//
// Rules select by method and a glob over the object key (the path after
// the bucket, path-style addressing), then by position (Nth, Times) or by
// a probability drawn from the seed and the request's identity. SetRules
// replaces them at any time (no rules: the fault clears); Events lists
// what was done.
//
// Lifecycle: Start, point a client at URL, SetRules, Close. Safe for
// concurrent use. Only tests use it.
package s3fault
