package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	pagpolarotel "github.com/pagpolar/pagpolar-go/otel"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func main() {
	asJSON := flag.Bool("json", false, "also print every span as the stdout exporter writes it")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var export io.Writer = io.Discard
	if *asJSON {
		export = os.Stdout
	}
	if err := run(ctx, os.Stdout, export); err != nil {
		log.Fatal(err)
	}
}

// collector keeps the ended spans for the tree.
type collector struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
}

func (c *collector) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c *collector) OnEnd(s sdktrace.ReadOnlySpan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spans = append(c.spans, s)
}
func (c *collector) Shutdown(context.Context) error   { return nil }
func (c *collector) ForceFlush(context.Context) error { return nil }

func run(ctx context.Context, out, export io.Writer) error {
	srv := pagpolartest.NewUnstartedServer(pagpolartest.WithProcessingWindow(300 * time.Millisecond))
	if err := srv.Start(); err != nil {
		return err
	}
	defer srv.Close()
	// The charge is committed, and the connection closes before its answer.
	srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitDropRelease, Times: 1})

	exp, err := stdouttrace.New(stdouttrace.WithWriter(export), stdouttrace.WithPrettyPrint())
	if err != nil {
		return err
	}
	spans := &collector{}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())
	mp := sdkmetric.NewMeterProvider()
	defer mp.Shutdown(context.Background())

	client, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token),
		pagpolar.WithBaseURL(srv.URL), pagpolar.WithStore(keystore.NewMemory()),
		pagpolar.WithRetryPolicy(pagpolar.RetryPolicy{ProcessingWindow: 300 * time.Millisecond, SettleDelay: 100 * time.Millisecond,
			LookupInterval: 50 * time.Millisecond, WindowMargin: 50 * time.Millisecond}),
		pagpolarotel.Option(pagpolarotel.WithTracerProvider(tp), pagpolarotel.WithMeterProvider(mp)))
	if err != nil {
		return err
	}
	ch, err := client.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "PEDIDO-1234",
		Customer: pagpolar.Customer{Name: "Maria Silva", Email: "maria@exemplo.com", Document: "123.456.789-09"}})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "charged: sale %s, %s (source: %s)\n\n", ch.Sale.ID, ch.Sale.Status, ch.Operation.Source)
	spans.mu.Lock()
	defer spans.mu.Unlock()
	printTree(out, spans.spans)
	return nil
}

// printTree prints spans as a tree, children in start order under their
// parent, with each span's time and the attributes that matter.
func printTree(out io.Writer, spans []sdktrace.ReadOnlySpan) {
	kids := map[string][]sdktrace.ReadOnlySpan{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanContext().SpanID().String()] = true
	}
	var roots []sdktrace.ReadOnlySpan
	for _, s := range spans {
		p := s.Parent().SpanID().String()
		if s.Parent().IsValid() && ids[p] {
			kids[p] = append(kids[p], s)
		} else {
			roots = append(roots, s)
		}
	}
	byStart := func(l []sdktrace.ReadOnlySpan) {
		sort.Slice(l, func(i, j int) bool { return l[i].StartTime().Before(l[j].StartTime()) })
	}
	var walk func(s sdktrace.ReadOnlySpan, depth int)
	walk = func(s sdktrace.ReadOnlySpan, depth int) {
		fmt.Fprintf(out, "%s%s  %s  %s\n", strings.Repeat("  ", depth), s.Name(),
			s.EndTime().Sub(s.StartTime()).Round(time.Millisecond), describe(s))
		l := kids[s.SpanContext().SpanID().String()]
		byStart(l)
		for _, k := range l {
			walk(k, depth+1)
		}
	}
	byStart(roots)
	for _, r := range roots {
		walk(r, 0)
	}
}

var shown = []string{"pagpolar.operation.id", "pagpolar.outcome", "pagpolar.source", "pagpolar.attempts",
	"url.full", "http.response.status_code", "error.type", "pagpolar.lookup.found", "pagpolar.store.result"}

func describe(s sdktrace.ReadOnlySpan) string {
	var parts []string
	for _, k := range shown {
		for _, a := range s.Attributes() {
			if string(a.Key) == k {
				parts = append(parts, k+"="+a.Value.String())
			}
		}
	}
	return strings.Join(parts, " ")
}
