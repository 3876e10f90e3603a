package scenario

import (
	"slices"
	"time"

	"pgregory.net/rapid"

	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// Draw draws a scenario. Each part is drawn on its own, so rapid shrinks
// each toward "nothing unusual": no shapes, no mutations, true clocks, no
// cache, one client, few steps without faults.
func Draw(t *rapid.T) Scenario {
	sc := Scenario{
		Seed:    rapid.Int64Range(1, 1<<30).Draw(t, "seed"),
		Clients: rapid.IntRange(1, 3).Draw(t, "clients"),
	}
	all := pagpolartest.AllShapes()
	sc.Shapes = rapid.SliceOfNDistinct(rapid.SampledFrom(all), 0, 4, func(s pagpolartest.Shape) pagpolartest.Shape { return s }).Draw(t, "shapes")
	sc.NoSubscriptionLookup = rapid.IntRange(0, 5).Draw(t, "no-sub-lookup") == 0
	sc.Mutations = rapid.SliceOfN(drawMutation(), 0, 3).Draw(t, "mutations")
	sc.APIClock = drawAPIClock(t)
	sc.ClientSkew = rapid.SampledFrom([]time.Duration{0, 0, 0, -90 * time.Second, 3 * time.Minute, -2 * time.Hour, 700 * time.Millisecond}).Draw(t, "client-skew")
	sc.Cache = rapid.SampledFrom([]Cache{CacheNone, CacheNone, CacheNone, CacheStale, CacheAgeZero, CacheStaleGarbled, CacheStaleTwoAges, CacheStaleNoAge}).Draw(t, "cache")
	sw := drawSwarm(t)
	sc.Steps = rapid.SliceOfN(drawStep(sc.Clients, sw), 1, 8).Draw(t, "steps")
	if len(sc.Steps) > 0 {
		sc.Steps[0].Concurrent = false
	}
	if warm := rapid.IntRange(0, 2).Draw(t, "warm"); warm > 0 {
		sc.Steps = append(warmUp(sc.Clients, warm == 2), sc.Steps...)
	}
	return sc
}

// warmUp is what a process that has served customers before has done,
// each client on an order of its own (2 and up): a clean PIX charge,
// whose fresh answer shows what POST answers carry; with lookups, then a
// boleto charge of the same order answered 500 after its commit, whose
// lookup lists the PIX sale, the client's own, and so shows what lists
// carry. A client that has learned an API's answers is the one a field it
// has not seen carried under that name, in that kind of answer, can
// mislead; one that has seen them in lists too knows more of them.
func warmUp(clients int, lookups bool) []Step {
	var steps []Step
	for a := range clients {
		steps = append(steps, Step{Actor: a, Do: DoPix, Order: 2 + a})
		if lookups {
			steps = append(steps, Step{Actor: a, Do: DoBoleto, Order: 2 + a, Faults: []Fault{{Action: pagpolartest.FaultCommitThen500}}})
		}
	}
	return steps
}

// readFields are the answers a lookup reads, weighted by how many money
// routes read them (the sale lists by three), each with the fields the
// SDK compares in it with what was sent; valueEdits change such a value
// while leaving it readable, or take it away.
var (
	readFields = []struct {
		answers Answers
		fields  []string
	}{
		{ListSales, []string{"payment_method", "offer_identifier", "external_reference", "status"}},
		{ListSales, []string{"payment_method", "offer_identifier", "external_reference", "status"}},
		{ListSales, []string{"payment_method", "offer_identifier", "external_reference", "status"}},
		{GetSale, []string{"payment_method", "offer_identifier", "external_reference", "status"}},
		{ListRefunds, []string{"sale_identifier", "status"}},
		{ListSubs, []string{"offer_identifier", "external_reference", "payment_method", "status"}},
		{GetSubscription, []string{"subscription_id", "status"}},
	}
	valueEdits = []Edit{EditRekey, EditAlias, EditUpper, EditTitle, EditRemove, EditStringNumber}
)

func drawMutation() *rapid.Generator[Mutation] {
	return rapid.Custom(func(t *rapid.T) Mutation {
		// One of the second host only (a rolling deploy) in four, and one
		// in four once deployed (by a DoDeploy step, while the clients
		// run).
		other := rapid.IntRange(0, 3).Draw(t, "other-host-only") == 0
		later := rapid.IntRange(0, 3).Draw(t, "deployed-later") == 0
		if rapid.Bool().Draw(t, "read-field") {
			// Half the mutations change a compared field in what a lookup
			// reads, and only there: the POST answers keep echoing it as
			// sent, so what they taught proves nothing in another kind of
			// answer, nor under another name.
			rf := rapid.SampledFrom(readFields).Draw(t, "read-answers")
			return Mutation{
				Answers:   rf.answers,
				Edit:      rapid.SampledFrom(valueEdits).Draw(t, "read-edit"),
				Field:     rapid.SampledFrom(rf.fields).Draw(t, "read-field-name"),
				OtherHost: other,
				Later:     later,
			}
		}
		m := Mutation{
			OtherHost: other,
			Later:     later,
			Answers: rapid.SampledFrom([]Answers{PostPix, PostBoleto, PostCard, PostSubscribe, PostPlanChange, PostRefund,
				ListSales, ListRefunds, ListSubs, GetSale, GetSubscription, AnyAnswer}).Draw(t, "answers"),
			Edit: rapid.SampledFrom([]Edit{EditRename, EditAlias, EditRekey, EditRemove, EditNumberString, EditStringNumber, EditUpper, EditTitle,
				EditTimeUnix, EditTimeNoZone, EditTimeOffset, EditSaleAmount, EditWrap, EditBareList, EditMoreFlag, EditCompact, EditTotalMore}).Draw(t, "edit"),
		}
		switch m.Edit {
		case EditWrap, EditBareList, EditMoreFlag, EditCompact, EditTotalMore:
		case EditSaleAmount:
			m.Answers = rapid.SampledFrom([]Answers{PostRefund, ListRefunds}).Draw(t, "refund-answers")
		case EditTimeUnix, EditTimeNoZone, EditTimeOffset:
			m.Field = "created_at"
		case EditUpper, EditTitle:
			// The offer too: one kind of answer (a list) spelling it in
			// another case while another (the POST answer) echoes it as
			// sent.
			m.Field = rapid.SampledFrom([]string{"payment_method", "status", "offer_identifier"}).Draw(t, "field")
		default:
			m.Field = rapid.SampledFrom(editFields).Draw(t, "field")
		}
		return m
	})
}

func drawAPIClock(t *rapid.T) APIClock {
	var c APIClock
	if rapid.IntRange(0, 2).Draw(t, "api-clock-odd") > 0 {
		return c
	}
	// Offsets and steps under a second are what the step detector cannot
	// see (Date has whole seconds): the exclusion margin must cover them.
	c.Shift = rapid.SampledFrom([]time.Duration{0, 2 * time.Second, -2 * time.Second, 900 * time.Millisecond, 3 * time.Hour, -3 * time.Hour}).Draw(t, "date-shift")
	if rapid.Bool().Draw(t, "date-steps") {
		c.StepAt = rapid.IntRange(1, 12).Draw(t, "date-step-at")
		c.Step = rapid.SampledFrom([]time.Duration{time.Hour, -time.Hour, 5 * time.Second, -5 * time.Second, 900 * time.Millisecond, -900 * time.Millisecond, -10 * time.Minute}).Draw(t, "date-step")
	}
	c.OtherHost = rapid.SampledFrom([]time.Duration{0, 0, 900 * time.Millisecond, 1500 * time.Millisecond, -3 * time.Second, 2 * time.Minute}).Draw(t, "other-host")
	c.DropEvery = rapid.SampledFrom([]int{0, 0, 2, 3}).Draw(t, "date-drop-every")
	return c
}

// Weighted: money calls most, the rest as they happen in life.
var stepActions = []Action{
	DoPix, DoPix, DoBoleto, DoCard, DoCard, DoSubscribe, DoRefund, DoRefund, DoPlanChange, DoPlanChange,
	DoResume, DoResumeAll, DoRestart, DoAdvance, DoClientStep, DoWebhooks, DoPay, DoAmnesia, DoForgetOne, DoAcceptLoss, DoDeploy, DoAPIStep,
}

// moneyFaults are what a money request can meet (drawFault says what each
// stands for); the card's decline is added for cards.
var moneyFaults = []pagpolartest.FaultAction{
	pagpolartest.FaultCommitThenDrop,       // the answer is lost after the sale was made
	pagpolartest.FaultCommitDropRelease,    // lost, and the key released (an error after the commit)
	pagpolartest.FaultDropBeforeProcessing, // the request is lost before the API
	pagpolartest.FaultCommitThen500,        // 500 after the commit
	pagpolartest.FaultCommitThen500After,   // a slow 500 after the commit, key in processing meanwhile
	pagpolartest.Fault500NoCommit,          // 500, nothing made
	pagpolartest.FaultHold,                 // slow processing (409 to a resend meanwhile)
	pagpolartest.FaultLookupLag,            // a replica behind the commit
	pagpolartest.FaultGateway,              // an intermediary's 502/503/504, nothing processed
	pagpolartest.FaultGatewayAfterCommit,   // an intermediary's error after the commit
	pagpolartest.FaultRateLimit,            // 429
	pagpolartest.FaultUnavailable,          // the API's own 503
	pagpolartest.FaultLatency,              // a slow network
}

// swarm is the part of the world one scenario lives in: which step
// actions and which money faults its draws may pick. A scenario that may
// meet every fault meets each rarely; one whose API fails in two ways
// meets those two often, so a bug that needs one route, one fault and a
// second process on that route turns up in tens of scenarios instead of
// thousands ("swarm testing": Groce et al., ISSTA 2012). The swarm is
// drawn per scenario, so over many scenarios every combination is tried;
// a scenario printed as Go source lists its steps, not its swarm.
type swarm struct {
	actions []Action
	faults  []pagpolartest.FaultAction
}

// drawSwarm keeps each step action and each money fault with even odds.
// It shrinks toward a PIX charge alone, without faults. In one scenario of
// four it keeps everything: the world in which all of it happens at once.
func drawSwarm(t *rapid.T) swarm {
	if rapid.IntRange(0, 3).Draw(t, "swarm-all") == 3 {
		return swarm{actions: stepActions, faults: moneyFaults}
	}
	var sw swarm
	for _, a := range stepActions {
		if rapid.Bool().Draw(t, "swarm-action") {
			sw.actions = append(sw.actions, a)
		}
	}
	if !slices.ContainsFunc(sw.actions, Action.isCall) {
		sw.actions = append(sw.actions, DoPix)
	}
	for _, f := range moneyFaults {
		if rapid.Bool().Draw(t, "swarm-fault") {
			sw.faults = append(sw.faults, f)
		}
	}
	return sw
}

func drawStep(clients int, sw swarm) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step {
		st := Step{
			Actor: rapid.IntRange(0, clients-1).Draw(t, "actor"),
			Do:    rapid.SampledFrom(sw.actions).Draw(t, "do"),
			Order: rapid.IntRange(0, 1).Draw(t, "order"),
			N:     rapid.IntRange(0, 1).Draw(t, "n"),
		}
		switch st.Do {
		case DoAdvance:
			st.Advance = rapid.SampledFrom([]time.Duration{400 * time.Millisecond, 2 * time.Second, 61 * time.Second, 25 * time.Hour}).Draw(t, "advance")
		case DoClientStep:
			st.Advance = rapid.SampledFrom([]time.Duration{-2 * time.Second, 2 * time.Second, -time.Hour, 10 * time.Minute}).Draw(t, "client-step")
		case DoAPIStep:
			// An hour either way (a wrong zone corrected), and steps under
			// the second Date shows, which no client can see.
			st.Advance = rapid.SampledFrom([]time.Duration{-time.Hour, time.Hour, -900 * time.Millisecond, 900 * time.Millisecond, -5 * time.Second}).Draw(t, "api-clock-step")
		case DoWebhooks:
			st.Events = rapid.SliceOfN(rapid.IntRange(0, 20), 1, 5).Draw(t, "events")
		case DoResume:
			st.Of = rapid.SampledFrom([]Action{DoPix, DoBoleto, DoCard, DoSubscribe, DoRefund, DoPlanChange}).Draw(t, "of")
		}
		if st.Do.isCall() {
			st.Faults = rapid.SliceOfN(drawFault(sw.faults, st.Do == DoCard || st.Do == DoSubscribe), 0, 3).Draw(t, "faults")
			st.Truncate = rapid.IntRange(0, 7).Draw(t, "truncate") == 0
			st.GiveUp = rapid.IntRange(0, 9).Draw(t, "give-up") == 0
		}
		st.Concurrent = clients > 1 && rapid.IntRange(0, 4).Draw(t, "concurrent") == 0
		return st
	})
}

// drawFault draws what one request meets: every failure SAFETY.md reasons
// about, on the money route or on its lookup.
func drawFault(allowed []pagpolartest.FaultAction, card bool) *rapid.Generator[Fault] {
	return rapid.Custom(func(t *rapid.T) Fault {
		actions := slices.Clone(allowed)
		if card {
			actions = append(actions, pagpolartest.FaultDecline) // the card is declined
		}
		// A swarm without money faults meets faults on its lookups only.
		if len(actions) == 0 || rapid.IntRange(0, 4).Draw(t, "on-lookup") == 0 {
			f := Fault{Read: true, Action: rapid.SampledFrom([]pagpolartest.FaultAction{
				pagpolartest.Fault500NoCommit, pagpolartest.FaultGateway, pagpolartest.FaultDropBeforeProcessing,
				pagpolartest.FaultRateLimit, pagpolartest.FaultHold}).Draw(t, "lookup-fault")}
			switch f.Action {
			case pagpolartest.FaultGateway:
				f.Status = rapid.SampledFrom([]int{502, 503, 504}).Draw(t, "status")
			case pagpolartest.FaultHold:
				f.Delay = rapid.SampledFrom([]time.Duration{100 * time.Millisecond, 1500 * time.Millisecond}).Draw(t, "delay")
			}
			return f
		}
		// Asynchronous decisions the fake learns (a card answered pending
		// and decided by a later event, a plan change scheduled for the
		// next cycle) are one more line each here, or, as shapes, drawn
		// with the others from pagpolartest.AllShapes (a refund answered
		// "requested" already is: ShapeRefundRequested).
		f := Fault{Action: rapid.SampledFrom(actions).Draw(t, "fault")}
		switch f.Action {
		case pagpolartest.FaultGateway, pagpolartest.FaultGatewayAfterCommit:
			f.Status = rapid.SampledFrom([]int{502, 503, 504}).Draw(t, "status")
		case pagpolartest.FaultHold:
			// Within the window the API's 409 protects a resend; past it,
			// the documented exposure.
			f.Delay = rapid.SampledFrom([]time.Duration{150 * time.Millisecond, 250 * time.Millisecond, 1500 * time.Millisecond}).Draw(t, "delay")
		case pagpolartest.FaultCommitThen500After:
			f.Delay = rapid.SampledFrom([]time.Duration{100 * time.Millisecond, 500 * time.Millisecond}).Draw(t, "delay")
		case pagpolartest.FaultLookupLag:
			f.Delay = rapid.SampledFrom([]time.Duration{20 * time.Millisecond, 50 * time.Millisecond, 250 * time.Millisecond, 2 * time.Second}).Draw(t, "lag")
		case pagpolartest.FaultLatency:
			f.Delay = rapid.SampledFrom([]time.Duration{50 * time.Millisecond, 1500 * time.Millisecond}).Draw(t, "delay")
		case pagpolartest.FaultCommitThenDrop, pagpolartest.FaultCommitThen500, pagpolartest.FaultCommitDropRelease:
			f.LookupLag = rapid.SampledFrom([]time.Duration{0, 0, 40 * time.Millisecond, 200 * time.Millisecond}).Draw(t, "with-lag")
		}
		return f
	})
}
