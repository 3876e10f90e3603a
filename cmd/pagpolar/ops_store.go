package main

// How pagpolar ops opens key stores: through keystore/storeurl's openers
// for existing stores, the same code (and URLs) the SDK's own Open reads.

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/storeurl"
)

// errBadStoreURL is wrapped by errors about the store URL itself.
var errBadStoreURL = storeurl.ErrBadURL

// errNoStore is matched (errors.Is) by the errors of a store URL that
// names no existing PagPolar key store.
var errNoStore = storeurl.ErrNoStore

// recordReader is what the read-only commands need of a key store.
type recordReader = storeurl.Reader

// storeOpener is how pagpolar ops reaches key stores; tests replace it.
//
// OpenReadOnly opens the store rawURL names for list, show and the dry
// runs. It never writes: it creates no file, table, index or key, runs no
// migration and writes no metadata, so it works under a read-only database
// role. A store that does not exist, or exists without PagPolar's records
// (no table, no key under the prefix), is an error wrapping errNoStore;
// one that cannot be reached wraps keystore.ErrUnavailable. What is risky
// but harmless to a reader (a Redis without an append-only file) is said
// once through warn.
//
// OpenWritable opens it for settle, reap and recover, which change records.
// It too refuses a store that does not exist (errNoStore) rather than
// create one: a typo in the URL must not start an empty store.
type storeOpener interface {
	OpenReadOnly(ctx context.Context, rawURL string, warn func(string)) (recordReader, func() error, error)
	OpenWritable(ctx context.Context, rawURL string) (keystore.Store, func() error, error)
}

// urlOpener is the storeOpener of pagpolar ops.
type urlOpener struct{}

func (urlOpener) OpenReadOnly(ctx context.Context, rawURL string, warn func(string)) (recordReader, func() error, error) {
	return storeurl.OpenReadOnly(ctx, rawURL, warn)
}

func (urlOpener) OpenWritable(ctx context.Context, rawURL string) (keystore.Store, func() error, error) {
	return storeurl.OpenExisting(ctx, rawURL)
}

// opsStores is the storeOpener pagpolar ops uses.
var opsStores storeOpener = urlOpener{}

// warnOnce returns a warn function writing each distinct message to w once,
// prefixed with the command.
func warnOnce(w io.Writer, cmd string) func(string) {
	var mu sync.Mutex
	seen := map[string]bool{}
	return func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		if !seen[msg] {
			seen[msg] = true
			fmt.Fprintf(w, "pagpolar %s: %s\n", cmd, msg)
		}
	}
}
