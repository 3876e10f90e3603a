package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	execpkg "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/longtest"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
)

// fillExpired inserts n succeeded records last updated 40 days ago
// straight into the table (the store's own schema), in one transaction.
func fillExpired(t *testing.T, path string, n int) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	old := time.Now().Add(-40 * 24 * time.Hour).UnixMilli()
	q := fmt.Sprintf(`WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM c WHERE n < %d)
INSERT INTO %s (operation_id, idempotency_key, kind, fingerprint, state, version, attempts, first_sent_at, last_sent_at,
	result_ref, result_data, error_text, meta_data, lease_owner, lease_token, lease_expires_at, created_at, updated_at)
SELECT 'old-' || n, 'key-' || n, 'pix', 'fp', 'succeeded', 2, 1, %[3]d, %[3]d, 'sale-' || n,
	CAST('{"id":"sale","status":"paid"}' AS BLOB), '', NULL, '', 1, %[3]d, %[3]d + n, %[3]d + n FROM c`, n, sqlstore.DefaultTable, old)
	if _, err := db.Exec(q); err != nil {
		t.Fatal(err)
	}
}

// reapChildEnv names the database a re-executed test binary reaps (see
// TestSQLiteReapChild).
const reapChildEnv = "PAGPOLAR_TEST_REAP_CHILD"

// TestSQLiteReapChild is the reaping process of
// TestSQLiteReapInAnotherProcessNeverFailsACreate: it runs only in the test
// binary that test starts.
func TestSQLiteReapChild(t *testing.T) {
	path := os.Getenv(reapChildEnv)
	if path == "" {
		t.Skip("only run as the child of TestSQLiteReapInAnotherProcessNeverFailsACreate")
	}
	s, err := sqlstore.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n, err := keystore.ReapWith(context.Background(), s, keystore.ReapOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("reaped %d\n", n)
}

// A reap in another process (its own connections, its own writer) holds
// the file's write lock only for short batches and pauses after each, so
// the live process's Creates, waiting on SQLite's busy handler, get the
// lock between batches: none fails, even with a busy timeout of 1 s, and
// they keep committing while the reap runs. (With the pauses off, -yield
// -1, a batch follows the previous commit at once and the live writer's
// busy handler, which backs off up to 100 ms between retries, rarely finds
// the lock free, and Creates fail with a short busy timeout.)
func TestSQLiteReapInAnotherProcessNeverFailsACreate(t *testing.T) {
	longtest.Skip(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ops.db")
	live, err := sqlstore.OpenSQLite(path, sqlstore.WithBusyTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := live.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	const expired = 10000
	fillExpired(t, path, expired)
	if _, err := live.Create(ctx, rec("unfinished"), "w", time.Minute); err != nil {
		t.Fatal(err)
	}

	child := execpkg.Command(os.Args[0], "-test.run=^TestSQLiteReapChild$", "-test.count=1")
	child.Env = append(os.Environ(), reapChildEnv+"="+path)
	var out []byte
	var childErr error
	reaped := make(chan struct{})
	go func() {
		defer close(reaped)
		out, childErr = child.CombinedOutput()
	}()

	var (
		mu       sync.Mutex
		ok       int
		during   int
		failures []error
		wg       sync.WaitGroup
	)
	// Live traffic, not a flood: each writer rests 2 ms between Creates
	// (a store kept 100% busy by its live writers leaves a polite reap
	// little room, and it then takes its time).
	for w := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-reaped:
					return
				case <-time.After(2 * time.Millisecond):
				}
				_, err := live.Create(ctx, rec(fmt.Sprintf("live-%d-%d", w, i)), "w", time.Minute)
				mu.Lock()
				switch {
				case err != nil:
					failures = append(failures, err)
				default:
					ok++
					select {
					case <-reaped:
					default:
						during++
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if childErr != nil {
		t.Fatalf("reaping process: %v\n%s", childErr, out)
	}
	if want := "reaped " + strconv.Itoa(expired); !slices.Contains(strings.Split(string(out), "\n"), want) {
		t.Fatalf("reaping process said %q, want %q", out, want)
	}
	for i, err := range failures {
		if i < 3 {
			t.Errorf("a live Create failed while the other process reaped: %v", err)
		}
	}
	if len(failures) > 0 {
		t.Fatalf("%d of %d live Creates failed during the reap", len(failures), ok+len(failures))
	}
	if during == 0 {
		t.Fatal("no live Create committed while the other process reaped")
	}
	// What the reap must leave: the unfinished record and every live one.
	// Tens of thousands of records are read back through a store of their
	// own whose call timeout fits one list of them all on a loaded machine
	// (the live store's 5 s bound is for the traffic above, not for this).
	verify, err := sqlstore.OpenSQLite(path, sqlstore.WithCallTimeout(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer verify.Close()
	if _, err := verify.Get(ctx, "unfinished"); err != nil {
		t.Fatalf("the unfinished record after the reap: %v", err)
	}
	left, err := verify.List(ctx, keystore.Filter{States: []keystore.State{keystore.StateSucceeded}, Limit: 10})
	if err != nil || len(left) != 0 {
		t.Fatalf("succeeded records left after the reap: %d (%v)", len(left), err)
	}
	pending, err := verify.List(ctx, keystore.Filter{States: []keystore.State{keystore.StatePending}, Limit: 1 << 20})
	if err != nil || len(pending) != ok+1 {
		t.Fatalf("pending records after the reap: %d, want %d (%v)", len(pending), ok+1, err)
	}
	t.Logf("%d live Creates committed while another process reaped %d records, none failed", during, expired)
}

// A reap in the same process goes through the Store's writer, one short
// batch at a time; Creates queued meanwhile share the batches' commits and
// none fails.
func TestSQLiteReapInProcessNeverFailsACreate(t *testing.T) {
	longtest.Skip(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ops.db")
	s, err := sqlstore.OpenSQLite(path, sqlstore.WithBusyTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	const expired = 20000
	fillExpired(t, path, expired)
	done := make(chan struct{})
	var n int
	var reapErr error
	go func() {
		defer close(done)
		n, reapErr = keystore.ReapWith(ctx, s, keystore.ReapOptions{})
	}()
	creates := 0
	for i := 0; ; i++ {
		select {
		case <-done:
		default:
			if _, err := s.Create(ctx, rec(fmt.Sprintf("live-%d", i)), "w", time.Minute); err != nil {
				t.Fatalf("Create during the reap: %v", err)
			}
			creates++
			continue
		}
		break
	}
	if reapErr != nil || n != expired {
		t.Fatalf("reap: %d, %v; want %d", n, reapErr, expired)
	}
	// Read back through a store whose call timeout fits one list of every
	// live record on a loaded machine.
	verify, err := sqlstore.OpenSQLite(path, sqlstore.WithCallTimeout(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer verify.Close()
	got, err := verify.List(ctx, keystore.Filter{Limit: 1 << 20})
	if err != nil || len(got) != creates {
		t.Fatalf("records after the reap: %d, want the %d live ones (%v)", len(got), creates, err)
	}
}

// A delete whose batch reaches its COMMIT after the caller's context ended
// is still answered with what it removed: DeleteExpired never reports an
// error (0 removed) over rows it removed, so a reap's total is what it
// removed. (Before, the caller left at once and the batch committed
// anyway: each batch committed after a call timeout went uncounted.)
func TestSQLiteDeleteExpiredCountsABatchCommittedAfterItsCallerLeft(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ops.db")
	s, err := sqlstore.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	const expired, batch = 500, 200
	fillExpired(t, path, expired)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	returned := make(chan struct{})
	var once sync.Once
	sqlstore.SetBeforeCommit(s, func() {
		once.Do(func() {
			// The caller's context ends while its delete is on the way to
			// COMMIT; the commit waits until the caller has answered (or a
			// second, if the caller waits for the commit).
			cancel()
			select {
			case <-returned:
			case <-time.After(time.Second):
			}
		})
	})
	n, err := s.DeleteExpired(ctx, time.Now().Add(-keystore.MinRetention), batch)
	close(returned)
	// A write queued now is applied after that batch: once it is answered,
	// the batch has committed (or rolled back).
	if _, err := s.Create(context.Background(), rec("after"), "w", time.Minute); err != nil {
		t.Fatal(err)
	}

	left, lerr := s.List(context.Background(), keystore.Filter{States: []keystore.State{keystore.StateSucceeded}, Limit: 1 << 20})
	if lerr != nil {
		t.Fatal(lerr)
	}
	removed := expired - len(left)
	if n != removed {
		t.Fatalf("DeleteExpired answered %d removed (err %v), but it removed %d records", n, err, removed)
	}
	if removed != batch || err != nil {
		t.Fatalf("DeleteExpired removed %d, err %v; want %d, nil", removed, err, batch)
	}
}
