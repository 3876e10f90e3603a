package reapload

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// TestScale compares charges on a store holding PAGPOLAR_SCALE_N settled
// records (updated a day ago, within retention) plus 1000 pending ones with
// the same store empty, in interleaved rounds (each round runs both, in
// shuffled order, for PAGPOLAR_SCALE_WINDOW each at parallelism 1; the
// ratio is taken within the round), then times List of the pending records
// (what `pagpolar ops list -state pending` does) in process and as the
// command. PAGPOLAR_SCALE names the stores (sqlite, postgres, redis).
func TestScale(t *testing.T) {
	which := os.Getenv("PAGPOLAR_SCALE")
	if which == "" {
		t.Skip("PAGPOLAR_SCALE not set (a measurement: see the package doc)")
	}
	n, _ := strconv.Atoi(env("PAGPOLAR_SCALE_N", "1000000"))
	rounds, _ := strconv.Atoi(env("PAGPOLAR_SCALE_ROUNDS", "6"))
	window, err := time.ParseDuration(env("PAGPOLAR_SCALE_WINDOW", "3s"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "pagpolar")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/pagpolar").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, name := range strings.Split(which, ",") {
		t.Run(name, func(t *testing.T) {
			open := map[string]func(*testing.T) target{"sqlite": sqliteTarget, "postgres": postgresTarget, "redis": redisTarget}[name]
			if open == nil {
				t.Fatalf("unknown store %q", name)
			}
			scale(t, open(t), open(t), n, rounds, window, bin)
		})
	}
}

func scale(t *testing.T, empty, full target, n, rounds int, window time.Duration, bin string) {
	ctx := context.Background()
	srv := pagpolartest.NewServer(t)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 16, MaxIdleConnsPerHost: 16}}
	chargeOn := func(s keystore.Store) func() (time.Duration, error) {
		c, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), pagpolar.WithBaseURL(srv.URL),
			pagpolar.WithHTTPClient(hc), pagpolar.WithStore(s))
		if err != nil {
			t.Fatal(err)
		}
		seq := 0
		return func() (time.Duration, error) {
			seq++
			ref := fmt.Sprintf("scale-%p-%d-%d", s, time.Now().UnixNano(), seq)
			start := time.Now()
			_, err := c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: ref, Customer: customer})
			return time.Since(start), err
		}
	}
	ce, cf := chargeOn(empty.store), chargeOn(full.store)
	if _, err := cf(); err != nil {
		t.Fatal(err)
	}
	recs, err := full.store.List(ctx, keystore.Filter{States: []keystore.State{keystore.StateSucceeded}, Limit: 1})
	if err != nil || len(recs) != 1 {
		t.Fatalf("template: %v %d", err, len(recs))
	}
	start := time.Now()
	full.fill(t, recs[0].OperationID, "s", n, "succeeded", 24*time.Hour)
	full.fill(t, recs[0].OperationID, "p", 1000, "pending", 2*time.Hour)
	t.Logf("filled %d settled + 1000 pending records in %.1f s; load average %s", n, time.Since(start).Seconds(), loadavg())
	if _, err := ce(); err != nil { // warm both
		t.Fatal(err)
	}

	runFor := func(f func() (time.Duration, error)) []time.Duration {
		var lat []time.Duration
		end := time.Now().Add(window)
		for time.Now().Before(end) {
			d, err := f()
			if err != nil {
				t.Fatalf("charge: %v", err)
			}
			lat = append(lat, d)
		}
		return lat
	}
	q := func(l []time.Duration, f float64) float64 {
		s := slices.Clone(l)
		slices.Sort(s)
		return ms(s[min(len(s)-1, int(f*float64(len(s))))])
	}
	mean := func(l []time.Duration) float64 {
		var sum time.Duration
		for _, d := range l {
			sum += d
		}
		return ms(sum) / float64(len(l))
	}
	var r50, r99, rmean []float64
	for r := range rounds {
		var le, lf []time.Duration
		if rand.IntN(2) == 0 {
			le, lf = runFor(ce), runFor(cf)
		} else {
			lf, le = runFor(cf), runFor(ce)
		}
		r50 = append(r50, q(lf, 0.5)/q(le, 0.5))
		r99 = append(r99, q(lf, 0.99)/q(le, 0.99))
		rmean = append(rmean, mean(lf)/mean(le))
		t.Logf("round %d: empty p50 %.2f p99 %.2f mean %.2f ms (%d); full p50 %.2f p99 %.2f mean %.2f ms (%d); load %s",
			r, q(le, 0.5), q(le, 0.99), mean(le), len(le), q(lf, 0.5), q(lf, 0.99), mean(lf), len(lf), loadavg())
	}
	t.Logf("SCALE %s n=%d: full/empty p50 %s, p99 %s, mean %s", t.Name(), n, medRange(r50), medRange(r99), medRange(rmean))

	var lists []time.Duration
	for range 20 {
		s := time.Now()
		got, err := full.store.List(ctx, keystore.Filter{States: []keystore.State{keystore.StatePending}, Limit: 101})
		lists = append(lists, time.Since(s))
		if err != nil || len(got) != 101 {
			t.Fatalf("List pending: %d, %v", len(got), err)
		}
	}
	var cmds []time.Duration
	for range 5 {
		s := time.Now()
		out, err := exec.Command(bin, "ops", "list", "-store", full.url, "-state", "pending").CombinedOutput()
		cmds = append(cmds, time.Since(s))
		if err != nil {
			t.Fatalf("ops list: %v\n%s", err, out)
		}
	}
	t.Logf("LIST %s n=%d: List(pending, 101) in process p50 %.2f ms max %.2f ms; `ops list -state pending` (a process: start, open, list 100, print) p50 %.0f ms max %.0f ms",
		t.Name(), n, q(lists, 0.5), q(lists, 1), q(cmds, 0.5), q(cmds, 1))
	if full.explain != nil {
		full.explain(t)
	}
}

// explainSQL prints the plans of the statements a charge and a pending list run.
func explainSQL(t *testing.T, db *sql.DB, prefix, table string, args ...any) {
	for _, q := range []string{
		"SELECT * FROM " + table + " WHERE operation_id = 'x'",
		"SELECT * FROM " + table + " WHERE operation_id <> '~' AND state IN ('pending') ORDER BY updated_at, operation_id LIMIT 101",
		"SELECT * FROM " + table + " WHERE operation_id <> '~' AND state IN ('pending', 'unknown') ORDER BY updated_at, operation_id LIMIT 101",
		"DELETE FROM " + table + " WHERE operation_id IN (SELECT operation_id FROM " + table + " WHERE state IN ('succeeded', 'failed') AND updated_at < 0 ORDER BY updated_at LIMIT 200)",
	} {
		rows, err := db.Query(prefix+q, args...)
		if err != nil {
			t.Logf("explain: %v", err)
			continue
		}
		cols, _ := rows.Columns()
		var lines []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			_ = rows.Scan(ptrs...)
			var parts []string
			for _, v := range vals {
				parts = append(parts, fmt.Sprint(v))
			}
			lines = append(lines, strings.Join(parts, " "))
		}
		rows.Close()
		t.Logf("PLAN %s\n  %s", q, strings.Join(lines, "\n  "))
	}
}
