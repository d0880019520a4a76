//go:build unix

package storage

import "syscall"

// openFileLimit is the process's descriptor limit (RLIMIT_NOFILE, the
// soft one, which the Go runtime raises to the hard one at start), 0 when
// it cannot be read.
func openFileLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return lim.Cur
}
