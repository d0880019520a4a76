package raftnode

import (
	"context"
	"fmt"
	"log/slog"
)

// raftLogger sends etcd raft's log lines to slog. raft's Fatal and Panic
// mean a broken invariant; both panic here rather than exit the process,
// so the owner of the node decides.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) out(level slog.Level, msg string) {
	r.l.Log(context.Background(), level, msg, "component", "raft")
}

func (r raftLogger) Debug(v ...any) { r.out(slog.LevelDebug, fmt.Sprint(v...)) }
func (r raftLogger) Debugf(format string, v ...any) {
	r.out(slog.LevelDebug, fmt.Sprintf(format, v...))
}

// raft's Info lines (elections, configuration) are Debug here: the node logs
// what an operator needs (becoming the active controller) itself.
func (r raftLogger) Info(v ...any)                 { r.out(slog.LevelDebug, fmt.Sprint(v...)) }
func (r raftLogger) Infof(format string, v ...any) { r.out(slog.LevelDebug, fmt.Sprintf(format, v...)) }
func (r raftLogger) Warning(v ...any)              { r.out(slog.LevelWarn, fmt.Sprint(v...)) }
func (r raftLogger) Warningf(format string, v ...any) {
	r.out(slog.LevelWarn, fmt.Sprintf(format, v...))
}
func (r raftLogger) Error(v ...any) { r.out(slog.LevelError, fmt.Sprint(v...)) }
func (r raftLogger) Errorf(format string, v ...any) {
	r.out(slog.LevelError, fmt.Sprintf(format, v...))
}
func (r raftLogger) Fatal(v ...any)                 { r.Panic(v...) }
func (r raftLogger) Fatalf(format string, v ...any) { r.Panicf(format, v...) }
func (r raftLogger) Panic(v ...any) {
	s := fmt.Sprint(v...)
	r.out(slog.LevelError, s)
	panic(s)
}
func (r raftLogger) Panicf(format string, v ...any) {
	s := fmt.Sprintf(format, v...)
	r.out(slog.LevelError, s)
	panic(s)
}
