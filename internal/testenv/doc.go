// Package testenv gives tests the external services they need, each on
// demand and each skipping the test, with a message saying how to enable it,
// when its environment variable is unset. Nothing here is used outside
// tests; every helper takes a testing.TB and registers its own cleanup.
//
// The environment variables:
//
//	ONCEFLOW_TEST_S3_ENDPOINT  S3 endpoint, e.g. http://127.0.0.1:PORT, with
//	AWS_ACCESS_KEY_ID          the credentials and
//	AWS_SECRET_ACCESS_KEY
//	AWS_REGION                 region (us-east-1 when unset).
//	                           `eval "$(scripts/s3-server.sh start)"` starts
//	                           versitygw on loopback and sets all four;
//	                           scripts/s3-server.sh stop ends it.
//	                           S3Bucket makes a fresh bucket per test, S3 a
//	                           store on one; S3Location carries the s3:// URL
//	                           and environment a child process needs.
//	ONCEFLOW_TEST_PG_URL       PostgreSQL database URL; scripts/pg-setup.sh
//	                           prints it. PGURL gives each test its own schema.
//
//	ONCEFLOW_REQUIRE_SERVICES  1 makes a helper fail the test instead of
//	                           skipping it when its service is not configured
//	                           (CI sets it); see SkipMissing.
//
// Kafka needs no variable: Kafka starts an in-process kfake cluster.
//
// Credentials read here are passed to the services and to child processes'
// environments only; no helper prints them.
package testenv
