package sqlstore_test

import (
	"testing"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
	"github.com/pagpolar/pagpolar-go/keystore/storetest"
)

func TestConformanceSQLite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) keystore.Store { return newSQLite(t) })
}

func TestConformancePostgres(t *testing.T) {
	var pg sharedPG
	t.Cleanup(pg.close)
	db := pg.get(t)
	storetest.Run(t, func(t *testing.T) keystore.Store { return newPostgres(t, db) })
}

// WithMaxBatch(1): each write is its own statement on the pool, the path
// drivers other than pgx take.
func TestConformancePostgresNoBatch(t *testing.T) {
	var pg sharedPG
	t.Cleanup(pg.close)
	db := pg.get(t)
	storetest.Run(t, func(t *testing.T) keystore.Store { return newPostgres(t, db, sqlstore.WithMaxBatch(1)) })
}
