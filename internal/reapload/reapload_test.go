// Package reapload measures live charges while a reap removes a large
// number of expired records. It is a measurement, not a
// unit test: it runs only when PAGPOLAR_REAP_LOAD names the stores to
// measure (comma-separated: sqlite, postgres, redis), and prints its figures
// with t.Log (run with -v).
//
//	PAGPOLAR_REAP_LOAD=sqlite     stores to measure
//	PAGPOLAR_REAP_N=500000        expired records filled before the reap
//	PAGPOLAR_REAP_MODE=proc       proc: `pagpolar ops reap` in its own process; inproc: keystore.Reap on the live Store
//	PAGPOLAR_REAP_PAR=1           live callers
//	PAGPOLAR_REAP_BASE=8s         length of the baseline phases (before and after the reap)
//	PAGPOLAR_REAP_ARGS=""         extra `ops reap` flags (proc), e.g. "-batch 200"
//
// Each run: one real PIX charge through the SDK gives a settled record, which
// is copied N times with an UpdatedAt 40 days old (through the store's own
// schema: SQL INSERT ... SELECT, or the Redis hash and index the store
// writes); then live charges run for BASE (before), during the reap, and for
// BASE again (after). The ratios compare the reap phase with the mean of
// before and after.
package reapload

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

const retention = 30 * 24 * time.Hour

var customer = pagpolar.Customer{Name: "Maria Silva", Email: "maria@example.com", Document: "12345678909", Phone: "11912345678"}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// target is one store under measurement.
type target struct {
	store keystore.Store
	url   string // for `pagpolar ops reap -store`
	// fill copies the record of opID n times as state, last updated age
	// ago, their IDs opID-fill<tag>-<i>.
	fill func(t *testing.T, opID, tag string, n int, state string, age time.Duration)
	// expired counts the terminal records older than the cut-off.
	expired func(t *testing.T) int
	// explain prints query plans and index depth (SQL stores).
	explain func(t *testing.T)
}

func TestReapUnderLoad(t *testing.T) {
	which := os.Getenv("PAGPOLAR_REAP_LOAD")
	if which == "" {
		t.Skip("PAGPOLAR_REAP_LOAD not set (a measurement: see the package doc)")
	}
	n, _ := strconv.Atoi(env("PAGPOLAR_REAP_N", "500000"))
	par, _ := strconv.Atoi(env("PAGPOLAR_REAP_PAR", "1"))
	base, err := time.ParseDuration(env("PAGPOLAR_REAP_BASE", "8s"))
	if err != nil {
		t.Fatal(err)
	}
	mode := env("PAGPOLAR_REAP_MODE", "proc")
	var bin string
	if mode == "proc" {
		bin = filepath.Join(t.TempDir(), "pagpolar")
		out, err := exec.Command("go", "build", "-o", bin, "../../cmd/pagpolar").CombinedOutput()
		if err != nil {
			t.Fatalf("build: %v\n%s", err, out)
		}
	}
	for _, name := range strings.Split(which, ",") {
		t.Run(name, func(t *testing.T) {
			var tg target
			switch name {
			case "sqlite":
				tg = sqliteTarget(t)
			case "postgres":
				tg = postgresTarget(t)
			case "redis":
				tg = redisTarget(t)
			default:
				t.Fatalf("unknown store %q", name)
			}
			measure(t, tg, n, par, base, mode, bin)
		})
	}
}

type phase struct {
	lat   []time.Duration
	wall  time.Duration
	fails int
}

func (p phase) rate() float64 { return float64(len(p.lat)) / p.wall.Seconds() }

func (p phase) q(f float64) time.Duration {
	if len(p.lat) == 0 {
		return 0
	}
	s := slices.Clone(p.lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(f*float64(len(s))))]
}

func (p phase) String() string {
	return fmt.Sprintf("%6.0f charges/s  p50 %7.2f ms  p99 %7.2f ms  max %7.1f ms  (%d charges, %d failed, %.1f s)",
		p.rate(), ms(p.q(0.5)), ms(p.q(0.99)), ms(p.q(1)), len(p.lat), p.fails, p.wall.Seconds())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func measure(t *testing.T, tg target, n, par int, base time.Duration, mode, bin string) {
	ctx := context.Background()
	srv := pagpolartest.NewServer(t)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
	c, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), pagpolar.WithBaseURL(srv.URL),
		pagpolar.WithHTTPClient(hc), pagpolar.WithStore(tg.store))
	if err != nil {
		t.Fatal(err)
	}
	var seq atomic.Int64
	charge := func() error {
		ref := fmt.Sprintf("live-%d-%d", time.Now().UnixNano(), seq.Add(1))
		_, err := c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: ref, Customer: customer})
		return err
	}
	if err := charge(); err != nil {
		t.Fatal(err)
	}
	recs, err := tg.store.List(ctx, keystore.Filter{States: []keystore.State{keystore.StateSucceeded}, Limit: 1})
	if err != nil || len(recs) != 1 {
		t.Fatalf("template record: %v %d", err, len(recs))
	}
	// run runs live charges until stop is closed (or for d when stop is nil).
	run := func(d time.Duration, stop <-chan struct{}) phase {
		var mu sync.Mutex
		var p phase
		var wg sync.WaitGroup
		end := time.Now().Add(d)
		t0 := time.Now()
		for range par {
			wg.Go(func() {
				var lat []time.Duration
				fails := 0
				stopped := func() bool {
					if stop == nil {
						return time.Now().After(end)
					}
					select {
					case <-stop:
						return true
					default:
						return false
					}
				}
				for !stopped() {
					s := time.Now()
					if err := charge(); err != nil {
						fails++
						if fails < 3 {
							t.Logf("charge: %v", err)
						}
						continue
					}
					lat = append(lat, time.Since(s))
				}
				mu.Lock()
				p.lat = append(p.lat, lat...)
				p.fails += fails
				mu.Unlock()
			})
		}
		wg.Wait()
		p.wall = time.Since(t0)
		return p
	}

	reap := func() (string, time.Duration, error) {
		s := time.Now()
		if mode == "inproc" {
			o := keystore.ReapOptions{Retention: retention}
			fs := flag.NewFlagSet("reap", flag.ContinueOnError)
			fs.IntVar(&o.Batch, "batch", 0, "")
			fs.Float64Var(&o.Yield, "yield", 0, "")
			fs.DurationVar(&o.MinPause, "min-pause", 0, "")
			fs.DurationVar(&o.MaxPause, "max-pause", 0, "")
			if err := fs.Parse(strings.Fields(os.Getenv("PAGPOLAR_REAP_ARGS"))); err != nil {
				return "", 0, err
			}
			var batches int
			var busy, paused time.Duration
			o.Progress = func(b keystore.ReapBatch) { batches++; busy += b.Took; paused += b.Pause }
			k, err := keystore.ReapWith(ctx, tg.store, o)
			return fmt.Sprintf("removed %d in %d batches: %.1f s deleting, %.1f s paused", k, batches, busy.Seconds(), paused.Seconds()), time.Since(s), err
		}
		args := append([]string{"ops", "reap", "-store", tg.url}, strings.Fields(os.Getenv("PAGPOLAR_REAP_ARGS"))...)
		out, err := exec.Command(bin, args...).CombinedOutput()
		return strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", "; "), time.Since(s), err
	}

	rounds, _ := strconv.Atoi(env("PAGPOLAR_REAP_ROUNDS", "1"))
	t.Logf("load average at start: %s", loadavg())
	prev := run(base, nil)
	t.Logf("base 0: %s", prev)
	var tput, p99s, p50s []float64
	for r := range rounds {
		start := time.Now()
		tg.fill(t, recs[0].OperationID, fmt.Sprintf("r%d", r), n, "succeeded", 40*24*time.Hour)
		t.Logf("round %d: filled %d expired records in %.1f s; expired now %d", r, n, time.Since(start).Seconds(), tg.expired(t))
		stop := make(chan struct{})
		var reapOut string
		var reapWall time.Duration
		var reapErr error
		go func() {
			defer close(stop)
			reapOut, reapWall, reapErr = reap()
		}()
		during := run(0, stop)
		<-stop // with no live callers, run returns at once
		t.Logf("round %d: during the %s reap (%.1f s, load average %s): %s", r, mode, reapWall.Seconds(), loadavg(), during)
		t.Logf("round %d: reap: %s (err %v)", r, reapOut, reapErr)
		next := run(base, nil)
		t.Logf("base %d: %s", r+1, next)
		if left := tg.expired(t); reapErr != nil || left != 0 {
			t.Errorf("reap: %v, %d expired records left", reapErr, left)
		}
		if during.fails > 0 {
			t.Errorf("%d live charges failed during the reap", during.fails)
		}
		ref := phase{lat: append(slices.Clone(prev.lat), next.lat...), wall: prev.wall + next.wall}
		tput = append(tput, during.rate()/ref.rate())
		p99s = append(p99s, ms(during.q(0.99))/ms(ref.q(0.99)))
		p50s = append(p50s, ms(during.q(0.5))/ms(ref.q(0.5)))
		t.Logf("RESULT round %d %s %s par=%d n=%d: throughput %.2fx (%.0f vs %.0f/s), p99 %.2fx (%.2f vs %.2f ms), p50 %.2fx, reap %.1f s",
			r, t.Name(), mode, par, n, tput[r], during.rate(), ref.rate(),
			p99s[r], ms(during.q(0.99)), ms(ref.q(0.99)), p50s[r], reapWall.Seconds())
		prev = next
	}
	t.Logf("SUMMARY %s %s par=%d n=%d rounds=%d args=%q: throughput median %s, p99 median %s, p50 median %s; load average at end %s",
		t.Name(), mode, par, n, rounds, os.Getenv("PAGPOLAR_REAP_ARGS"), medRange(tput), medRange(p99s), medRange(p50s), loadavg())
}

// medRange is "median (min–max)" of xs, as ratios.
func medRange(xs []float64) string {
	s := slices.Clone(xs)
	slices.Sort(s)
	return fmt.Sprintf("%.2fx (%.2f–%.2f)", s[len(s)/2], s[0], s[len(s)-1])
}
