// Package privateredis runs a private redis-server for tests that kill,
// restart, flush or pause their server, on a free loopback port with its
// own directory. The shared test Redis is never touched.
package privateredis
