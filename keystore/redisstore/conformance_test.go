package redisstore

import (
	"testing"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) keystore.Store {
		s, _ := newTestStore(t)
		return s
	})
}

// TestConformanceOneShard runs the suite with every record in one hash slot,
// the layout a single-slot deployment would pick.
func TestConformanceOneShard(t *testing.T) {
	storetest.Run(t, func(t *testing.T) keystore.Store {
		s, _ := newTestStore(t, WithShards(1))
		return s
	})
}
