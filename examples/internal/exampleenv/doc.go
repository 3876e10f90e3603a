// Package exampleenv connects the examples to PagPolar.
//
// With PAGPOLAR_BASE_URL, PAGPOLAR_CREDENTIAL_ID and PAGPOLAR_TOKEN set — the
// variables `pagpolar sim` prints, or a real account's — an example talks
// to that API and says so in a banner. With none of them set it starts an
// in-process fake. Setting only some of them is an error (a typo must not
// silently send an example to the fake, or to production).
//
// The other variables `pagpolar sim` prints are read too, and default to
// the sim's offers: PAGPOLAR_OFFER_ID (offer-basic), PAGPOLAR_PLAN_ID
// (plan-basic), PAGPOLAR_OTHER_PLAN_ID (plan-pro), and PAGPOLAR_FP_SECRET
// (the fingerprint secret, WithFingerprintSecret; none if unset).
package exampleenv
