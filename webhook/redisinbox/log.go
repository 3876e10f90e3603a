package redisinbox

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Routes go-redis's process-wide logger to slog at debug level (see the
// package documentation); keystore/redisstore installs the same one.
func init() { redis.SetLogger(slogRedisLogger{}) }

// slogRedisLogger passes go-redis's lines to slog.Default() at debug level,
// tagged logger=go-redis.
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
