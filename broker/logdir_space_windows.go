package broker

import (
	"fmt"

	"golang.org/x/sys/windows"
)

// dirSpace is the total and usable bytes of the volume holding dir.
func dirSpace(dir string) (total, usable int64, err error) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return -1, -1, fmt.Errorf("disk space of %s: %w", dir, err)
	}
	var avail, all, free uint64
	if err := windows.GetDiskFreeSpaceEx(p, &avail, &all, &free); err != nil {
		return -1, -1, fmt.Errorf("disk space of %s: %w", dir, err)
	}
	return int64(all), int64(avail), nil
}
