package wire

// Which names the SDK reads for each field, per kind of answer. A field
// proves only what it was seen to carry (SAFETY rule 5): the client learns,
// per answer kind and per name, whether answers of that kind echo what it
// sent under that name, and compares a value with what it sent only then.
// So the names are listed per answer kind: a list item is not a POST
// answer, and a name read in one kind proves nothing in another. Every
// reader of an effect goes through Names.

// Answer is the kind of answer an object came in.
type Answer int

// Answer kinds.
const (
	AnswerPost    Answer = iota // the answer to a money POST (or its replay)
	AnswerList                  // an item of a list route (GET /sales, /refunds, /subscriptions)
	AnswerGet                   // an object read by its ID (GET /subscriptions/{id}, its plan changes)
	AnswerWebhook               // a webhook event's data
	answerKinds
)

func (a Answer) String() string {
	return [...]string{"POST answer", "list item", "GET by ID", "webhook data"}[a]
}

// Field is one field of an effect.
type Field int

// Fields of an effect.
const (
	FID Field = iota
	FRef
	FMethod
	FOffer
	FFromOffer
	FSubscription
	FSale
	FStatus
	FAmount
	FCreated
	FPlanChanges
	FNextOffer
	fieldCount
)

func (f Field) String() string {
	return [...]string{"identifier", "external reference", "payment method", "offer", "from-offer", "subscription",
		"sale", "status", "amount", "creation time", "plan changes", "next offer"}[f]
}

// fieldNames is the table: for each answer kind, the names of each field,
// first the one the fake uses. The kinds read the same names today; a
// kind whose shape is learned to differ gets its own row here.
var fieldNames = func() (t [answerKinds][fieldCount][]string) {
	base := [fieldCount][]string{
		FID: FieldID, FRef: FieldExternalReference, FMethod: FieldPaymentMethod, FOffer: FieldOffer,
		FFromOffer: FieldFromOffer, FSubscription: FieldSubscriptionID, FSale: FieldSaleID, FStatus: FieldStatus,
		FAmount: FieldAmount, FCreated: FieldCreatedAt, FPlanChanges: FieldPlanChanges, FNextOffer: FieldNextOffer,
	}
	for a := range t {
		t[a] = base
	}
	return t
}()

// Names returns the names the SDK reads for field f in an answer of kind a.
func Names(a Answer, f Field) []string { return fieldNames[a][f] }
