package standalone

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/proxy"
	_ "github.com/coxswain-labs/coxswain/modules/filters/headers/translate"
	_ "github.com/coxswain-labs/coxswain/modules/filters/redirect/translate"
	_ "github.com/coxswain-labs/coxswain/modules/filters/rewrite/translate"
	_ "github.com/coxswain-labs/coxswain/modules/httproute/translate" // the HTTP route kind, as the stock binary has it
	_ "github.com/coxswain-labs/coxswain/modules/standard"
)

func loopbackGateway(name string, port int) string {
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: %s, namespace: default}
spec:
  gatewayClassName: coxswain
  addresses: [{value: 127.0.0.1}]
  listeners:
  - {name: http, port: %d, protocol: HTTP}
`, name, port)
}

// holdLoopbackPort binds a loopback port as another process would; release frees it.
func holdLoopbackPort(t *testing.T) (int, func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l.Addr().(*net.TCPAddr).Port, func() { _ = l.Close() }
}

func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	port, release := holdLoopbackPort(t)
	release()
	return port
}

func realEngine(t *testing.T) *proxy.Proxy {
	t.Helper()
	px := proxy.New(proxy.Options{Log: zaptest.NewLogger(t).Named("proxy"),
		BindRetryMin: 10 * time.Millisecond, BindRetryMax: 50 * time.Millisecond})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = px.Close(ctx)
	})
	return px
}

type statusBody struct {
	Version string            `json:"version"`
	Unbound []UnboundListener `json:"unboundListeners"`
	Report  struct {
		Failures []string `json:"failures"`
	} `json:"report"`
}

// TestUnboundListener: a Gateway whose port is taken does not stop the others; /status names the
// listener, its Gateway listener and the error, and the report marks it Programmed=False; once
// the port is free the proxy binds it on its own and /status clears.
func TestUnboundListener(t *testing.T) {
	busyPort, release := holdLoopbackPort(t)
	freePort := freeLoopbackPort(t)
	dir := writeFiles(t, map[string]string{"class.yaml": classDoc,
		"busy.yaml": loopbackGateway("busy", busyPort), "free.yaml": loopbackGateway("free", freePort)})
	r := NewRunner(Options{Path: dir, Log: zaptest.NewLogger(t), Engine: realEngine(t), Translate: translator.Options{Registry: core.Freeze()}})
	must(t, r.Reload(context.Background()))
	srv := httptest.NewServer(AdminHandler(r, "test"))
	defer srv.Close()
	read := func() statusBody {
		t.Helper()
		resp, err := http.Get(srv.URL + "/status")
		must(t, err)
		defer func() { _ = resp.Body.Close() }()
		var b statusBody
		must(t, json.NewDecoder(resp.Body).Decode(&b))
		return b
	}

	st := read()
	busyName := fmt.Sprintf("127.0.0.1:%d/HTTP", busyPort)
	if st.Version == "" || len(st.Unbound) != 1 || st.Unbound[0].Listener != busyName || st.Unbound[0].Reason != "AddressInUse" ||
		len(st.Unbound[0].Gateways) != 1 || st.Unbound[0].Gateways[0] != "default/busy/http" {
		t.Fatalf("/status unbound = %+v (version %q)", st.Unbound, st.Version)
	}
	want := fmt.Sprintf("Gateway default/busy listener http: Programmed=False (Pending): Proxy standalone cannot bind 127.0.0.1:%d", busyPort)
	if !containsPrefix(st.Report.Failures, want) {
		t.Fatalf("report failures %q lack %q", st.Report.Failures, want)
	}
	for _, f := range st.Report.Failures {
		if strings.Contains(f, "default/free") {
			t.Fatalf("the free Gateway is reported failing: %q", f)
		}
	}
	res, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", freePort))
	must(t, err)
	_ = res.Body.Close() // any answer: the free Gateway's listener serves

	release()
	deadline := time.Now().Add(10 * time.Second)
	for len(read().Unbound) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("still unbound after the port was freed: %+v", read().Unbound)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if f := read().Report.Failures; len(f) != 0 {
		t.Fatalf("failures after the bind: %q", f)
	}
}

// TestRunNothingBound: a first configuration none of whose listeners can be bound is an error, as
// a rejected one is: a newcomer sees it at once.
func TestRunNothingBound(t *testing.T) {
	busyPort, _ := holdLoopbackPort(t)
	dir := writeFiles(t, map[string]string{"class.yaml": classDoc, "busy.yaml": loopbackGateway("busy", busyPort)})
	r := NewRunner(Options{Path: dir, Log: zaptest.NewLogger(t), Engine: realEngine(t), Translate: translator.Options{Registry: core.Freeze()}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a Run that goes on watching fails below
	defer cancel()
	err := r.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "no listener could be bound") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("Run = %v", err)
	}
}

func containsPrefix(ss []string, prefix string) bool {
	for _, s := range ss {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}
