// Command otel charges one order by PIX against an in-process fake whose
// first answer is lost, with the client reporting to OpenTelemetry, and
// prints the trace as an indented tree, as Jaeger shows it: the operation,
// its POST whose answer never came, the lookup that settled it and the GET
// under that lookup.
//
//	go run ./examples/otel          # the tree
//	go run ./examples/otel -json    # and every span, from the stdout exporter
package main
