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
		{Mutation{Answers: PostPix, Edit: EditWrap, Field: ""}, sale}, {Mutation{Answers: ListSales, Edit: EditWrap, Field: ""}, list},
		{Mutation{Answers: ListSales, Edit: EditBareList, Field: ""}, list}, {Mutation{Answers: ListSales, Edit: EditMoreFlag, Field: ""}, list},
		{Mutation{Answers: ListSales, Edit: EditCompact, Field: ""}, list}, {Mutation{Answers: ListSales, Edit: EditTotalMore, Field: ""}, list},
		{Mutation{Answers: PostPix, Edit: EditTimeUnix, Field: "created_at"}, sale}, {Mutation{Answers: PostPix, Edit: EditTimeNoZone, Field: "created_at"}, sale},
		{Mutation{Answers: PostPix, Edit: EditTimeOffset, Field: "created_at"}, sale}, {Mutation{Answers: PostPix, Edit: EditUpper, Field: "status"}, sale},
		{Mutation{Answers: PostPix, Edit: EditTitle, Field: "payment_method"}, sale}, {Mutation{Answers: PostPix, Edit: EditNumberString, Field: "amount"}, sale},
		{Mutation{Answers: PostPix, Edit: EditStringNumber, Field: "external_reference"}, sale},
		{Mutation{Answers: ListRefunds, Edit: EditSaleAmount, Field: ""}, list},
	}
	for _, f := range editFields {
		edits = append(edits, struct {
			m    Mutation
			body string
		}{Mutation{Answers: ListSales, Edit: EditRename, Field: f}, list}, struct {
			m    Mutation
			body string
		}{Mutation{Answers: ListSales, Edit: EditAlias, Field: f}, list}, struct {
			m    Mutation
			body string
		}{Mutation{Answers: ListSales, Edit: EditRemove, Field: f}, list}, struct {
			m    Mutation
			body string
		}{Mutation{Answers: ListSales, Edit: EditRekey, Field: f}, list})
	}
	for _, e := range edits {
		tp := newTap(nil, &Scenario{Mutations: []Mutation{e.m}}, pagpolartest.NewClock())
		if got := string(tp.mutate(e.m.Answers, []byte(e.body), 1)); got == e.body || got == "" {
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

// A mutation of the second host edits every other answer only, the ones
// whose Date the second host's clock writes.
func TestMutate_OtherHostEditsEveryOtherAnswer(t *testing.T) {
	sale := `{"identifier":"sale_1","offer_identifier":"offer-basic"}`
	m := Mutation{Answers: PostPix, Edit: EditRekey, Field: "offer_identifier", OtherHost: true}
	tp := newTap(nil, &Scenario{Mutations: []Mutation{m}}, pagpolartest.NewClock())
	for n := 1; n <= 4; n++ {
		got := string(tp.mutate(PostPix, []byte(sale), n))
		if changed := got != sale; changed != otherHost(n) {
			t.Errorf("answer %d: %s (the second host's: %v)", n, got, otherHost(n))
		}
	}
}

// A mutation deployed later edits the answers after the deploy only.
func TestMutate_LaterEditsOnceDeployed(t *testing.T) {
	sale := `{"identifier":"sale_1","offer_identifier":"offer-basic"}`
	m := Mutation{Answers: PostPix, Edit: EditRekey, Field: "offer_identifier", Later: true}
	tp := newTap(nil, &Scenario{Mutations: []Mutation{m}}, pagpolartest.NewClock())
	if got := string(tp.mutate(PostPix, []byte(sale), 1)); got != sale {
		t.Errorf("before the deploy: %s", got)
	}
	tp.deployed.Store(true)
	if got := string(tp.mutate(PostPix, []byte(sale), 2)); got == sale {
		t.Errorf("after the deploy: %s, unchanged", got)
	}
}
