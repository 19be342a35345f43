package quorum

import (
	"context"
	"fmt"
	"log/slog"
	"os"
)

// raftLogger adapts a *slog.Logger to raft.Logger.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) log(level slog.Level, msg string) {
	r.l.Log(context.Background(), level, msg, "component", "raft")
}

func (r raftLogger) Debug(v ...any) { r.log(slog.LevelDebug, fmt.Sprint(v...)) }
func (r raftLogger) Debugf(format string, v ...any) {
	r.log(slog.LevelDebug, fmt.Sprintf(format, v...))
}
func (r raftLogger) Info(v ...any)                 { r.log(slog.LevelInfo, fmt.Sprint(v...)) }
func (r raftLogger) Infof(format string, v ...any) { r.log(slog.LevelInfo, fmt.Sprintf(format, v...)) }
func (r raftLogger) Warning(v ...any)              { r.log(slog.LevelWarn, fmt.Sprint(v...)) }
func (r raftLogger) Warningf(format string, v ...any) {
	r.log(slog.LevelWarn, fmt.Sprintf(format, v...))
}
func (r raftLogger) Error(v ...any) { r.log(slog.LevelError, fmt.Sprint(v...)) }
func (r raftLogger) Errorf(format string, v ...any) {
	r.log(slog.LevelError, fmt.Sprintf(format, v...))
}

// Fatal logs and exits, as raft.Logger requires; raft calls it only on
// broken invariants.
func (r raftLogger) Fatal(v ...any) { r.log(slog.LevelError, fmt.Sprint(v...)); os.Exit(1) }

// Fatalf logs and exits.
func (r raftLogger) Fatalf(format string, v ...any) {
	r.log(slog.LevelError, fmt.Sprintf(format, v...))
	os.Exit(1)
}

// Panic logs and panics.
func (r raftLogger) Panic(v ...any) { s := fmt.Sprint(v...); r.log(slog.LevelError, s); panic(s) }

// Panicf logs and panics.
func (r raftLogger) Panicf(format string, v ...any) {
	s := fmt.Sprintf(format, v...)
	r.log(slog.LevelError, s)
	panic(s)
}
