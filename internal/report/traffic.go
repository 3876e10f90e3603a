package report

import (
	"net/http"
	"strings"

	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// Traffic counts the requests the fake server logged for credential and the
// faults it applied to them, by name (a request can meet two: one before
// processing and one during it).
func Traffic(l pagpolartest.Ledger, credential string, orders int) (Requests, Counts) {
	var r Requests
	faults := Counts{}
	for _, q := range l.Requests {
		if q.CredentialID != credential {
			continue
		}
		r.Total++
		if q.Method == http.MethodPost {
			r.Posts++
		} else {
			r.Reads++
		}
		if q.Fault != "" {
			for f := range strings.SplitSeq(q.Fault, "+") {
				faults[f]++
			}
		}
	}
	if orders > 0 {
		r.PerOrder = float64(r.Total) / float64(orders)
		r.PostsPerOrder = float64(r.Posts) / float64(orders)
	}
	return r, faults
}
