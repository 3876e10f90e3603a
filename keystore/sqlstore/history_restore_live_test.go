package sqlstore_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
	"github.com/pagpolar/pagpolar-go/keystore/storetest"
)

// A backup copied over the file while the process that wrote the orders
// still has it open: a new process on the file charges nothing, lost
// order or new, and nothing twice; each call fails closed at once.
func TestHistory_SQLiteBackupCopiedOverLiveFileChargesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ops.db")
	var saved string
	r := storetest.HistoryLossRun(t, 20,
		func(t *testing.T) keystore.Store {
			first := openAt(t, path, sqlstore.DeclaredNew("test: a new file"), sqlstore.WithCallTimeout(2*time.Second))
			saved = backup(t, first, path)
			return first
		},
		func(t *testing.T) { copyFile(t, saved, path) },
		func(t *testing.T) keystore.Store {
			s, err := sqlstore.OpenSQLite(path, sqlstore.WithCallTimeout(2*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			_ = s.Migrate(t.Context()) // refused: each call below says so
			return s
		})
	t.Logf("orders %d: doubles %d, lookups %d, unknown %d, refused %d, posts %d, first call %v, err %v",
		r.Orders, r.Doubles, r.Lookups, r.Unknown, r.Refused, r.Posts, r.FirstErr.Round(time.Millisecond), r.Err)
	if r.Doubles != 0 || r.Posts != 0 {
		t.Errorf("%d doubles, %d money requests after the copy; want none", r.Doubles, r.Posts)
	}
	if r.Err != nil && !errors.Is(r.Err, keystore.ErrUnavailable) {
		t.Errorf("a call after the copy: %v; want a refusal (amnesia, or the store unavailable)", r.Err)
	}
	if r.FirstErr > 3*time.Second {
		t.Errorf("the first call after the copy took %v, beyond the call timeout", r.FirstErr)
	}
}
