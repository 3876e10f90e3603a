// Package privatepg runs a private PostgreSQL server for tests that crash,
// pause or reconfigure their server: initdb and postgres in a temporary
// directory on a free loopback port, as the "postgres" user when the test
// runs as root (PostgreSQL refuses to run as root). The shared test server
// is never touched.
package privatepg
