// The report's verdicts and exit codes.

package apicheck

import (
	"testing"
)

// The exit code is the strongest verdict: unknown (3) over an
// incomplete run (2) over not all confirmed (1); not exercised counts
// against 0 unless the item is optional.
func TestExitCode_StrongestVerdictWins(t *testing.T) {
	settled := []*Path{{Name: "pix/replay", Outcome: OutcomeSettled}}
	unknown := []*Path{{Name: "pix/replay", Outcome: OutcomeUnknown}}
	conf := Item{ID: "sale.status", Status: Confirmed}
	for _, c := range []struct {
		name string
		rep  Report
		want int
	}{
		{"all confirmed", Report{Paths: settled, Items: []Item{conf}}, ExitConfirmed},
		{"optional not exercised", Report{Paths: settled, Items: []Item{conf, {ID: "webhooks", Status: NotExercised}, {ID: "in-progress.409", Status: NotExercised}}}, ExitConfirmed},
		{"not exercised", Report{Paths: settled, Items: []Item{conf, {ID: "refund.amount", Status: NotExercised}}}, ExitDiffers},
		{"differs", Report{Paths: settled, Items: []Item{{ID: "sale.status", Status: Differs}}}, ExitDiffers},
		{"no answer", Report{Paths: settled, NoAnswer: 1, Items: []Item{{ID: "sale.status", Status: Differs}}}, ExitUsage},
		{"unknown and no answer", Report{Paths: unknown, NoAnswer: 3, Items: []Item{conf}}, ExitUnknown},
		{"replay absent and no answer", Report{Paths: settled, NoAnswer: 1, Items: []Item{{ID: "replay.header", Status: Absent}}}, ExitUnknown},
	} {
		if got := c.rep.ExitCode(); got != c.want {
			t.Errorf("%s: exit %d, want %d", c.name, got, c.want)
		}
	}
}
