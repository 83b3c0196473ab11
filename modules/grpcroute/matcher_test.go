package grpcroute_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/coxswain-labs/coxswain/modules/grpcroute"
)

func grpcRequest(path string, hdr ...string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://grpc.example"+path, nil)
	r.Header.Set("Content-Type", "application/grpc")
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return r
}

func TestMatch(t *testing.T) {
	const svc = "pkg.v1.Echo"
	exact := func(s, m string) grpcroute.Match { return methodMatch(grpcroute.MatchExact, s, m) }
	regex := func(s, m string) grpcroute.Match { return methodMatch(grpcroute.MatchRegularExpression, s, m) }
	hdr := func(typ, name, value string) grpcroute.Match {
		return grpcroute.Match{Headers: []grpcroute.HeaderMatch{{Type: typ, Name: name, Value: value}}}
	}
	tests := []struct {
		name  string
		match grpcroute.Match
		req   *http.Request
		want  bool
	}{
		{"empty match takes any gRPC request", grpcroute.Match{}, grpcRequest("/a.B/C"), true},
		{"empty match takes an odd path", grpcroute.Match{}, grpcRequest("/"), true},
		{"service and method", exact(svc, "Say"), grpcRequest("/pkg.v1.Echo/Say"), true},
		{"service and other method", exact(svc, "Say"), grpcRequest("/pkg.v1.Echo/Shout"), false},
		{"service is case-sensitive", exact(svc, "Say"), grpcRequest("/pkg.v1.echo/Say"), false},
		{"service only", exact(svc, ""), grpcRequest("/pkg.v1.Echo/Anything"), true},
		{"service only, other service", exact(svc, ""), grpcRequest("/pkg.v1.Echo2/Anything"), false},
		{"method only", exact("", "Say"), grpcRequest("/any.Svc/Say"), true},
		{"method only, other method", exact("", "Say"), grpcRequest("/any.Svc/Sayy"), false},
		{"default type is Exact", methodMatch("", svc, "Say"), grpcRequest("/pkg.v1.Echo/Say"), true},
		{"method match needs a gRPC path", exact(svc, ""), grpcRequest("/pkg.v1.Echo"), false},
		{"extra segment", exact(svc, "Say"), grpcRequest("/pkg.v1.Echo/Say/x"), false},
		{"empty method segment", exact(svc, ""), grpcRequest("/pkg.v1.Echo/"), false},
		{"regex service", regex(`pkg\.v[0-9]+\.Echo`, ""), grpcRequest("/pkg.v12.Echo/Say"), true},
		{"regex is anchored", regex(`v1\.Echo`, ""), grpcRequest("/pkg.v1.Echo/Say"), false},
		{"regex method", regex("", "S.*"), grpcRequest("/x.Y/Shout"), true},
		{"regex both, method fails", regex(`pkg\..*`, "S.*"), grpcRequest("/pkg.v1.Echo/Echo"), false},
		{"regex both", regex(`pkg\..*`, "S.*|E.*"), grpcRequest("/pkg.v1.Echo/Echo"), true},
		{"header exact", hdr("", "Version", "two"), grpcRequest("/a.B/C", "version", "two"), true},
		{"header exact, other value", hdr("Exact", "version", "two"), grpcRequest("/a.B/C", "version", "one"), false},
		{"header absent", hdr("Exact", "version", "two"), grpcRequest("/a.B/C"), false},
		{"header repeated, joined", hdr("Exact", "x", "1,2"), grpcRequest("/a.B/C", "x", "1", "x", "2"), true},
		{"header regex unanchored", hdr("RegularExpression", "x", "ol"), grpcRequest("/a.B/C", "x", "gold"), true},
		{"header regex repeated", hdr("RegularExpression", "x", "^1,2$"), grpcRequest("/a.B/C", "x", "1", "x", "2"), true},
		{"authority header", hdr("Exact", "host", "grpc.example"), grpcRequest("/a.B/C"), true},
		{"only the first condition on a name counts", grpcroute.Match{Headers: []grpcroute.HeaderMatch{
			{Name: "x", Value: "1"}, {Name: "X", Value: "2"}}}, grpcRequest("/a.B/C", "x", "1"), true},
		{"method and header", grpcroute.Match{Method: &grpcroute.MethodMatch{Service: svc},
			Headers: []grpcroute.HeaderMatch{{Name: "x", Value: "1"}}}, grpcRequest("/pkg.v1.Echo/Say", "x", "2"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := grpcroute.New(tt.match)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Match(tt.req); got != tt.want {
				t.Errorf("Match = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIsGRPC(t *testing.T) {
	tests := []struct {
		name, method, ct string
		want             bool
	}{
		{"plain", http.MethodPost, "application/grpc", true},
		{"codec", http.MethodPost, "application/grpc+proto", true},
		{"params", http.MethodPost, "application/grpc;charset=utf-8", true},
		{"upper case", http.MethodPost, "Application/GRPC", true},
		{"grpc-web", http.MethodPost, "application/grpc-web", false},
		{"grpc-web+proto", http.MethodPost, "application/grpc-web+proto", false},
		{"json", http.MethodPost, "application/json", false},
		{"no content-type", http.MethodPost, "", false},
		{"GET", http.MethodGet, "application/grpc", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, "http://x/a.B/C", nil)
			if tt.ct != "" {
				r.Header.Set("Content-Type", tt.ct)
			}
			if got := grpcroute.IsGRPC(r); got != tt.want {
				t.Errorf("IsGRPC = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestInvalidMatch(t *testing.T) {
	tests := []struct {
		name  string
		match grpcroute.Match
	}{
		{"bad service regex", methodMatch(grpcroute.MatchRegularExpression, "(", "")},
		{"bad method regex", methodMatch(grpcroute.MatchRegularExpression, "", "[")},
		{"slash in exact service", methodMatch(grpcroute.MatchExact, "a/b", "")},
		{"unknown method type", methodMatch("Prefix", "a", "")},
		{"bad header name", grpcroute.Match{Headers: []grpcroute.HeaderMatch{{Name: "a b", Value: "x"}}}},
		{"bad header value", grpcroute.Match{Headers: []grpcroute.HeaderMatch{{Name: "a", Value: "x\ny"}}}},
		{"bad header regex", grpcroute.Match{Headers: []grpcroute.HeaderMatch{{Type: "RegularExpression", Name: "a", Value: "("}}}},
		{"unknown header type", grpcroute.Match{Headers: []grpcroute.HeaderMatch{{Type: "Prefix", Name: "a", Value: "x"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := grpcroute.New(tt.match); err == nil {
				t.Error("accepted")
			}
		})
	}
}

func TestWriteStatus(t *testing.T) {
	tests := []struct {
		status  int
		code    grpcroute.Code
		msg     string
		wireMsg string
	}{
		{http.StatusNotFound, grpcroute.CodeUnimplemented, "no route", "no route"},
		{http.StatusInternalServerError, grpcroute.CodeUnavailable, "backend not resolved", "backend not resolved"},
		{http.StatusBadGateway, grpcroute.CodeUnavailable, "", ""},
		{http.StatusServiceUnavailable, grpcroute.CodeUnavailable, "x", "x"},
		{http.StatusGatewayTimeout, grpcroute.CodeDeadlineExceeded, "100% late\n", "100%25 late%0A"},
		{http.StatusForbidden, grpcroute.CodePermissionDenied, "é", "%C3%A9"},
		{http.StatusTeapot, grpcroute.CodeUnknown, "x", "x"},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			w := httptest.NewRecorder()
			w.Header().Set("Content-Length", "12")
			(&grpcroute.Matcher{}).WriteError(w, nil, tt.status, tt.msg)
			h := w.Result().Header
			if w.Code != http.StatusOK || h.Get("Content-Type") != "application/grpc" || h.Get("Content-Length") != "" {
				t.Errorf("status %d header %v", w.Code, h)
			}
			if got, want := h.Get("Grpc-Status"), strconv.Itoa(int(tt.code)); got != want {
				t.Errorf("grpc-status %q, want %q", got, want)
			}
			if got := h.Get("Grpc-Message"); got != tt.wireMsg {
				t.Errorf("grpc-message %q, want %q", got, tt.wireMsg)
			}
			if w.Body.Len() != 0 {
				t.Errorf("body %q", w.Body)
			}
		})
	}
}
