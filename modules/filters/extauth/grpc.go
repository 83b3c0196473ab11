package extauth

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/coxswain-labs/coxswain/core"
)

// grpcPool is one gRPC ClientConn per endpoint address of one cluster, shared by the tables that
// use it. The engine changes a cluster's endpoints in place and tells nobody, so conns are made
// on first use by address; one whose endpoint left goes idle (grpc.WithIdleTimeout) and so holds
// no connection, and all are closed with the pool, when no table uses the cluster any more.
type grpcPool struct {
	connectTimeout time.Duration
	conns          sync.Map // HostPort → *grpc.ClientConn
	mu             sync.Mutex
	closed         bool
}

func newGRPCPool(connectTimeout time.Duration) *grpcPool {
	return &grpcPool{connectTimeout: connectTimeout}
}

// conn returns the endpoint's ClientConn, making it on first use (grpc.NewClient does not
// connect; the first call does).
func (p *grpcPool) conn(hostPort string) (*grpc.ClientConn, error) {
	if c, ok := p.conns.Load(hostPort); ok {
		return c.(*grpc.ClientConn), nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("connection pool of %s is closed", hostPort)
	}
	if c, ok := p.conns.Load(hostPort); ok {
		return c.(*grpc.ClientConn), nil
	}
	d := &net.Dialer{Timeout: p.connectTimeout, KeepAlive: 30 * time.Second}
	c, err := grpc.NewClient("passthrough:///"+hostPort,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr)
		}),
		grpc.WithIdleTimeout(time.Minute),
	)
	if err != nil {
		return nil, err
	}
	p.conns.Store(hostPort, c)
	return c, nil
}

// Close implements io.Closer.
func (p *grpcPool) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.conns.Range(func(k, v any) bool {
		_ = v.(*grpc.ClientConn).Close()
		p.conns.Delete(k)
		return true
	})
	return nil
}

func (p *grpcPool) check(ctx context.Context, ep *core.Endpoint, r *http.Request, f *ExternalAuth) decision {
	cc, err := p.conn(ep.HostPort)
	if err != nil {
		return decision{err: err}
	}
	resp, err := authv3.NewAuthorizationClient(cc).Check(ctx, checkRequest(r))
	if err != nil {
		return decision{err: err}
	}
	if c := resp.GetStatus().GetCode(); c != int32(code.Code_OK) {
		d := decision{status: http.StatusForbidden}
		if dr := resp.GetDeniedResponse(); dr != nil {
			if s := int(dr.GetStatus().GetCode()); s >= 200 && s <= 599 {
				d.status = s
			}
			d.header = make(http.Header, len(dr.GetHeaders()))
			for _, o := range dr.GetHeaders() {
				k, v, ok := headerOf(o)
				if !ok {
					continue
				}
				if action(o) == corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD {
					d.header[k] = append(d.header[k], v)
				} else {
					d.header[k] = []string{v}
				}
			}
			d.body = []byte(dr.GetBody())
			if len(d.body) > MaxDeniedBody {
				d.body = d.body[:MaxDeniedBody]
			}
		}
		return d
	}
	if ok := resp.GetOkResponse(); ok != nil {
		f.applyOK(r, ok)
	}
	return decision{allow: true}
}

// applyOK applies an OkResponse's header mutations to the upstream request, those
// allowedResponseHeaders permits only.
func (f *ExternalAuth) applyOK(r *http.Request, ok *authv3.OkHttpResponse) {
	for _, k := range ok.GetHeadersToRemove() {
		k = http.CanonicalHeaderKey(k)
		if f.mayMutate(k) {
			delete(r.Header, k)
		}
	}
	for _, o := range ok.GetHeaders() {
		k, v, valid := headerOf(o)
		if !valid || !f.mayMutate(k) {
			continue
		}
		_, present := r.Header[k]
		switch action(o) {
		case corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD:
			r.Header[k] = append(r.Header[k], v)
		case corev3.HeaderValueOption_ADD_IF_ABSENT:
			if !present {
				r.Header[k] = []string{v}
			}
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
			if present {
				r.Header[k] = []string{v}
			}
		default:
			r.Header[k] = []string{v}
		}
	}
}

// action is what o does to a header already there. Only an explicit append: true appends: the
// zero append_action (APPEND_IF_EXISTS_OR_ADD) cannot be told from unset, and the protocol says
// append defaults to false in these messages, so it replaces — a client must not be able to add
// a value next to the one the auth service asserts (X-User-Id: admin beside the real user).
func action(o *corev3.HeaderValueOption) corev3.HeaderValueOption_HeaderAppendAction {
	//nolint:staticcheck // append is deprecated but still sent by auth services, and honoured by Envoy.
	if a := o.GetAppend(); a != nil {
		if a.GetValue() {
			return corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD
		}
		return corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
	}
	if act := o.GetAppendAction(); act != corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD {
		return act
	}
	return corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
}

// headerOf is o's canonical name and value, false when it is not a valid header.
func headerOf(o *corev3.HeaderValueOption) (string, string, bool) {
	h := o.GetHeader()
	if h == nil || !validHeaderName(h.GetKey()) {
		return "", "", false
	}
	v := h.GetValue()
	if raw := h.GetRawValue(); len(raw) > 0 {
		v = string(raw)
	}
	if strings.ContainsAny(v, "\r\n\x00") {
		return "", "", false
	}
	return http.CanonicalHeaderKey(h.GetKey()), v, true
}

// checkRequest is the request's attributes as Envoy's ext_authz sends them: source (the resolved
// client address) and destination (the listener's local address), the HTTP request without its
// body, and the TLS session's SNI.
func checkRequest(r *http.Request) *authv3.CheckRequest {
	headers := make(map[string]string, len(r.Header)+3)
	for k, vv := range r.Header {
		headers[strings.ToLower(k)] = strings.Join(vv, ",")
	}
	path := r.URL.RequestURI()
	headers[":authority"] = r.Host
	headers[":method"] = r.Method
	headers[":path"] = path
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	size := r.ContentLength
	if size < 0 {
		size = -1
	}
	src := &authv3.AttributeContext_Peer{Address: socketAddress(core.ClientAddr(r))}
	attrs := &authv3.AttributeContext{
		Source:      src,
		Destination: &authv3.AttributeContext_Peer{Address: socketAddress(localAddr(r))},
		Request: &authv3.AttributeContext_Request{
			Time: timestamppb.Now(),
			Http: &authv3.AttributeContext_HttpRequest{
				Id:       r.Header.Get("X-Request-Id"),
				Method:   r.Method,
				Headers:  headers,
				Path:     path,
				Host:     r.Host,
				Scheme:   scheme,
				Query:    r.URL.RawQuery,
				Fragment: r.URL.Fragment,
				Size:     size,
				Protocol: r.Proto,
			},
		},
	}
	if r.TLS != nil {
		attrs.TlsSession = tlsSession(r.TLS, src)
	}
	return &authv3.CheckRequest{Attributes: attrs}
}

// tlsSession is the TLS session's SNI; a client certificate goes into the source peer (URL-
// encoded PEM, as Envoy's include_peer_certificate does).
func tlsSession(cs *tls.ConnectionState, src *authv3.AttributeContext_Peer) *authv3.AttributeContext_TLSSession {
	if len(cs.PeerCertificates) > 0 {
		leaf := cs.PeerCertificates[0]
		src.Certificate = url.QueryEscape(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw})))
		switch {
		case len(leaf.URIs) > 0:
			src.Principal = leaf.URIs[0].String()
		case len(leaf.DNSNames) > 0:
			src.Principal = leaf.DNSNames[0]
		default:
			src.Principal = leaf.Subject.String()
		}
	}
	return &authv3.AttributeContext_TLSSession{Sni: cs.ServerName}
}

// localAddr is the listener address the request arrived on; the zero value when unknown.
func localAddr(r *http.Request) netip.AddrPort {
	if c := core.DownstreamConn(r); c != nil {
		if a, ok := c.LocalAddr().(*net.TCPAddr); ok {
			ap := a.AddrPort()
			return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		}
	}
	return netip.AddrPort{}
}

func socketAddress(ap netip.AddrPort) *corev3.Address {
	if !ap.IsValid() {
		return nil
	}
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       ap.Addr().String(),
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(ap.Port())},
	}}}
}
