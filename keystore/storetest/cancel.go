package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

func testCancelled(t *testing.T, s keystore.Store) {
	rec := settle(t, s, "cancel/existing", keystore.StateSucceeded)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := map[string]func() error{
		"Create": func() error {
			_, err := s.Create(ctx, newRecord("cancel/new"), "o", longTTL)
			return err
		},
		"Get": func() error { _, err := s.Get(ctx, rec.OperationID); return err },
		"Acquire": func() error {
			_, err := s.Acquire(ctx, rec.OperationID, "o", longTTL)
			return err
		},
		"Renew": func() error {
			_, err := s.Renew(ctx, rec.OperationID, rec.LeaseToken, longTTL)
			return err
		},
		"Release": func() error { return s.Release(ctx, rec.OperationID, rec.LeaseToken) },
		"Update":  func() error { _, err := s.Update(ctx, rec); return err },
		"List":    func() error { _, err := s.List(ctx, keystore.Filter{}); return err },
		"DeleteExpired": func() error {
			_, err := s.DeleteExpired(ctx, time.Now().Add(time.Hour), 10)
			return err
		},
	}
	for name, call := range calls {
		err := call()
		if err == nil {
			t.Fatalf("%s with a cancelled context succeeded", name)
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s with a cancelled context: %v, want an error wrapping context.Canceled", name, err)
		}
	}
	// Nothing was written.
	_, err := s.Get(context.Background(), "cancel/new")
	wantErr(t, "Get of a record created with a cancelled context", err, keystore.ErrNotFound)
	wantSame(t, "record after calls with a cancelled context", get(t, s, rec.OperationID), rec)
}
