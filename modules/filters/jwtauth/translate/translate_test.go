package translate_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/documents"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/controller/translator/translatortest"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/jwtauth"
	"github.com/coxswain-labs/coxswain/modules/filters/jwtauth/jwttest"
	"github.com/coxswain-labs/coxswain/modules/filters/jwtauth/translate"
	httproutetr "github.com/coxswain-labs/coxswain/modules/httproute/translate"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

const issuer = "https://idp.example"

var jwtAuthGK = schema.GroupKind{Group: jwtauth.API.Group, Kind: jwtauth.API.Kind}

// store is one HTTPRoute whose first rule references JwtAuth "auth" with spec jwks.
func store(jwks map[string]any) *translator.Store {
	s := translatortest.SyntheticStore(1)
	r := s.Objects[translatortest.HTTPRoute][0].(*gwapiv1.HTTPRoute)
	r.Spec.Rules[0].Filters = []gwapiv1.HTTPRouteFilter{{Type: gwapiv1.HTTPRouteFilterExtensionRef,
		ExtensionRef: &gwapiv1.LocalObjectReference{Group: gwapiv1.Group(jwtauth.API.Group), Kind: "JwtAuth", Name: "auth"}}}
	s.Add(jwtAuthGK, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.coxswain-labs.dev/v1alpha1", "kind": "JwtAuth",
		"metadata": map[string]any{"namespace": r.Namespace, "name": "auth"},
		"spec":     map[string]any{"issuer": issuer, "jwks": jwks},
	}})
	return s
}

func options(docs translation.Documents) translator.Options {
	return translator.Options{Registry: core.NewRegistry(httproutetr.Kind{}, (*jwtauth.JwtAuth)(nil), translate.Resolver{}), Documents: docs}
}

// module loads the JwtAuth config of the translation's snapshot as a proxy would.
func module(t *testing.T, res *translator.Result) *jwtauth.JwtAuth {
	t.Helper()
	var mc *irv1.ModuleConfig
	for _, l := range res.Snapshot.GetListeners() {
		for _, srv := range l.GetServers() {
			for _, vh := range srv.GetVirtualHosts() {
				for _, r := range vh.GetRoutes() {
					for _, f := range r.GetFilters() {
						if f.GetId() == jwtauth.ModuleID {
							mc = f
						}
					}
				}
			}
		}
	}
	if mc == nil {
		t.Fatalf("no %s in the snapshot; problems %v", jwtauth.ModuleID, res.Problems)
	}
	bc := core.NewBuildContext(t.Context(), nil, core.NewRegistry((*jwtauth.JwtAuth)(nil)), nil)
	t.Cleanup(func() { _ = bc.Close() })
	f, err := core.Load[core.HTTPRequestFilter](bc, mc)
	if err != nil {
		t.Fatal(err)
	}
	return f.(*jwtauth.JwtAuth)
}

func status(m *jwtauth.JwtAuth, tok string) int {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	w := httptest.NewRecorder()
	if m.FilterRequest(w, r) {
		return http.StatusOK
	}
	return w.Code
}

func problems(res *translator.Result) []string {
	var out []string
	for _, p := range res.Problems {
		out = append(out, p.Reason+": "+p.Message)
	}
	return out
}

// TestRemoteRotation: the translator reads a remote JWKS through the real fetcher from a
// loopback HTTPS server. Before the first fetch the route is ResolvedRefs=False JWKSUnavailable
// and the module answers 503; after it, the key verifies; after a rotation (max-age=0, so the
// fetcher refreshes at once), the new key's tokens verify and the old key's do not.
func TestRemoteRotation(t *testing.T) {
	k1, k2 := jwttest.NewEC("k1"), jwttest.NewEC("k2")
	srv := jwttest.NewServer(true, k1)
	defer srv.Close()
	srv.SetCacheControl("max-age=0")
	changed := make(chan struct{}, 64)
	docs := documents.New(documents.Options{Log: zaptest.NewLogger(t), Client: srv.Client(), MinRefresh: 5 * time.Millisecond,
		OnChange: func() { changed <- struct{}{} }})
	defer docs.Close()
	st := store(map[string]any{"remote": map[string]any{"uri": srv.JWKSURL(), "refreshInterval": "1h"}})
	opts := options(docs)

	res := translator.Translate(t.Context(), st, opts)
	if p := problems(res); len(p) != 1 || !strings.HasPrefix(p[0], "JWKSUnavailable: ") || !strings.Contains(p[0], "not fetched yet") {
		t.Fatalf("problems %q, want JWKSUnavailable, not fetched yet", p)
	}
	if code := status(module(t, res), k1.Sign(jwttest.Claims(issuer, "", nil))); code != http.StatusServiceUnavailable {
		t.Fatalf("before the fetch: %d, want 503", code)
	}

	awaitTranslation := func(what string, ok func(*translator.Result) bool) *translator.Result {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			res := translator.Translate(t.Context(), st, opts)
			if ok(res) {
				return res
			}
			select {
			case <-changed:
			case <-deadline:
				t.Fatalf("%s: problems %q", what, problems(res))
			}
		}
	}
	tok1, tok2 := k1.Sign(jwttest.Claims(issuer, "", nil)), k2.Sign(jwttest.Claims(issuer, "", nil))
	res = awaitTranslation("the first fetch", func(res *translator.Result) bool {
		return len(res.Problems) == 0 && status(module(t, res), tok1) == http.StatusOK
	})
	if code := status(module(t, res), tok2); code != http.StatusUnauthorized {
		t.Errorf("a key not in the JWKS yet: %d", code)
	}
	srv.Rotate(k2)
	res = awaitTranslation("the rotation", func(res *translator.Result) bool {
		return len(res.Problems) == 0 && status(module(t, res), tok2) == http.StatusOK
	})
	if code := status(module(t, res), tok1); code != http.StatusUnauthorized {
		t.Errorf("the rotated-out key: %d", code)
	}
}

// TestUnusableRemote: a remote document with no usable key, and a server that fails, are
// JWKSUnavailable (503) with the reason; without a fetcher at all too.
func TestUnusableRemote(t *testing.T) {
	srv := jwttest.NewServer(false)
	defer srv.Close()
	srv.SetBody([]byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0","alg":"HS256"}]}`))
	docs := documents.New(documents.Options{Log: zaptest.NewLogger(t)})
	defer docs.Close()
	st := store(map[string]any{"remote": map[string]any{"uri": srv.JWKSURL()}})
	_ = translator.Translate(t.Context(), st, options(docs))
	docs.AwaitFirst(t.Context(), 10*time.Second)
	res := translator.Translate(t.Context(), st, options(docs))
	if p := problems(res); len(p) != 1 || !strings.Contains(p[0], "no usable signing key") {
		t.Errorf("problems %q", p)
	}
	if code := status(module(t, res), "x"); code != http.StatusServiceUnavailable {
		t.Errorf("%d, want 503", code)
	}
	res = translator.Translate(t.Context(), st, options(nil))
	if p := problems(res); len(p) != 1 || !strings.Contains(p[0], "not fetched in this process") {
		t.Errorf("without a fetcher: problems %q", p)
	}
}

// TestInlineAndInvalid: an inline JWKS is used as is; invalid specs fail the rule (500) with
// UnsupportedValue.
func TestInlineAndInvalid(t *testing.T) {
	k := jwttest.NewEd25519("k")
	res := translator.Translate(t.Context(), store(map[string]any{"inline": string(jwttest.JWKS(k))}), options(nil))
	if len(res.Problems) != 0 || status(module(t, res), k.Sign(jwttest.Claims(issuer, "", nil))) != http.StatusOK {
		t.Fatalf("inline: problems %q", problems(res))
	}
	for name, jwks := range map[string]map[string]any{
		"both":          {"inline": string(jwttest.JWKS(k)), "remote": map[string]any{"uri": "https://x.example/j"}},
		"no keys":       {"inline": `{"keys":[]}`},
		"bad interval":  {"remote": map[string]any{"uri": "https://x.example/j", "refreshInterval": "soon"}},
		"unknown field": {"inline": string(jwttest.JWKS(k)), "local": true},
	} {
		res := translator.Translate(t.Context(), store(jwks), options(nil))
		if p := problems(res); len(p) != 1 || !strings.HasPrefix(p[0], "UnsupportedValue") {
			t.Errorf("%s: problems %q", name, p)
		}
	}
}
