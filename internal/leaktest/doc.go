// Package leaktest is a test gateway that echoes secrets and personal data
// in every error body, and a finder for them in whatever the SDK lets out
// (error strings, logs, Hook events, stored records, ops output).
//
// It is a test helper: it lives in internal/ so that the root package's
// tests and cmd/pagpolar's can share it.
package leaktest
