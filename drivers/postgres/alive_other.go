//go:build !linux

package postgres

import "github.com/jackc/pgx/v5/pgconn"

// alive reports whether a pooled connection may be used; off Linux the
// driver does not look (a restart then fails the first call on each old
// connection).
func alive(*pgconn.PgConn) bool { return true }
