package scenario

import (
	"net/http"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// Every edit changes the answer it is drawn for (an edit that changed
// nothing would be a draw that stands for nothing).
func TestMutate_EveryEditChangesItsAnswer(t *testing.T) {
	sale := `{"identifier":"sale_1","status":"pending","external_reference":"1001","payment_method":"pix","amount":9990,"offer_identifier":"offer-basic","created_at":"2026-12-01T12:00:00.5Z","sale_identifier":"s","subscription_id":"sub","id":"x"}`
	list := `{"data":[` + sale + `]}`
	edits := []struct {
		m    Mutation
		body string
	}{
		{Mutation{PostPix, EditWrap, ""}, sale}, {Mutation{ListSales, EditWrap, ""}, list},
		{Mutation{ListSales, EditBareList, ""}, list}, {Mutation{ListSales, EditMoreFlag, ""}, list},
		{Mutation{ListSales, EditCompact, ""}, list}, {Mutation{ListSales, EditTotalMore, ""}, list},
		{Mutation{PostPix, EditTimeUnix, "created_at"}, sale}, {Mutation{PostPix, EditTimeNoZone, "created_at"}, sale},
		{Mutation{PostPix, EditTimeOffset, "created_at"}, sale}, {Mutation{PostPix, EditUpper, "status"}, sale},
		{Mutation{PostPix, EditTitle, "payment_method"}, sale}, {Mutation{PostPix, EditNumberString, "amount"}, sale},
		{Mutation{PostPix, EditStringNumber, "external_reference"}, sale},
		{Mutation{ListRefunds, EditSaleAmount, ""}, list},
	}
	for _, f := range editFields {
		edits = append(edits, struct {
			m    Mutation
			body string
		}{Mutation{ListSales, EditRename, f}, list}, struct {
			m    Mutation
			body string
		}{Mutation{ListSales, EditAlias, f}, list}, struct {
			m    Mutation
			body string
		}{Mutation{ListSales, EditRemove, f}, list})
	}
	for _, e := range edits {
		tp := newTap(nil, &Scenario{Mutations: []Mutation{e.m}}, pagpolartest.NewClock())
		if got := string(tp.mutate(e.m.Answers, []byte(e.body))); got == e.body || got == "" {
			t.Errorf("%s %s on %s: answer unchanged: %s", e.m.Edit, e.m.Field, e.m.Answers, got)
		}
	}
}

// The Date edits: a shift, a step from the n-th answer, a second host on
// every other answer, a Date left out.
func TestDate_EditsFollowTheAPIClock(t *testing.T) {
	base := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tp := newTap(nil, &Scenario{APIClock: APIClock{Shift: time.Hour, StepAt: 3, Step: -10 * time.Minute, OtherHost: 2 * time.Second, DropEvery: 5}}, pagpolartest.NewClock())
	want := map[int]time.Duration{1: time.Hour, 2: time.Hour + 2*time.Second, 3: 50 * time.Minute, 4: 50*time.Minute + 2*time.Second}
	for n := 1; n <= 5; n++ {
		h := http.Header{"Date": {base.Format(http.TimeFormat)}}
		tp.date(h, n)
		if n == 5 {
			if h.Get("Date") != "" {
				t.Errorf("answer 5: Date %q, want none", h.Get("Date"))
			}
			continue
		}
		got, err := http.ParseTime(h.Get("Date"))
		if err != nil || got.Sub(base) != want[n] {
			t.Errorf("answer %d: Date %q, want base%+v", n, h.Get("Date"), want[n])
		}
	}
}
