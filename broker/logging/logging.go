package logging

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// RootLogger is the name of the logger every other inherits from. Kafka
// keeps log4j 1's name for it (Log4jController.ROOT_LOGGER).
const RootLogger = "root"

// LevelTrace and LevelFatal are the slog levels of log4j's TRACE and FATAL,
// which slog does not name.
const (
	LevelTrace = slog.LevelDebug - 4
	LevelFatal = slog.LevelError + 4
)

// levelNames lists the log4j levels Kafka accepts, lowest first.
var levelNames = []struct {
	name  string
	level slog.Level
}{
	{"TRACE", LevelTrace},
	{"DEBUG", slog.LevelDebug},
	{"INFO", slog.LevelInfo},
	{"WARN", slog.LevelWarn},
	{"ERROR", slog.LevelError},
	{"FATAL", LevelFatal},
}

// ValidLevels is the sorted, comma-separated list of accepted level names,
// as Kafka's RuntimeLoggerManager.VALID_LOG_LEVELS_STRING words it.
const ValidLevels = "DEBUG, ERROR, FATAL, INFO, TRACE, WARN"

// ParseLevel returns the slog level of a log4j level name. Only the exact
// upper-case names are accepted, as Kafka's LogLevelConfig.VALID_LOG_LEVELS.
func ParseLevel(name string) (slog.Level, bool) {
	for _, l := range levelNames {
		if l.name == name {
			return l.level, true
		}
	}
	return 0, false
}

// LevelName returns the log4j name of a slog level: the highest log4j
// level at or below it, so a level between two names reads as the lower
// one, which is what it lets through.
func LevelName(level slog.Level) string {
	name := levelNames[0].name
	for _, l := range levelNames {
		if level >= l.level {
			name = l.name
		}
	}
	return name
}

// ErrUnknownLogger is returned for a logger name that does not exist.
var ErrUnknownLogger = errors.New("unknown logger")

// ErrUnknownLevel is returned for a level name that is not a log4j level
// Kafka accepts.
var ErrUnknownLevel = errors.New("unknown log level")

// ErrRootLevel is returned when removing the root logger's level, which
// would leave nothing to inherit.
var ErrRootLevel = errors.New("the root logger's level cannot be removed")

// Levels is the set of named loggers of one broker and their levels. It is
// safe for concurrent use; the level checks on the logging path read an
// atomic slog.LevelVar and take no lock.
type Levels struct {
	inner slog.Handler

	mu    sync.Mutex
	nodes map[string]*node
}

// node is one named logger: the level set on it, if any, and the level in
// effect, which its handlers read.
type node struct {
	name      string
	set       *slog.Level
	effective slog.LevelVar
}

// New returns the loggers writing to inner, with root at level. The
// returned loggers decide alone which records pass: inner's own level is
// not consulted, so it should let everything through.
func New(inner slog.Handler, root slog.Level) *Levels {
	lv := &Levels{inner: inner, nodes: map[string]*node{}}
	r := &node{name: RootLogger, set: &root}
	r.effective.Set(root)
	lv.nodes[RootLogger] = r
	return lv
}

// Attach returns the Levels behind l when l was made by one, and otherwise
// new Levels writing to l's handler with root at the lowest level that
// handler lets through, so attaching changes nothing until a level is set.
func Attach(l *slog.Logger) *Levels {
	if h, ok := l.Handler().(*handler); ok {
		return h.levels
	}
	root := LevelFatal
	for _, n := range levelNames {
		if l.Handler().Enabled(context.Background(), n.level) {
			root = n.level
			break
		}
	}
	return New(l.Handler(), root)
}

// Logger returns the logger named name, creating it on first use with the
// level of its nearest ancestor. Records of a named logger other than root
// carry the attribute logger=name, so an operator reading the log knows
// which name to change the level of.
func (lv *Levels) Logger(name string) *slog.Logger {
	if name == "" {
		name = RootLogger
	}
	lv.mu.Lock()
	n, ok := lv.nodes[name]
	if !ok {
		n = &node{name: name}
		lv.nodes[name] = n
		lv.recomputeLocked()
	}
	lv.mu.Unlock()
	h := slog.Handler(&handler{levels: lv, node: n, inner: lv.inner})
	if name != RootLogger {
		h = h.WithAttrs([]slog.Attr{slog.String("logger", name)})
	}
	return slog.New(h)
}

// Exists reports whether a logger of that name exists.
func (lv *Levels) Exists(name string) bool {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	_, ok := lv.nodes[name]
	return ok
}

// Describe returns every logger's effective level by log4j name, as Kafka's
// Log4jController.loggers.
func (lv *Levels) Describe() map[string]string {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	out := make(map[string]string, len(lv.nodes))
	for name, n := range lv.nodes {
		out[name] = LevelName(n.effective.Level())
	}
	return out
}

// Names returns the loggers' names, sorted.
func (lv *Levels) Names() []string {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	names := make([]string, 0, len(lv.nodes))
	for name := range lv.nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// CheckSet reports whether Set(name, level) would succeed, changing nothing.
func (lv *Levels) CheckSet(name, level string) error {
	if !lv.Exists(name) {
		return fmt.Errorf("%w: %s", ErrUnknownLogger, name)
	}
	if _, ok := ParseLevel(level); !ok {
		return fmt.Errorf("%w: %s", ErrUnknownLevel, level)
	}
	return nil
}

// Set sets the level of the named logger and of all its descendants, as
// log4j's Configurator.setAllLevels; setting root's sets every logger's.
func (lv *Levels) Set(name, level string) error {
	l, ok := ParseLevel(level)
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownLevel, level)
	}
	return lv.apply(name, &l)
}

// CheckUnset reports whether Unset(name) would succeed, changing nothing.
func (lv *Levels) CheckUnset(name string) error {
	if !lv.Exists(name) {
		return fmt.Errorf("%w: %s", ErrUnknownLogger, name)
	}
	if name == RootLogger {
		return ErrRootLevel
	}
	return nil
}

// Unset removes the level of the named logger and of all its descendants,
// which then take their nearest ancestor's. Root's level cannot be removed.
func (lv *Levels) Unset(name string) error {
	if name == RootLogger {
		return ErrRootLevel
	}
	return lv.apply(name, nil)
}

func (lv *Levels) apply(name string, level *slog.Level) error {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if _, ok := lv.nodes[name]; !ok {
		return fmt.Errorf("%w: %s", ErrUnknownLogger, name)
	}
	for n, nd := range lv.nodes {
		if name == RootLogger || n == name || strings.HasPrefix(n, name+".") {
			if level == nil {
				nd.set = nil
			} else {
				l := *level
				nd.set = &l
			}
		}
	}
	lv.recomputeLocked()
	return nil
}

// recomputeLocked sets every logger's effective level from the levels set:
// its own, else its nearest existing ancestor's, else root's.
func (lv *Levels) recomputeLocked() {
	for name, n := range lv.nodes {
		n.effective.Set(lv.resolveLocked(name))
	}
}

func (lv *Levels) resolveLocked(name string) slog.Level {
	for {
		if n, ok := lv.nodes[name]; ok && n.set != nil {
			return *n.set
		}
		i := strings.LastIndexByte(name, '.')
		if i < 0 || name == RootLogger {
			return *lv.nodes[RootLogger].set
		}
		name = name[:i]
	}
}

// handler filters records by its logger's level and passes the rest to the
// shared inner handler.
type handler struct {
	levels *Levels
	node   *node
	inner  slog.Handler
}

// Enabled reports whether the logger's effective level lets level through.
func (h *handler) Enabled(_ context.Context, level slog.Level) bool {
	return level >= h.node.effective.Level()
}

// Handle writes the record through the inner handler.
func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	return h.inner.Handle(ctx, r)
}

// WithAttrs returns a handler of the same logger with attributes added.
func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &handler{levels: h.levels, node: h.node, inner: h.inner.WithAttrs(attrs)}
}

// WithGroup returns a handler of the same logger with a group opened.
func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{levels: h.levels, node: h.node, inner: h.inner.WithGroup(name)}
}
