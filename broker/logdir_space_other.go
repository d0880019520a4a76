//go:build !linux && !darwin && !freebsd && !windows

package broker

// dirSpace is unknown (-1, as Kafka's UNKNOWN_VOLUME_BYTES) where the
// broker has no call for a filesystem's size.
func dirSpace(dir string) (total, usable int64, err error) {
	return -1, -1, nil
}
