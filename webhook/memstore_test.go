package webhook_test

import (
	"testing"

	"github.com/pagpolar/pagpolar-go/webhook"
	"github.com/pagpolar/pagpolar-go/webhook/inboxtest"
)

func TestMemoryStoreConformance(t *testing.T) {
	inboxtest.Run(t, func(t *testing.T) webhook.Store { return webhook.NewMemoryStore() })
}
