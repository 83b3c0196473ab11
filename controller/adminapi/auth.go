package adminapi

import (
	"context"
	"crypto/sha256"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/coxswain-labs/coxswain/core/admin"
)

// Auth modes of --admin-auth.
const (
	AuthAuto       = "auto"
	AuthNone       = "none"
	AuthKubernetes = "kubernetes"
)

// ResolveAuth turns AuthAuto into none for a loopback bind address and kubernetes otherwise.
func ResolveAuth(mode, addr string) string {
	if mode != AuthAuto {
		return mode
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return AuthKubernetes
	}
	if host == "localhost" {
		return AuthNone
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return AuthNone
	}
	return AuthKubernetes
}

// User is who made a request, as the TokenReview said.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string]authorizationv1.ExtraValue
}

type userKey struct{}

// UserFrom is the authenticated user of a request; false when the API runs without auth.
func UserFrom(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(userKey{}).(User)
	return u, ok
}

// URLPrefix is put before a request's path in its SubjectAccessReview: an RBAC rule for the
// admin API names "/coxswain/api/v1/*".
const URLPrefix = "/coxswain"

// authTTL is how long a review's answer is reused for one token and path.
const authTTL = 10 * time.Second

// Authorizer checks /api/v1 requests like kube-rbac-proxy: TokenReview for the bearer token,
// then a SubjectAccessReview for `get` on the non-resource URL URLPrefix + the request path.
// The prefix matters: Kubernetes' system:discovery role lets every authenticated user get
// "/api/*", so a review of the bare path would allow anyone with a token.
type Authorizer struct {
	kube kubernetes.Interface
	mu   sync.Mutex
	// cache holds recent answers by sha256(token) and path.
	cache map[cacheKey]cached
	now   func() time.Time
}

type cacheKey struct {
	token [32]byte
	path  string
}

type cached struct {
	user    User
	code    int // 0: allowed
	msg     string
	expires time.Time
}

// NewAuthorizer checks tokens and permissions against the API server kube talks to.
func NewAuthorizer(kube kubernetes.Interface) *Authorizer {
	return &Authorizer{kube: kube, cache: map[cacheKey]cached{}, now: time.Now}
}

// Wrap protects every /api/ path of h; /healthz, /readyz and /metrics stay open.
func (a *Authorizer) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/api/") {
			h.ServeHTTP(w, r)
			return
		}
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="coxswain"`)
			admin.WriteError(w, http.StatusUnauthorized, "a bearer token is required (Authorization: Bearer <token>)")
			return
		}
		res := a.check(r.Context(), token, r.URL.Path)
		if res.code != 0 {
			if res.code == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="coxswain"`)
			}
			admin.WriteError(w, res.code, res.msg)
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, res.user)))
	})
}

func (a *Authorizer) check(ctx context.Context, token, path string) cached {
	key := cacheKey{sha256.Sum256([]byte(token)), path}
	a.mu.Lock()
	c, ok := a.cache[key]
	a.mu.Unlock()
	if ok && a.now().Before(c.expires) {
		return c
	}
	c = a.review(ctx, token, path)
	c.expires = a.now().Add(authTTL)
	if c.code != http.StatusBadGateway {
		a.mu.Lock()
		if len(a.cache) > 4096 { // a flood of distinct tokens must not grow it without bound
			clear(a.cache)
		}
		a.cache[key] = c
		a.mu.Unlock()
	}
	return c
}

func (a *Authorizer) review(ctx context.Context, token, path string) cached {
	tr, err := a.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return cached{code: http.StatusBadGateway, msg: "TokenReview: " + err.Error()}
	}
	if !tr.Status.Authenticated {
		return cached{code: http.StatusUnauthorized, msg: "the token is not valid"}
	}
	u := User{Name: tr.Status.User.Username, UID: tr.Status.User.UID, Groups: tr.Status.User.Groups}
	if len(tr.Status.User.Extra) > 0 {
		u.Extra = map[string]authorizationv1.ExtraValue{}
		for k, v := range tr.Status.User.Extra {
			u.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	allowed, why, err := a.Allowed(ctx, u, authorizationv1.SubjectAccessReviewSpec{
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: URLPrefix + path, Verb: "get"}})
	switch {
	case err != nil:
		return cached{code: http.StatusBadGateway, msg: "SubjectAccessReview: " + err.Error()}
	case !allowed:
		return cached{user: u, code: http.StatusForbidden, msg: "user " + u.Name + " may not get " + URLPrefix + path + why}
	}
	return cached{user: u}
}

// Allowed asks a SubjectAccessReview whether u may do what spec says (its user fields are set
// from u); the string is the reviewer's reason, for the error message.
func (a *Authorizer) Allowed(ctx context.Context, u User, spec authorizationv1.SubjectAccessReviewSpec) (bool, string, error) {
	spec.User, spec.UID, spec.Groups, spec.Extra = u.Name, u.UID, u.Groups, u.Extra
	sar, err := a.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, "", err
	}
	why := ""
	if sar.Status.Reason != "" {
		why = " (" + sar.Status.Reason + ")"
	}
	return sar.Status.Allowed, why, nil
}
