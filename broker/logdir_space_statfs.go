//go:build linux || darwin || freebsd

package broker

import (
	"fmt"
	"syscall"
)

// dirSpace is the total and usable bytes of the filesystem holding dir.
// statfs's field types differ between systems (int64 on Linux, uint32
// on darwin), hence the conversions.
func dirSpace(dir string) (total, usable int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1, -1, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return int64(st.Blocks) * int64(st.Bsize), int64(st.Bavail) * int64(st.Bsize), nil
}
