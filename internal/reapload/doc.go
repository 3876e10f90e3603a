// Package reapload measures live charges while a reap removes a large
// number of expired records from a key store. It is a measurement, not a
// unit test: it runs only when PAGPOLAR_REAP_LOAD names the stores to
// measure (sqlite, postgres, redis), and prints its figures with t.Log; the
// variables it reads are listed in reapload_test.go.
package reapload
