// Command pagpolar bundles the SDK's tools: `pagpolar sim` runs the fake
// PagPolar API (package pagpolartest) on a local port, so that integration
// tests in any language can use it. Run `pagpolar help` for the list.
package main
