package main

import (
	"context"

	"github.com/onceflow/onceflow/storage"
)

// openStore opens a location given on the command line: a path, file://
// or s3:// URL.
func openStore(ctx context.Context, location string) (storage.Store, error) {
	return storage.Open(ctx, location, storageOpeners())
}
