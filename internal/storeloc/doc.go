// Package storeloc parses the store URLs of keystore/storeurl and of
// pagpolar ops (key stores and webhook inboxes) into what each driver
// needs, so that every opener reads a URL the same way: the store's own
// parameters (table, prefix, volatile, async_commit...) are taken out, and
// the rest goes to the driver untouched.
package storeloc
