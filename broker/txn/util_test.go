package txn

import (
	"errors"
	"log/slog"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
