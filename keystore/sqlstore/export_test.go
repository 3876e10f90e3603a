package sqlstore

// SetBeforeCommit makes the SQLite writer of s call f before each batch's
// COMMIT (a batch that is slow to commit, as under a loaded disk).
func SetBeforeCommit(s *Store, f func()) { s.w.beforeCommit = f }
