package controller

import (
	"maps"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	grpctranslate "github.com/coxswain-labs/coxswain/modules/grpcroute/translate"
	httptranslate "github.com/coxswain-labs/coxswain/modules/httproute/translate"
)

// TestErrorAnswers: only the kinds whose clients do not see the engine's 500 as such are listed.
func TestErrorAnswers(t *testing.T) {
	got := errorAnswersOf(core.NewRegistry(httptranslate.Kind{}, grpctranslate.Kind{}))
	want := map[string]string{"GRPCRoute": "gRPC status UNAVAILABLE"}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
