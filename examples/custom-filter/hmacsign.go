// Package hmacsign is a third-party Coxswain filter, built as its own Go module: it signs every
// request it sees with HMAC-SHA256 so the backend can tell the request came through the gateway
// and was not altered on the way.
//
// The signature is hex(HMAC-SHA256(key, METHOD + "\n" + REQUEST-URI)), where REQUEST-URI is the
// escaped path and query of the request as this filter sees it and as it goes upstream
// ("/a%2Fb?x=1", or "/a%2Fb" without a query): what a backend reads as its request target. It
// goes in spec.header, and spec.keyID in "<header>-key-id". Headers of those names sent by the
// client are replaced, never passed on. Filters after this one on the rule that change the path
// invalidate the signature: put it last.
//
// The package imports Coxswain's core only, no Kubernetes: a proxy-only distribution can include
// it. Its Kubernetes API types live in the api/v1 sub-package, which only the CRD generator
// and controller-side code import.
package hmacsign

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"sync"

	"golang.org/x/net/http/httpguts"

	"github.com/coxswain-labs/coxswain/core"
)

func init() {
	core.RegisterModule((*Signer)(nil))
}

var (
	_ core.ExtensionKind     = (*Signer)(nil)
	_ core.HTTPRequestFilter = (*Signer)(nil)
	_ core.Provisioner       = (*Signer)(nil)
	_ core.Validator         = (*Signer)(nil)
)

// API is the resource behind this module's ExtensionRefs.
var API = core.ExtensionAPI{
	Group:    "hmacsign.example.com",
	Kind:     "HMACSignature",
	Version:  "v1",
	Resource: "hmacsignatures",
}

// Signer is the module.
type Signer struct {
	Config

	// Canonical header names and the key ID value, computed once per snapshot.
	sigHeader, idHeader string
	keyID               []string
	// macs reuses HMAC states across requests: hmac.New costs more than the signing.
	macs sync.Pool
}

// CoxswainModule implements core.Module.
func (*Signer) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(Signer) }}
}

// ExtensionAPI implements core.ExtensionKind.
func (*Signer) ExtensionAPI() core.ExtensionAPI { return API }

// Provision applies the header default (standalone `serve` reads the object from a file, where
// no API server applied the CRD's default) and precomputes the header names.
func (s *Signer) Provision(_ *core.BuildContext) error {
	if s.Header == "" {
		s.Header = DefaultHeader
	}
	s.sigHeader = http.CanonicalHeaderKey(s.Header)
	s.idHeader = http.CanonicalHeaderKey(s.Header + "-key-id")
	if s.KeyID != "" {
		s.keyID = []string{s.KeyID}
	}
	key := []byte(s.Key)
	s.macs.New = func() any { return hmac.New(sha256.New, key) }
	return nil
}

// Validate rejects what the proxy could not send safely.
func (s *Signer) Validate() error {
	switch {
	case s.Key == "":
		return errors.New("key is empty")
	case !httpguts.ValidHeaderFieldName(s.Header):
		return fmt.Errorf("header %q is not a valid header name", s.Header)
	case !httpguts.ValidHeaderFieldValue(s.KeyID):
		return fmt.Errorf("keyID %q is not a valid header value", s.KeyID)
	}
	return nil
}

// FilterRequest signs r and proceeds.
func (s *Signer) FilterRequest(_ http.ResponseWriter, r *http.Request) bool {
	mac := s.macs.Get().(hash.Hash)
	sum := sign(mac, r.Method, r.URL.RequestURI())
	mac.Reset()
	s.macs.Put(mac)
	r.Header[s.sigHeader] = []string{sum}
	if s.keyID != nil {
		r.Header[s.idHeader] = s.keyID
	} else {
		delete(r.Header, s.idHeader)
	}
	return true
}

// Signature is the header value a request with method and requestURI (escaped path and query,
// as a backend receives it) gets under key: what a backend, or a test, computes to verify it.
func Signature(key, method, requestURI string) string {
	return sign(hmac.New(sha256.New, []byte(key)), method, requestURI)
}

// CanonicalString is what is signed.
func CanonicalString(method, requestURI string) string {
	return method + "\n" + requestURI
}

func sign(mac hash.Hash, method, requestURI string) string {
	var buf [sha256.Size]byte
	_, _ = mac.Write([]byte(method))
	_, _ = mac.Write([]byte{'\n'})
	_, _ = mac.Write([]byte(requestURI))
	return hex.EncodeToString(mac.Sum(buf[:0]))
}
