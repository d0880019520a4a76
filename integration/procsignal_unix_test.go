//go:build unix

package integration

import (
	"os"
	"syscall"
)

// freeze stops p with SIGSTOP: its sockets stay open, but it neither
// sends nor answers anything until thaw.
func freeze(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }

// thaw resumes a process stopped by freeze (SIGCONT).
func thaw(p *os.Process) error { return p.Signal(syscall.SIGCONT) }

// nofileLimit is this process's soft and hard limits of open files.
func nofileLimit() (soft, hard uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, err
	}
	return uint64(lim.Cur), uint64(lim.Max), nil
}

// setNofileSoft sets this process's soft limit of open files to soft,
// under its hard limit.
func setNofileSoft(soft uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	lim.Cur = soft
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
}
