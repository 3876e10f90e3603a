package storeloc

// What the read-only openers share: the read-only DSNs and the logger that
// turns a store's start-up warnings into one line for the operator.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"strings"
)

// SQLiteReadOnlyDSN opens path for reading only. A WAL database's reader
// needs the -wal and -shm files and creates them when they are missing,
// i.e. when no connection has the database open; then nothing is changing
// it either, and immutable=1 reads it creating nothing. Should a writer open
// it meanwhile, its changes go to the -wal file first, which an immutable
// reader does not see: the read is of the file as it was.
func SQLiteReadOnlyDSN(path string) string {
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?mode=ro&_pragma=query_only(1)&_pragma=busy_timeout(5000)"
	if _, err := os.Stat(path + "-wal"); errors.Is(err, fs.ErrNotExist) {
		dsn += "&immutable=1"
	}
	return dsn
}

// PostgresReadOnlyDSN sets default_transaction_read_only, a run-time
// parameter pgx passes on: every statement of the session is read-only.
func PostgresReadOnlyDSN(dsn string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "default_transaction_read_only=on"
}

// WarnLogger returns a logger that passes a store's warnings (and nothing
// below) to warn, one line each. The warning the store logs when its opt-out
// of the durability check is used (a message starting with volatileMsg) is
// replaced by one saying what it means for a reader of name.
func WarnLogger(name, volatileMsg string, warn func(string)) *slog.Logger {
	return slog.New(&warnHandler{name: name, volatileMsg: volatileMsg, warn: warn})
}

type warnHandler struct {
	name, volatileMsg string
	warn              func(string)
	attrs             []slog.Attr
}

func (h *warnHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *warnHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	reason := ""
	add := func(a slog.Attr) bool {
		if a.Key == "reason" {
			reason = a.Value.String()
		} else {
			fmt.Fprintf(&b, " %s=%s", a.Key, a.Value)
		}
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	if h.volatileMsg != "" && strings.HasPrefix(r.Message, h.volatileMsg) {
		h.warn(fmt.Sprintf("warning: %s keeps no append-only file (%s): reading anyway, as a read risks nothing; a restart of that Redis forgets what it holds (commands that write need ?volatile=1)", h.name, reason))
		return nil
	}
	h.warn("warning: " + r.Message + b.String())
	return nil
}

func (h *warnHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}

func (h *warnHandler) WithGroup(string) slog.Handler { return h }
