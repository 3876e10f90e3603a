// Base URLs the check takes: which count as production, and that one with
// user information is refused without printing it.

package apicheck

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pagpolar/pagpolar-go"
)

// A base URL with user information or a query is refused, and the
// refusal does not print the secret.
func TestCheck_BaseURLWithUserinfoIsRefusedUnprinted(t *testing.T) {
	for _, base := range []string{"http://user:hunter2secret@127.0.0.1:1/v1", "http://127.0.0.1:1/v1?token=hunter2secret", "http://127.0.0.1:1/v1#hunter2secret"} {
		var sent atomic.Int64
		_, err := Run(context.Background(), Config{BaseURL: base, CredentialID: "c", Token: pagpolar.StaticToken("t"), OfferID: "o", PlanID: "p", OtherPlanID: "q",
			HTTPClient: &http.Client{Transport: rtFunc(func(*http.Request) (*http.Response, error) { sent.Add(1); return nil, io.EOF })}})
		if err == nil || strings.Contains(err.Error(), "hunter2secret") || !strings.Contains(err.Error(), "Config.BaseURL") {
			t.Errorf("%s: %v", base, err)
		}
		if sent.Load() != 0 {
			t.Errorf("%s: %d requests sent", base, sent.Load())
		}
	}
	u, _ := url.Parse("https://u:p@staging.example.com/v1?q=1#f")
	if got := displayURL(u); got != "https://staging.example.com/v1" {
		t.Errorf("displayURL = %q", got)
	}
}

// Only DNS labels say staging/sandbox; IP literals count only if
// loopback; zones are refused; a trailing dot is still production.
func TestIsProductionURL_LabelsLoopbackZonesAndTrailingDot(t *testing.T) {
	for _, c := range []struct {
		url  string
		prod bool
		why  string
	}{
		{"http://[::ffff:192.0.2.2%25sandbox]:8080/v1", true, "zone"},
		{"http://[fe80::1%25staging]:8080/v1", true, "zone"},
		{"http://[::1%25lo]:8080/v1", true, "zone"},
		{"http://192.0.2.2:8080/v1", true, "not loopback"},
		{"http://10.0.0.5/v1", true, "not loopback"},
		{"http://[::ffff:127.0.0.1]:8080/v1", false, ""},
		{"http://127.0.0.1:8080/v1", false, ""},
		{"http://[::1]:8080/v1", false, ""},
		{"https://api.pagpolar.com./v1", true, "production host"},
		{"https://API.PAGPOLAR.COM./v1", true, "production host"},
		{"https://staging.api.pagpolar.com/v1", true, "production host"},
		{"https://api-staging.pagpolar.com/v1", false, ""},
		{"https://sandbox.example.com/v1", false, ""},
		{"https://staging2.example.com/v1", false, ""},
		{"https://payments.example.com/v1", true, "does not say"},
		{"https://notstaging.example.com/v1", true, "does not say"},
		{"https://localhost./v1", false, ""},
		{"https://u:secret@payments.example.com/v1", true, "does not say"},
		{"::", true, "not a URL"},
	} {
		got, why := IsProductionURL(c.url)
		if got != c.prod || !strings.Contains(why, c.why) || strings.Contains(why, "secret") {
			t.Errorf("IsProductionURL(%q) = %v, %q; want %v, %q", c.url, got, why, c.prod, c.why)
		}
	}
}

func TestIsProductionURL(t *testing.T) {
	for _, c := range []struct {
		url  string
		prod bool
	}{
		{"https://api.pagpolar.com/v1", true},
		{"https://API.PagPolar.com/v1", true},
		{"https://eu.api.pagpolar.com/v1", true},
		{"https://payments.example.com/v1", true},
		{"https://api-staging.pagpolar.com/v1", false},
		{"https://staging.pagpolar.com/api/v1", false},
		{"https://sandbox.pagpolar.com/v1", false},
		{"http://localhost:8080/v1", false},
		{"http://127.0.0.1:8080/v1", false},
		{"http://[::1]:8080/v1", false},
		{"http://127.0.0.2:8080/v1", false},
		{"not a url", true},
	} {
		if got, why := IsProductionURL(c.url); got != c.prod {
			t.Errorf("IsProductionURL(%q) = %v (%s), want %v", c.url, got, why, c.prod)
		}
	}
}
