// Package headers is Gateway API's RequestHeaderModifier and ResponseHeaderModifier filters:
// "filter.http.request_header_modifier" and "filter.http.response_header_modifier". Names are
// canonicalised and checked once, at Provision; per request the filters only index the header map.
package headers

import (
	"fmt"
	"net/http"
	"net/textproto"

	"golang.org/x/net/http/httpguts"

	"github.com/coxswain-labs/coxswain/core"
)

func init() {
	core.RegisterModule((*RequestModifier)(nil))
	core.RegisterModule((*ResponseModifier)(nil))
}

var (
	_ core.HTTPRequestFilter  = (*RequestModifier)(nil)
	_ core.HTTPResponseFilter = (*ResponseModifier)(nil)
	_ core.Provisioner        = (*RequestModifier)(nil)
	_ core.Provisioner        = (*ResponseModifier)(nil)
)

// RequestModifier is "filter.http.request_header_modifier": it edits the request sent upstream.
// Host is special, because Go keeps it in r.Host rather than r.Header: Set and Add of "Host" set
// r.Host (a request has exactly one Host), and Remove of "Host" is ignored (HTTP/1.1 requires one).
type RequestModifier struct {
	Config
	ops ops
}

// ResponseModifier is "filter.http.response_header_modifier": it edits the upstream response's
// header before it is written to the client.
type ResponseModifier struct {
	Config
	ops ops
}

// CoxswainModule implements core.Module.
func (*RequestModifier) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: RequestModuleID, New: func() core.Module { return new(RequestModifier) }}
}

// CoxswainModule implements core.Module.
func (*ResponseModifier) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ResponseModuleID, New: func() core.Module { return new(ResponseModifier) }}
}

// Provision canonicalises and validates the header names and values.
func (m *RequestModifier) Provision(_ *core.BuildContext) error {
	var err error
	m.ops, err = compile(m.Config, true)
	return err
}

// Provision canonicalises and validates the header names and values.
func (m *ResponseModifier) Provision(_ *core.BuildContext) error {
	var err error
	m.ops, err = compile(m.Config, false)
	return err
}

// FilterRequest applies set, add, remove to the request; it always proceeds.
func (m *RequestModifier) FilterRequest(_ http.ResponseWriter, r *http.Request) bool {
	if m.ops.host != "" {
		r.Host = m.ops.host
	}
	m.ops.apply(r.Header)
	return true
}

// FilterResponse applies set, add, remove to the response header.
func (m *ResponseModifier) FilterResponse(_ *http.Request, _ int, h http.Header) {
	m.ops.apply(h)
}

// ops is a compiled Config.
type ops struct {
	// set holds one ready value slice per header. The slices are shared by every request this
	// filter sees, so they have cap == len: an append by anyone downstream copies rather than
	// writes into them. Nothing in the proxy writes a header value slice in place.
	set    []setOp
	add    []addOp
	remove []string
	// host is the Host a request modifier sets ("" when none).
	host string
}

type setOp struct {
	key  string
	vals []string
}

type addOp struct {
	key, value string
}

func compile(c Config, request bool) (ops, error) {
	var o ops
	for i, h := range c.Set {
		key, err := checkHeader(h)
		if err != nil {
			return ops{}, fmt.Errorf("set[%d]: %w", i, err)
		}
		if request && key == "Host" {
			if !httpguts.ValidHostHeader(h.Value) {
				return ops{}, fmt.Errorf("set[%d]: invalid Host %q", i, h.Value)
			}
			o.host = h.Value
			continue
		}
		o.set = append(o.set, setOp{key: key, vals: []string{h.Value}})
	}
	for i, h := range c.Add {
		key, err := checkHeader(h)
		if err != nil {
			return ops{}, fmt.Errorf("add[%d]: %w", i, err)
		}
		if request && key == "Host" {
			if !httpguts.ValidHostHeader(h.Value) {
				return ops{}, fmt.Errorf("add[%d]: invalid Host %q", i, h.Value)
			}
			o.host = h.Value
			continue
		}
		o.add = append(o.add, addOp{key: key, value: h.Value})
	}
	for i, name := range c.Remove {
		if !httpguts.ValidHeaderFieldName(name) {
			return ops{}, fmt.Errorf("remove[%d]: invalid header name %q", i, name)
		}
		key := textproto.CanonicalMIMEHeaderKey(name)
		if request && key == "Host" {
			continue
		}
		o.remove = append(o.remove, key)
	}
	return o, nil
}

func checkHeader(h Header) (key string, err error) {
	if !httpguts.ValidHeaderFieldName(h.Name) {
		return "", fmt.Errorf("invalid header name %q", h.Name)
	}
	if !httpguts.ValidHeaderFieldValue(h.Value) {
		return "", fmt.Errorf("header %s: invalid value %q (control characters are not allowed)", h.Name, h.Value)
	}
	return textproto.CanonicalMIMEHeaderKey(h.Name), nil
}

// apply runs set, add, remove, in that order, as the Gateway API filter defines them.
func (o *ops) apply(h http.Header) {
	for i := range o.set {
		h[o.set[i].key] = o.set[i].vals
	}
	for i := range o.add {
		h[o.add[i].key] = append(h[o.add[i].key], o.add[i].value)
	}
	for _, key := range o.remove {
		delete(h, key)
	}
}
