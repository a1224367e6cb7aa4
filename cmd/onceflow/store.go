package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/onceflow/onceflow/storage"
)

// openStore opens a location given on the command line: a path, file://
// or s3:// URL. A local directory is created if missing (for commands that
// write: demo, fork's destination).
func openStore(ctx context.Context, location string) (storage.Store, error) {
	return storage.Open(ctx, location, storageOpeners())
}

// openExisting opens a location a read-only command inspects. A local
// path that does not exist is an error naming it (a typo must not read as
// an empty checkpoint or lake, nor create a directory).
func openExisting(ctx context.Context, location string) (storage.Store, error) {
	dir := ""
	switch {
	case !strings.Contains(location, "://"):
		dir = location
	case strings.HasPrefix(location, "file://"):
		if u, err := url.Parse(location); err == nil && u.User == nil {
			dir = u.Path
		}
	}
	if dir != "" {
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
		st, err := os.Stat(dir)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", dir, err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("open %s: not a directory", dir)
		}
	}
	return openStore(ctx, location)
}
