package pagpolartest

import (
	"net/http"
	"testing"
	"time"
)

// StepClock moves the API's own clock: the Date of every answer from then
// on, and the creation times of the effects made from then on; effects
// made before keep theirs, and Clock does not move.
func TestStepClock_MovesDateAndLaterCreationTimes(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	created := func(ref string) time.Time {
		t.Helper()
		sales := c.salesByRef(ref)
		if len(sales) != 1 {
			t.Fatalf("sales of %s: %+v", ref, sales)
		}
		at, err := time.Parse(time.RFC3339Nano, sales[0].CreatedAt)
		if err != nil {
			t.Fatal(err)
		}
		return at
	}
	want(t, c.do("POST", "/payments/pix", "k1", pixBody("offer-basic", "order-before")), 201)
	before := s.Clock.Now()
	s.StepClock(-time.Hour)
	if d := s.Clock.Now().Sub(before); d < 0 || d > time.Second {
		t.Fatalf("Clock stepped: %s to %s", before, s.Clock.Now())
	}
	r := c.do("POST", "/payments/pix", "k2", pixBody("offer-basic", "order-after"))
	want(t, r, 201)
	date, err := http.ParseTime(r.header.Get("Date"))
	if err != nil {
		t.Fatal(err)
	}
	if d := before.Sub(date); d < time.Hour-time.Second || d > time.Hour+time.Second {
		t.Errorf("Date %s, want an hour before %s", date, before)
	}
	if d := before.Sub(created("order-before")); d < 0 || d > time.Second {
		t.Errorf("the sale made before the step: created %s, want by its clock then (%s)", created("order-before"), before)
	}
	if d := before.Sub(created("order-after")); d < time.Hour-time.Second || d > time.Hour+time.Second {
		t.Errorf("the sale made after the step: created %s, want an hour before %s", created("order-after"), before)
	}
	s.StepClock(time.Hour)
	r = c.do("GET", "/sales?external_reference=order-after", noKey, "")
	if date, _ := http.ParseTime(r.header.Get("Date")); date.Sub(s.Clock.Now()) > time.Second || s.Clock.Now().Sub(date) > time.Second {
		t.Errorf("after stepping back by as much: Date %s, want %s", date, s.Clock.Now())
	}
}
