package main

import (
	"github.com/onceflow/onceflow/storage"
	"github.com/onceflow/onceflow/storage/s3store"
)

// storageOpeners lists the URL schemes beyond file paths: s3://bucket/prefix
// (credentials and endpoint from the standard AWS environment and
// ONCEFLOW_S3_ENDPOINT; see package s3store).
func storageOpeners() map[string]storage.Opener {
	return map[string]storage.Opener{"s3": s3store.Open}
}
