package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/webhook"
)

// BenchmarkServeHTTP measures what PagPolar waits for: authenticate, parse,
// store, answer. "new" stores a new event per delivery, "duplicate" answers
// a repeat of a stored one. Compare the stores as ratios within one run.
func BenchmarkServeHTTP(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			store := be.new(b)()
			in, err := webhook.New(webhook.Config{
				Store: store, Tokens: []string{token}, Logger: quietLogger(), PayloadKeys: []webhook.PayloadKey{testKey},
				Default: func(context.Context, *webhook.Event) error { return nil },
			})
			if err != nil {
				b.Fatal(err)
			}
			run := func(b *testing.B, body func(i int64) []byte) {
				var seq atomic.Int64
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if w := deliver(in, body(seq.Add(1)), "Authorization", "Bearer "+token); w.Code != http.StatusOK {
							b.Errorf("status %d", w.Code)
							return
						}
					}
				})
			}
			prefix := randomName()
			b.Run("new", func(b *testing.B) {
				run(b, func(i int64) []byte { return txEnv(wire.EventTransactionPaid, fmt.Sprintf("%s-%d", prefix, i), "paid") })
			})
			dup := txEnv(wire.EventTransactionPaid, prefix+"-dup", "paid")
			b.Run("duplicate", func(b *testing.B) { run(b, func(int64) []byte { return dup }) })
		})
	}
}

// BenchmarkPipeline measures an event from delivery to processed outcome,
// through the worker pool (4 workers), with b.N events of distinct sales.
func BenchmarkPipeline(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			store := be.new(b)()
			done := make(chan struct{}, 1024)
			in, err := webhook.New(webhook.Config{
				Store: store, Tokens: []string{token}, Logger: quietLogger(), PollInterval: time.Hour, PayloadKeys: []webhook.PayloadKey{testKey},
				Default:   func(context.Context, *webhook.Event) error { return nil },
				OnOutcome: func(webhook.Record) { done <- struct{}{} },
			})
			if err != nil {
				b.Fatal(err)
			}
			if err := in.Start(); err != nil {
				b.Fatal(err)
			}
			defer in.Shutdown(context.Background())
			prefix := randomName()
			b.ReportAllocs()
			b.ResetTimer()
			go func() {
				for i := 0; i < b.N; i++ {
					deliver(in, txEnv(wire.EventTransactionPaid, fmt.Sprintf("%s-%d", prefix, i), "paid"), "Authorization", "Bearer "+token)
				}
			}()
			for i := 0; i < b.N; i++ {
				<-done
			}
		})
	}
}
