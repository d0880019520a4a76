//go:build !linux

package storage

import "errors"

func evictFromCache(string) error { return errors.New("evicting from the page cache is Linux only") }
