package logging

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// newLevels returns Levels writing text records to a buffer, with root at
// INFO as a broker starts.
func newLevels() (*Levels, *bytes.Buffer) {
	var buf bytes.Buffer
	inner := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: LevelTrace})
	return New(inner, slog.LevelInfo), &buf
}

func TestParseAndNameLevels(t *testing.T) {
	for _, c := range []struct {
		name  string
		level slog.Level
		ok    bool
	}{
		{"TRACE", LevelTrace, true}, {"DEBUG", slog.LevelDebug, true}, {"INFO", slog.LevelInfo, true},
		{"WARN", slog.LevelWarn, true}, {"ERROR", slog.LevelError, true}, {"FATAL", LevelFatal, true},
		{"debug", 0, false}, {"OFF", 0, false}, {"ALL", 0, false}, {"", 0, false}, {"WARNING", 0, false},
	} {
		l, ok := ParseLevel(c.name)
		if ok != c.ok || (ok && l != c.level) {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v, %v", c.name, l, ok, c.level, c.ok)
		}
		if ok && LevelName(l) != c.name {
			t.Errorf("LevelName(%v) = %q, want %q", l, LevelName(l), c.name)
		}
	}
	// Between two names, the lower one: what the level lets through.
	if got := LevelName(slog.LevelInfo + 2); got != "INFO" {
		t.Errorf("LevelName(INFO+2) = %q", got)
	}
	if got := LevelName(LevelTrace - 10); got != "TRACE" {
		t.Errorf("LevelName(below TRACE) = %q", got)
	}
	if got := LevelName(LevelFatal + 10); got != "FATAL" {
		t.Errorf("LevelName(above FATAL) = %q", got)
	}
}

func TestLevelsTakeEffect(t *testing.T) {
	lv, buf := newLevels()
	h := lv.Logger("cascade.handler")
	h.Debug("hidden")
	if buf.Len() != 0 {
		t.Fatalf("debug written at INFO: %q", buf)
	}
	if err := lv.Set("cascade.handler", "DEBUG"); err != nil {
		t.Fatal(err)
	}
	h.Debug("shown", "k", 1)
	if !strings.Contains(buf.String(), "level=DEBUG msg=shown logger=cascade.handler k=1") {
		t.Fatalf("after SET DEBUG: %q", buf)
	}
	// A logger derived with attributes or a group follows the level too.
	buf.Reset()
	d := h.With("partition", 3).WithGroup("g")
	d.Debug("derived")
	if err := lv.Unset("cascade.handler"); err != nil {
		t.Fatal(err)
	}
	d.Debug("hidden again")
	h.Debug("hidden again")
	h.Info("info")
	if got := buf.String(); strings.Count(got, "\n") != 2 || !strings.Contains(got, "msg=derived") || !strings.Contains(got, "msg=info") {
		t.Fatalf("after DELETE: %q", got)
	}
}

func TestLevelsHierarchy(t *testing.T) {
	lv, _ := newLevels()
	for _, n := range []string{"cascade", "cascade.group", "cascade.group.classic", "cascade.groupx", "other"} {
		lv.Logger(n)
	}
	want := func(step string, kv ...string) {
		t.Helper()
		got := lv.Describe()
		for i := 0; i+1 < len(kv); i += 2 {
			if got[kv[i]] != kv[i+1] {
				t.Errorf("%s: %s = %s, want %s (all %v)", step, kv[i], got[kv[i]], kv[i+1], got)
			}
		}
	}
	want("start", "root", "INFO", "cascade", "INFO", "cascade.group.classic", "INFO", "other", "INFO")
	// Setting a level sets it on the logger and its descendants, not on a
	// logger whose name merely starts with the same letters.
	must(t, lv.Set("cascade.group", "TRACE"))
	want("set group", "cascade", "INFO", "cascade.group", "TRACE", "cascade.group.classic", "TRACE", "cascade.groupx", "INFO")
	must(t, lv.Set("cascade", "WARN"))
	want("set cascade", "cascade", "WARN", "cascade.group", "WARN", "cascade.group.classic", "WARN", "cascade.groupx", "WARN", "other", "INFO")
	// Removing falls back to the nearest ancestor with a level.
	must(t, lv.Set("cascade.group.classic", "DEBUG"))
	must(t, lv.Unset("cascade.group"))
	want("unset group", "cascade.group", "WARN", "cascade.group.classic", "WARN")
	must(t, lv.Unset("cascade"))
	want("unset cascade", "cascade", "INFO", "cascade.group.classic", "INFO")
	// Root's level is every logger's after a SET of root.
	must(t, lv.Set("other", "ERROR"))
	must(t, lv.Set(RootLogger, "DEBUG"))
	want("set root", "root", "DEBUG", "other", "DEBUG", "cascade.groupx", "DEBUG")
	// A logger created later takes its ancestor's level.
	lv.Logger("cascade.group.consumer")
	want("new logger", "cascade.group.consumer", "DEBUG")
	if got := fmt.Sprint(lv.Names()); got != "[cascade cascade.group cascade.group.classic cascade.group.consumer cascade.groupx other root]" {
		t.Errorf("names %s", got)
	}
}

func TestLevelsRefusals(t *testing.T) {
	lv, _ := newLevels()
	lv.Logger("cascade.wire")
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"set unknown logger", lv.Set("no.such", "INFO"), ErrUnknownLogger},
		{"check unknown logger", lv.CheckSet("no.such", "INFO"), ErrUnknownLogger},
		{"set ancestor that is not a logger", lv.Set("cascade", "INFO"), ErrUnknownLogger},
		{"set bad level", lv.Set("cascade.wire", "VERBOSE"), ErrUnknownLevel},
		{"check bad level", lv.CheckSet("cascade.wire", "info"), ErrUnknownLevel},
		{"unset root", lv.Unset(RootLogger), ErrRootLevel},
		{"check unset root", lv.CheckUnset(RootLogger), ErrRootLevel},
		{"unset unknown", lv.Unset("no.such"), ErrUnknownLogger},
		{"check unset unknown", lv.CheckUnset("no.such"), ErrUnknownLogger},
		{"check set ok", lv.CheckSet("cascade.wire", "TRACE"), nil},
		{"check unset ok", lv.CheckUnset("cascade.wire"), nil},
	} {
		if !errors.Is(c.err, c.want) || (c.want == nil && c.err != nil) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	if got := lv.Describe(); got["cascade.wire"] != "INFO" || got[RootLogger] != "INFO" || len(got) != 2 {
		t.Errorf("refusals changed levels: %v", got)
	}
}

func TestAttach(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	lv := Attach(base)
	if got := lv.Describe()[RootLogger]; got != "WARN" {
		t.Fatalf("root from the handler's level: %s", got)
	}
	l := lv.Logger("x")
	if Attach(l) != lv || Attach(l.With("a", 1)) != lv {
		t.Fatal("Attach of a named logger returns other Levels")
	}
	l.Info("hidden")
	must(t, lv.Set("x", "INFO"))
	l.Info("shown")
	if got := buf.String(); strings.Contains(got, "hidden") || !strings.Contains(got, "shown") {
		t.Fatalf("log %q", got)
	}
	if got := Attach(slog.New(slog.DiscardHandler)).Describe()[RootLogger]; got != "FATAL" {
		t.Errorf("a handler writing nothing: root %s", got)
	}
}

func TestLevelsConcurrent(t *testing.T) {
	lv, _ := newLevels()
	l := lv.Logger("a.b")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 1000; i++ {
			l.Debug("x")
			lv.Describe()
		}
	}()
	for i := 0; i < 1000; i++ {
		must(t, lv.Set("a.b", "TRACE"))
		must(t, lv.Unset("a.b"))
		lv.Logger(fmt.Sprintf("a.b.c%d", i%10))
	}
	<-done
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
