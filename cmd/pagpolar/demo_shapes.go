package main

// pagpolar demo -shapes all: one run per answer shape, and their summary.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/pagpolar/pagpolar-go/internal/report"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// demoAllShapes runs the demo once per answer shape (today's first) and
// prints one line per shape, then the full report for any that failed.
func demoAllShapes(ctx context.Context, cfg *demoConfig, stdout, stderr io.Writer) int {
	shapes := append([]pagpolartest.Shape{pagpolartest.ShapeToday}, pagpolartest.AllShapes()...)
	var reps []*report.Report
	code := 0
	for _, sh := range shapes {
		one := *cfg
		one.shapes = string(sh)
		fmt.Fprintf(stderr, "== shape %s\n", sh)
		rctx, cancel := context.WithTimeout(ctx, cfg.timeout)
		rep, err := demo(rctx, &one, stderr)
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "pagpolar demo: shape %s: %v\n", sh, err)
			if errors.Is(err, errDemoSetup) {
				return demoExitUsage
			}
			return demoExitIncomplete
		}
		reps = append(reps, rep)
		if !rep.OK() {
			code = demoExitFailed
		}
	}
	if cfg.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(reps); err != nil {
			return demoExitIncomplete
		}
		return code
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "shape\tverdict\torders\toperations\tcharged twice\tfalse failures\tsucceeded w/o effect\tunfinished\tunknown at end\tsettled by events\tsettling took\trun\n")
	for i, rep := range reps {
		v := "OK"
		if !rep.OK() {
			v = "FAILED"
		}
		c := rep.Check
		byEvents := 0
		if rep.Webhooks != nil {
			byEvents = rep.Webhooks.Settled
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1fs\t%.1fs\n", shapes[i], v, rep.Orders, c.Operations,
			len(c.Duplicates), len(c.FalseFailures)+len(c.Orphans), len(c.WithoutEffect), len(c.Unfinished), len(c.Unknown), byEvents,
			rep.Settling.SettleMS/1000, rep.RunTimeMS/1000)
	}
	_ = tw.Flush()
	for i, rep := range reps {
		if !rep.OK() {
			fmt.Fprintf(stdout, "\n== shape %s\n", shapes[i])
			_ = rep.WriteText(stdout)
		}
	}
	return code
}

func shapeNames() string {
	var names []string
	for _, s := range pagpolartest.AllShapes() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}
