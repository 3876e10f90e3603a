package pagpolarriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/riverqueue/river"

	pagpolar "github.com/pagpolar/pagpolar-go"
)

// ErrIntentMismatch: an intent was inserted under an operation ID whose
// job holds other params (it also matches pagpolar.ErrParamsMismatch).
// Nothing was inserted; roll the order's transaction back.
var ErrIntentMismatch = fmt.Errorf("pagpolarriver: an intent with this operation ID and other params exists: %w", pagpolar.ErrParamsMismatch)

// Inserted is what InsertTx did.
type Inserted struct {
	JobID int64
	// Duplicate: a job for this operation ID existed already (with the
	// same params); nothing new was inserted.
	Duplicate bool
}

// InsertTx inserts the intent in tx, the transaction that writes the
// order, so that both commit or neither does: an order committed without
// its charge intent, or charged after its transaction rolled back, cannot
// happen. TTx is *sql.Tx (database/sql over pgx's stdlib or SQLite) or
// pgx.Tx. opts may be nil; its UniqueOpts are replaced by the intent's
// (the operation ID is the job's identity).
//
// A second insert of one intent is one job (Duplicate); a second insert
// of its operation ID with other params is ErrIntentMismatch. Invalid
// intents are a *pagpolar.ValidationError naming the field, before
// anything is written.
func InsertTx[TTx any](ctx context.Context, client *river.Client[TTx], tx TTx, intent Intent, opts *river.InsertOpts) (Inserted, error) {
	if client == nil {
		return Inserted{}, errors.New("pagpolarriver: InsertTx: client is nil")
	}
	if intent == nil || reflect.ValueOf(intent).Kind() == reflect.Pointer {
		return Inserted{}, errors.New("pagpolarriver: InsertTx: want an intent value (PixIntent{...}), not nil or a pointer")
	}
	if err := intent.validate(); err != nil {
		return Inserted{}, err
	}
	o := intent.InsertOpts()
	if opts != nil {
		o2 := *opts
		o2.UniqueOpts = o.UniqueOpts
		o = o2
	}
	res, err := client.InsertTx(ctx, tx, intent, &o)
	if err != nil {
		return Inserted{}, fmt.Errorf("pagpolarriver: inserting intent %q: %w", intent.OperationIDOf(), err)
	}
	if res.UniqueSkippedAsDuplicate {
		same, err := sameArgs(intent, res.Job.EncodedArgs)
		if err != nil {
			return Inserted{}, fmt.Errorf("pagpolarriver: intent %q: reading the existing job %d: %w", intent.OperationIDOf(), res.Job.ID, err)
		}
		if !same || res.Job.Kind != intent.Kind() {
			return Inserted{}, fmt.Errorf("%w (operation %q, job %d)", ErrIntentMismatch, intent.OperationIDOf(), res.Job.ID)
		}
	}
	return Inserted{JobID: res.Job.ID, Duplicate: res.UniqueSkippedAsDuplicate}, nil
}

// sameArgs reports whether encoded (an existing job's args) decodes to
// intent.
func sameArgs(intent Intent, encoded []byte) (bool, error) {
	p := reflect.New(reflect.TypeOf(intent))
	if err := json.Unmarshal(encoded, p.Interface()); err != nil {
		return false, err
	}
	return p.Elem().Interface() == any(intent), nil
}
