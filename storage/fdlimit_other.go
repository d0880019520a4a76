//go:build !unix

package storage

// openFileLimit is 0 where the descriptor limit is not an rlimit: the
// segment file bound keeps its fixed default there.
func openFileLimit() uint64 { return 0 }
