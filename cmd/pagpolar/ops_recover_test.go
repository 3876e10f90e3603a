package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
)

// TestOpsRecover walks SAFETY rule 13's recovery on a SQLite store that
// lost its last acknowledged record: the loss is reported with the
// surviving unfinished operation, -accept refuses while that one is
// unsettled, accepts once it is settled, and only then does the store take
// new records again.
func TestOpsRecover(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keys.db")
	s, err := sqlstore.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	const cred = "cred_recover"
	create := func(op string) (keystore.Record, error) {
		return s.Create(ctx, keystore.Record{OperationID: pagpolar.RecordID(cred, op), Key: "key-" + op, Kind: "pix", Fingerprint: "f", State: keystore.StatePending}, "test", time.Minute)
	}
	survivor, err := create("pix:survivor")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := create("pix:lost"); err != nil {
		t.Fatal(err)
	}
	url := "sqlite:" + path

	out, errb, code := ops(t, "recover", "-store", url)
	if code != exitOK || !strings.Contains(out, "no loss detected") {
		t.Fatalf("before the loss: exit %d\n%s%s", code, out, errb)
	}

	// The loss: the last acknowledged record disappears behind the store.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("DELETE FROM "+sqlstore.DefaultTable+" WHERE operation_id = $1", pagpolar.RecordID(cred, "pix:lost")); err != nil {
		t.Fatal(err)
	}
	if _, err := create("pix:new"); !errors.Is(err, keystore.ErrAmnesia) {
		t.Fatalf("Create after the loss: %v, want ErrAmnesia", err)
	}

	out, errb, code = ops(t, "recover", "-store", url)
	t.Logf("recover after the loss:\n%s", out)
	if code != exitUnsettled || !strings.Contains(out, "LOSS DETECTED") || !strings.Contains(out, cred) || !strings.Contains(out, "-accept") {
		t.Fatalf("after the loss: exit %d, want %d with the loss, the survivor's credential and the steps\n%s%s", code, exitUnsettled, out, errb)
	}
	if _, _, code := ops(t, "recover", "-store", url, "-force"); code != exitUsage {
		t.Fatalf("-force without -accept: exit %d, want %d", code, exitUsage)
	}
	out, errb, code = ops(t, "recover", "-store", url, "-accept", "test: checked")
	if code != exitUnsettled || !strings.Contains(out, "not accepted") {
		t.Fatalf("-accept with an unsettled survivor: exit %d\n%s%s", code, out, errb)
	}
	if _, err := create("pix:new"); !errors.Is(err, keystore.ErrAmnesia) {
		t.Fatalf("a refused -accept ended the refusal: %v", err)
	}

	// The survivor is settled (as ops settle would), then the loss accepted.
	survivor.State = keystore.StateSucceeded
	if _, err := s.Update(ctx, survivor); err != nil {
		t.Fatalf("settling a survivor during the refusal: %v", err)
	}
	out, errb, code = ops(t, "recover", "-store", url, "-accept", "test: checked")
	if code != exitOK || !strings.Contains(out, "loss accepted") {
		t.Fatalf("-accept after settling: exit %d\n%s%s", code, out, errb)
	}
	if _, err := create("pix:new"); err != nil {
		t.Fatalf("Create after the loss was accepted: %v", err)
	}
	out, errb, code = ops(t, "recover", "-store", url, "-json")
	var v recoverView
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != exitOK {
		t.Fatalf("-json: exit %d, %v\n%s%s", code, err, out, errb)
	}
	if len(v.Lost) != 0 || len(v.Accepted) == 0 || v.Accepted[0].Note != "test: checked" {
		t.Fatalf("-json after acceptance: %+v", v)
	}
}

// TestOpsRecoverForce: -accept -force ends the refusal although a surviving
// operation is unsettled (one that can never be settled by lookup, e.g. a
// subscribe without a lookup route, would otherwise block the store).
func TestOpsRecoverForce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keys.db")
	s, err := sqlstore.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	rec := func(op string) keystore.Record {
		return keystore.Record{OperationID: pagpolar.RecordID("c", op), Key: "k-" + op, Kind: "subscribe", Fingerprint: "f", State: keystore.StatePending}
	}
	for _, op := range []string{"sub:kept", "sub:lost"} {
		if _, err := s.Create(ctx, rec(op), "test", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("DELETE FROM " + sqlstore.DefaultTable + " WHERE operation_id = 'c/sub:lost'"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, rec("sub:new"), "test", time.Minute); !errors.Is(err, keystore.ErrAmnesia) {
		t.Fatalf("Create after the loss: %v, want ErrAmnesia", err)
	}
	out, errb, code := ops(t, "recover", "-store", "sqlite:"+path, "-accept", "test: forced", "-force")
	if code != exitOK || !strings.Contains(out, "loss accepted") {
		t.Fatalf("-accept -force: exit %d\n%s%s", code, out, errb)
	}
	if _, err := s.Create(ctx, rec("sub:new"), "test", time.Minute); err != nil {
		t.Fatalf("Create after a forced acceptance: %v", err)
	}
}
