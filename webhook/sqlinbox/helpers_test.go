package sqlinbox_test

import (
	"database/sql"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"
)

func sqlinboxDB(dsn string) (*sql.DB, error) { return sql.Open("pgx", dsn) }
