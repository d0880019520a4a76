package coord

import "log/slog"

// Logger is a coordinator's logger: log, or slog.Default when nil, with
// the coordinator's component attribute ("group-coordinator").
func Logger(log *slog.Logger, component string) *slog.Logger {
	if log == nil {
		log = slog.Default()
	}
	return log.With("component", component)
}
