// Package logging owns Cascade's named loggers and their levels, which an
// operator changes while the broker runs: the BROKER_LOGGER resource of
// DescribeConfigs and IncrementalAlterConfigs (KIP-412), as Kafka's
// Log4jController and RuntimeLoggerManager do for log4j.
//
// Loggers are named as log4j's, with dots making a hierarchy: the level
// set on "cascade.handler" is also set on "cascade.handler.fetch", and a
// logger with no level of its own takes the level of its nearest ancestor
// that has one, up to "root", which always has one. Setting or removing a
// level applies to the named logger and every descendant, as log4j's
// Configurator.setAllLevels.
//
// Log4j level names map onto log/slog levels as follows; a record is
// written when its slog level is at least the logger's:
//
//	TRACE  slog.LevelDebug-4 (-8)
//	DEBUG  slog.LevelDebug   (-4)
//	INFO   slog.LevelInfo    (0)
//	WARN   slog.LevelWarn    (4)
//	ERROR  slog.LevelError   (8)
//	FATAL  slog.LevelError+4 (12): Cascade logs nothing at FATAL, so this
//	       level silences a logger.
//
// Those six are the names Kafka accepts (LogLevelConfig.VALID_LOG_LEVELS);
// OFF and ALL are refused, as Kafka refuses them.
//
// The broker (broker.Start) attaches to the logger it is given and hands
// out "cascade.metadata", "cascade.handler" and "cascade.wire"; what it
// logs itself goes through root. Levels last until the process stops, as
// in Kafka, which does not store them either.
//
// Use:
//
//	levels := logging.Attach(logger)          // wraps logger's handler
//	h := levels.Logger("cascade.handler")      // a named logger
//	_ = levels.Set("cascade.handler", "DEBUG") // h now writes debug records
//	levels.Describe()                          // name -> effective level
package logging
