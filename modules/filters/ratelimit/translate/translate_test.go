package translate

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/coxswain-labs/coxswain/core"
	cxv1a1 "github.com/coxswain-labs/coxswain/modules/api/v1alpha1"
	"github.com/coxswain-labs/coxswain/modules/filters/ratelimit"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

func TestResolveAddsZone(t *testing.T) {
	obj := &cxv1a1.RateLimit{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "api"}}
	out, err := Resolver{}.Resolve(nil, obj, []byte(`{"requests":5,"key":{"type":"Header","header":"x-api-key"}}`))
	if err != nil {
		t.Fatal(err)
	}
	var c ratelimit.Config
	if err := core.DecodeStrict(out, &c); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if c.Zone != "team-a/api" || c.Requests != 5 || c.Key.Header != "x-api-key" {
		t.Errorf("config %s", out)
	}
	_, err = Resolver{}.Resolve(nil, obj, []byte(`{"requests":5,"zone":"other/x"}`))
	var f *translation.Failure
	if !errors.As(err, &f) || !strings.Contains(f.Message, "zone is set by the controller") {
		t.Errorf("a user-set zone: %v", err)
	}
	if _, err := (Resolver{}).Resolve(nil, obj, []byte(`{"requests":5,"per":"1s"}`)); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("an unknown field: %v", err)
	}
	if _, ok := core.Freeze().Lookup(ModuleID); !ok {
		t.Errorf("%s is not registered", ModuleID)
	}
}
