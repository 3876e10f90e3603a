package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// go-redis has one logger per process, which by default prints to stderr
// (a line per failed dial during an outage, among others). Importing this
// package routes it to slog at debug level; see the package documentation,
// "Logging", for why and how to undo it.
func init() { redis.SetLogger(slogRedisLogger{}) }

// slogRedisLogger passes go-redis's lines to slog.Default() at debug level,
// tagged logger=go-redis. It looks slog.Default() up on every line, so
// slog.SetDefault applies to it.
type slogRedisLogger struct{}

func (slogRedisLogger) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	l := slog.Default()
	if !l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	l.DebugContext(ctx, "go-redis: "+msg, slog.String("logger", "go-redis"))
}
