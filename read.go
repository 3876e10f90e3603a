// The client's reads: a GET retried within its own attempts, one object by
// path, and every page of a list.

package pagpolar

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// getN performs a read with at most maxAttempts attempts: reads have no
// effect, so they are retried on transport errors, 429 and 5xx (within the
// retry budget). A non-2xx answer that is not retried is an *APIError.
func (c *Client) getN(ctx context.Context, u *url.URL, maxAttempts int) (*response, error) {
	var bo BackOff
	var last error
	for attempt := 1; ; attempt++ {
		token, err := c.token(ctx)
		var r *response
		if err == nil {
			r, err = c.sendWith(ctx, token, http.MethodGet, u, nil, "")
		}
		var retryAfter time.Duration
		switch {
		case err != nil:
			last = err
		case r.status >= 200 && r.status < 300:
			// Reads spend the budget when they retry but do not earn it:
			// only answers to money requests say the API is processing them.
			return r, nil
		case r.status == 429 || r.status >= 500:
			last = c.apiError(r, "", token, nil)
			retryAfter = c.retryAfter(r.header)
		default:
			return r, c.apiError(r, "", token, nil)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("pagpolar: GET %s: %w (last error: %v)", u.Path, ctx.Err(), last)
		}
		if attempt >= maxAttempts {
			return nil, fmt.Errorf("pagpolar: GET %s failed after %d attempt(s): %w", u.Path, attempt, last)
		}
		if !c.budget.takeRetry() {
			return nil, fmt.Errorf("pagpolar: GET %s: %w (last error: %w)", u.Path, ErrBudgetExhausted, last)
		}
		if bo == nil {
			bo = c.policy.NewBackOff()
		}
		w := c.policy.nextWait(bo, retryAfter)
		c.emit(ctx, Event{Kind: EventWait, Path: u.Path, Attempt: attempt, Wait: w, Err: last})
		if err := sleep(ctx, c.clock, w); err != nil {
			return nil, fmt.Errorf("pagpolar: GET %s: %w (last error: %v)", u.Path, err, last)
		}
	}
}

// getObject reads one object (GET path) with the policy's attempts.
func (c *Client) getObject(ctx context.Context, kind effectKind, path string) (effect, error) {
	r, err := c.getN(ctx, c.url(path, nil), c.policy.MaxAttempts)
	if err != nil {
		return effect{}, err
	}
	e, err := readEffect(kind, wire.AnswerGet, r.body)
	if err != nil {
		return effect{}, fmt.Errorf("pagpolar: GET %s: %w", path, err)
	}
	return e, nil
}

// listAll reads every page of a list (GET path?query) with the policy's
// attempts per page. A list the SDK cannot read whole is an error wrapping
// ErrIncompleteList, with the items it did read.
func (c *Client) listAll(ctx context.Context, kind effectKind, path string, q url.Values) ([]effect, error) {
	items, complete, why, err := c.readList(ctx, path, q, c.policy.MaxAttempts, time.Time{})
	if err != nil {
		return nil, err
	}
	effs := readEffects(kind, wire.AnswerList, items)
	if !complete {
		return effs, fmt.Errorf("pagpolar: GET %s: %w: %s", path, ErrIncompleteList, why)
	}
	return effs, nil
}
