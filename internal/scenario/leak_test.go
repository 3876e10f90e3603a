package scenario

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
)

// blockingStore holds every Get until release is closed: a call reading
// it stays inside the SDK for as long as the test wants.
type blockingStore struct {
	*keystore.Memory
	entered chan struct{}
	release chan struct{}
}

func (s *blockingStore) Get(ctx context.Context, id string) (keystore.Record, error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release // deliberately deaf to ctx: this is the leak
	return s.Memory.Get(ctx, id)
}

// A goroutine still running SDK code when a run ends (here a Resume that
// a test starts once the steps are over and that never returns while the
// run is checked) is reported as a violation, and so fails the run: the
// no-goroutine-left check fires, it does not only pass.
func TestRun_GoroutineLeftRunningSDKCodeIsAViolation(t *testing.T) {
	store := &blockingStore{Memory: keystore.NewMemory(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	done := make(chan struct{})
	afterSteps = func() {
		c, err := pagpolar.NewClient("acme", pagpolar.StaticToken("t"), pagpolar.WithBaseURL("http://127.0.0.1:1"),
			pagpolar.WithStore(store), pagpolar.WithLogger(quiet))
		if err != nil {
			t.Error(err)
			close(done)
			return
		}
		go func() {
			defer close(done)
			_, _ = c.Resume(context.Background(), "pix:1001")
		}()
		select {
		case <-store.entered:
		case <-time.After(10 * time.Second):
			t.Error("the leaked Resume never reached the store")
		}
	}
	defer func() { afterSteps = nil }()
	res, err := Run(Scenario{Seed: 1, Clients: 1, Steps: []Step{{Do: DoPix}}})
	close(store.release) // end the leak, so the test itself leaves nothing
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the leaked Resume did not return once released")
	}
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, v := range res.Failures() {
		if v.OpID == "goroutine" && strings.Contains(v.What, "Resume") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no goroutine violation for a Resume left blocked in the store; violations: %v", res.Violations)
	}
	// And without the leak, the same run is clean.
	afterSteps = nil
	res, err = Run(Scenario{Seed: 1, Clients: 1, Steps: []Step{{Do: DoPix}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Violations {
		t.Errorf("without a leak: %s", v)
	}
}
