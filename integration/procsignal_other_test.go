//go:build !unix

package integration

import (
	"errors"
	"os"
)

// The process tests that freeze a node or change the limit of open files
// need a Unix system: here these helpers fail, and those tests with them.
var errNotUnix = errors.New("needs a Unix system")

func freeze(p *os.Process) error { return errNotUnix }

func thaw(p *os.Process) error { return errNotUnix }

func nofileLimit() (soft, hard uint64, err error) { return 0, 0, errNotUnix }

func setNofileSoft(soft uint64) error { return errNotUnix }
