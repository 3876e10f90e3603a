// Package longtest marks the tests that take minutes (the every-shape
// demo, the cross-process reaps, the Redis Cluster kills): the README's
// test command skips them, and they run when PAGPOLAR_LONG=1 is set, as
// .ci/run sets it. A long test is a heavier variant of a check the short
// run still makes; no money rule is proven only by a long test.
package longtest
