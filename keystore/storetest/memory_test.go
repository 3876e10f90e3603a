package storetest_test

import (
	"testing"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/storetest"
)

func TestMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) keystore.Store { return keystore.NewMemory() })
}

func BenchmarkMemory(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) keystore.Store { return keystore.NewMemory() })
}
