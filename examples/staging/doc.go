// Package staging is an integration test against a real PagPolar API
// (staging): it charges one PIX and checks the replay and lookup behaviour
// CONTRACT.md marks as documented. It runs only when PAGPOLAR_BASE_URL,
// PAGPOLAR_CREDENTIAL_ID, PAGPOLAR_TOKEN and PAGPOLAR_OFFER_ID are set; see
// staging_test.go.
package staging
