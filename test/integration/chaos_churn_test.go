package integration

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// chaosChanges is how many config changes TestChaosConfigChurn makes under load (issue 20 asks
// for at least 200; a longer run: -chaos.changes 1000).
var chaosChanges = flag.Int("chaos.changes", 200, "how many config changes TestChaosConfigChurn makes under load")

const (
	churnSidePort  = 18812 // HTTP listener "side": its ClientTrafficPolicy changes
	churnHTTPSPort = 18813 // HTTPS listener "https": its certificate rotates
	churnExtraPort = 18814 // HTTP listener "extra": added and removed
)

// poolSubsets are the pool Service's endpoints in turn: each step removes one pod and adds
// another, and three steps a round leave a different pair each round.
var poolSubsets = [][]string{{"10.99.41.21", "10.99.41.22"}, {"10.99.41.22", "10.99.41.23"}, {"10.99.41.23", "10.99.41.24"}, {"10.99.41.24", "10.99.41.21"}}

// TestChaosConfigChurn makes -chaos.changes config changes (200 by default) under chaosLoad
// through two proxy processes, in rounds of every kind: HTTPRoutes created, edited and deleted on
// the listener the load's WebSockets and gRPC streams use; a listener added to and removed from
// the Gateway; the HTTPS listener's certificate rotated (Secret updates); the EndpointSlice of a
// Service churned (a pod out, another in); its CoxswainBackendPolicy changed; a ClientTrafficPolicy
// on another listener changed; an ExtensionRef filter object (RequestSizeLimit) changed. Each round
// ends when both proxies serve its result (checked by requests and handshakes). No request of
// any stream may fail (the load's own, and requests to every churned object: the pool, the edited
// route, the HTTPS listener, the filtered route, the side listener), and no WebSocket, gRPC stream
// or TCP connection may break: none of them is on a listener a change touched.
func TestChaosConfigChurn(t *testing.T) {
	e := env.Start(t)
	f := startChaosFleet(t, e, 1, 2)
	c := &churn{f: f, e: e, counts: map[string]int{}}
	c.setUp(t)
	load := startChaosLoad(t, f.targets())
	c.addTraffic(load)

	started := time.Now()
	for round := 0; c.total() < *chaosChanges; round++ {
		c.round(t, round)
	}
	changed := time.Since(started)
	c.statusCurrent(t)
	load.more(t, 20)
	rep := load.stop()
	loadAvg(t)
	kinds := make([]string, 0, len(c.counts))
	for k, n := range c.counts {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	t.Logf("%d config changes in %s (%s), each round served by both proxies before the next",
		c.total(), changed.Round(time.Millisecond), strings.Join(kinds, ", "))
	rep.requireClean(t, fmt.Sprintf("%d config changes", c.total()))
}

// churn is the state of TestChaosConfigChurn's changes.
type churn struct {
	f      *chaosFleet
	e      *env.Env
	counts map[string]int
	cert   *x509.Certificate // the HTTPS listener's current certificate
	subset int               // the pool's current poolSubsets index
	limit  string            // the RequestSizeLimit's current maxSize
	extra  bool              // whether the Gateway has listener extra
	routes []string          // the HTTPRoutes the last round created
}

func (c *churn) total() int {
	n := 0
	for _, v := range c.counts {
		n += v
	}
	return n
}

func (c *churn) http() []gwapiv1.ParentReference {
	return []gwapiv1.ParentReference{sectionRef(c.f.ns, "gw", "http")}
}

// setUp adds, before the load starts, what the changes work on: the listeners side, https and
// extra; the pool Service of four pods and its policy; the routes pool, edited, limited (with the
// RequestSizeLimit), secure (on https), side (on side) and extra (on extra).
func (c *churn) setUp(t *testing.T) {
	t.Helper()
	ns := c.f.ns
	for i := range 4 {
		startChaosWeb(t, fmt.Sprintf("pool-%d", i+1), fmt.Sprintf("10.99.41.%d:8080", 21+i))
	}
	createService(t, c.e, ns, "pool", poolSubsets[0]...)
	createPolicy(t, c.e, ns, "pool", policySpec(0))
	c.cert = rotateCert(t, c.e, ns, "cert", "secure.example")
	c.limit = "1k"
	if err := coxswainObject(t, c.e, sizeLimitGVR, "RequestSizeLimit", ns, "limit", map[string]any{"maxSize": c.limit}); err != nil {
		t.Fatal(err)
	}
	updateGateway(t, c.e, ns, "gw", func(gw *gwapiv1.Gateway) {
		gw.Spec.Listeners = append(gw.Spec.Listeners, httpListener("side", churnSidePort),
			httpsListener("https", churnHTTPSPort, "secure.example", certRef("", "cert")), httpListener("extra", churnExtraPort))
	})
	c.extra = true
	createCTP(t, c.e, ns, "side", ctpSpec(0))
	createRoute(t, c.e, httpRoute(ns, "pool", c.http(), []string{"pool.example"}, prefixRule("/", backendRef("pool", 1))))
	createRoute(t, c.e, httpRoute(ns, "edited", c.http(), []string{"edited.example"}, prefixRule("/", backendRef("web", 1))))
	limited := prefixRule("/", backendRef("web", 1))
	limited.Filters = extRef("RequestSizeLimit", "limit")
	createRoute(t, c.e, httpRoute(ns, "limited", c.http(), []string{"limited.example"}, limited))
	createRoute(t, c.e, httpRoute(ns, "secure", []gwapiv1.ParentReference{sectionRef(ns, "gw", "https")}, []string{"secure.example"},
		prefixRule("/", backendRef("web", 1))))
	createRoute(t, c.e, httpRoute(ns, "side", []gwapiv1.ParentReference{sectionRef(ns, "gw", "side")}, nil, prefixRule("/", backendRef("web", 1))))
	createRoute(t, c.e, httpRoute(ns, "extra", []gwapiv1.ParentReference{sectionRef(ns, "gw", "extra")}, nil, prefixRule("/", backendRef("web", 1))))
	for _, p := range c.f.proxies {
		servedAt(t, p.ip, chaosHTTPPort, "edited.example", "/", 200, "web")
		servedAt(t, p.ip, chaosHTTPPort, "limited.example", "/", 200, "web")
		servedAt(t, p.ip, churnSidePort, "side.example", "/", 200, "web")
		servedAt(t, p.ip, churnExtraPort, "extra.example", "/", 200, "web")
	}
	c.verify(t)
}

// addTraffic adds, to the load, requests to everything the changes touch, through every proxy:
// keep-alive and new-connection requests to the pool and the edited route, new-connection HTTPS
// requests (a handshake each, with whatever certificate is current), GETs through the filtered
// route and the side listener.
func (c *churn) addTraffic(l *chaosLoad) {
	pool, edited := l.kind("pool (EndpointSlice churn, policy changes)"), l.kind("edited route")
	secure, limited, side := l.kind("HTTPS (certificate rotation)"), l.kind("ExtensionRef-filtered route"), l.kind("side listener (ClientTrafficPolicy changes)")
	for _, p := range c.f.proxies {
		keepAlive := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
		httpURL := fmt.Sprintf("http://%s/", net.JoinHostPort(p.ip, strconv.Itoa(chaosHTTPPort)))
		l.requestsTo(pool, keepAlive, p.name, httpURL, "pool.example")
		l.requestsTo(pool, client, p.name, httpURL, "pool.example")
		l.requestsTo(edited, keepAlive, p.name, httpURL, "edited.example")
		l.requestsTo(edited, client, p.name, httpURL, "edited.example")
		l.requestsTo(limited, keepAlive, p.name, httpURL, "limited.example")
		l.requestsTo(side, client, p.name, fmt.Sprintf("http://%s/", net.JoinHostPort(p.ip, strconv.Itoa(churnSidePort))), "side.example")
		tlsClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{ServerName: "secure.example", InsecureSkipVerify: true}}} //nolint:gosec // the certificate rotates; verify checks which one answers
		l.requestsTo(secure, tlsClient, p.name, fmt.Sprintf("https://%s/", net.JoinHostPort(p.ip, strconv.Itoa(churnHTTPSPort))), "secure.example")
	}
}

// round makes one round of changes, then waits until both proxies serve its result.
func (c *churn) round(t *testing.T, round int) {
	t.Helper()
	ns := c.f.ns
	// Routes: four new ones on the load's listener, the last round's deleted, one edited.
	var made []string
	for i := range 4 {
		name := fmt.Sprintf("r%d-%d", round, i)
		createRoute(t, c.e, httpRoute(ns, name, c.http(), []string{name + ".example"}, prefixRule("/", backendRef("web", 1))))
		made = append(made, name)
		c.counts["route created"]++
	}
	for _, name := range c.routes {
		if err := c.e.Gateway.GatewayV1().HTTPRoutes(ns).Delete(ctxFor(t), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		c.counts["route deleted"]++
	}
	gone := c.routes
	c.routes = made
	editedTo := []string{"web", "pool"}[(round+1)%2]
	updateRoute(t, c.e, ns, "edited", func(r *gwapiv1.HTTPRoute) {
		r.Spec.Rules = []gwapiv1.HTTPRouteRule{prefixRule("/", backendRef(editedTo, 1))}
	})
	c.counts["route edited"]++

	// The listener extra comes and goes.
	c.extra = !c.extra
	updateGateway(t, c.e, ns, "gw", func(gw *gwapiv1.Gateway) {
		gw.Spec.Listeners = slices.DeleteFunc(gw.Spec.Listeners, func(l gwapiv1.Listener) bool { return l.Name == "extra" })
		if c.extra {
			gw.Spec.Listeners = append(gw.Spec.Listeners, httpListener("extra", churnExtraPort))
		}
	})
	c.counts["listener added/removed"]++

	c.cert = rotateCert(t, c.e, ns, "cert", "secure.example")
	c.counts["certificate rotated"]++

	for range 3 {
		c.subset = (c.subset + 1) % len(poolSubsets)
		setEndpoints(t, c.e, ns, "pool", poolSubsets[c.subset]...)
		c.counts["EndpointSlice update"]++
	}
	updateSpec(t, c.e, backendPolicyGVR, ns, "pool", policySpec(round+1))
	c.counts["CoxswainBackendPolicy"]++
	updateSpec(t, c.e, clientTrafficPolicyGVR, ns, "side", ctpSpec(round+1))
	c.counts["ClientTrafficPolicy"]++
	c.limit = map[string]string{"1k": "4k", "4k": "1k"}[c.limit]
	updateSpec(t, c.e, sizeLimitGVR, ns, "limit", map[string]any{"maxSize": c.limit})
	c.counts["ExtensionRef filter object"]++

	c.verify(t)
	for _, p := range c.f.proxies {
		for _, name := range made {
			servedAt(t, p.ip, chaosHTTPPort, name+".example", "/", 200, "web")
		}
		for _, name := range gone {
			servedAt(t, p.ip, chaosHTTPPort, name+".example", "/", 404, "")
		}
		eventually(t, p.name+": edited route to "+editedTo, func() error {
			r, err := getAt(p.ip, chaosHTTPPort, "edited.example", "/")
			if err != nil || r.status != 200 || !strings.HasPrefix(r.backend, editedTo) {
				return fmt.Errorf("%d from %q (%v)", r.status, r.backend, err)
			}
			return nil
		})
	}
}

// verify waits until every proxy serves the current listeners, certificate, endpoints and filter.
func (c *churn) verify(t *testing.T) {
	t.Helper()
	for _, p := range c.f.proxies {
		if c.extra {
			servedAt(t, p.ip, churnExtraPort, "extra.example", "/", 200, "web")
		} else {
			eventually(t, p.name+": listener extra closed", func() error {
				conn, err := net.DialTimeout("tcp", net.JoinHostPort(p.ip, strconv.Itoa(churnExtraPort)), time.Second)
				if err == nil {
					_ = conn.Close()
					return errors.New("still accepting")
				}
				return nil
			})
		}
		eventually(t, p.name+": the current certificate", func() error {
			got, err := servedCertAt(p.ip, churnHTTPSPort, "secure.example")
			if err != nil {
				return err
			}
			if !got.Equal(c.cert) {
				return fmt.Errorf("serial %v, want %v", got.SerialNumber, c.cert.SerialNumber)
			}
			return nil
		})
		want := map[string]bool{}
		for _, a := range poolSubsets[c.subset] {
			want["pool-"+strconv.Itoa(int(a[len(a)-1]-'0'))] = true
		}
		// Every step takes one pod out, so answers only from the current pair prove the last
		// step arrived (least_conn and ewma may send sequential requests all to one of them).
		eventually(t, fmt.Sprintf("%s: pool served by %v only", p.name, poolSubsets[c.subset]), func() error {
			for range 8 {
				r, err := getAt(p.ip, chaosHTTPPort, "pool.example", "/")
				if err != nil || r.status != 200 || !want[r.backend] {
					return fmt.Errorf("%d from %q (%v)", r.status, r.backend, err)
				}
			}
			return nil
		})
		limit := map[string]int{"1k": 413, "4k": 200}[c.limit]
		eventually(t, fmt.Sprintf("%s: a 2000-byte body answered %d (maxSize %s)", p.name, limit, c.limit), func() error {
			req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("http://%s/", net.JoinHostPort(p.ip, strconv.Itoa(chaosHTTPPort))),
				strings.NewReader(strings.Repeat("x", 2000)))
			if err != nil {
				return err
			}
			req.Host = "limited.example"
			res, err := client.Do(req)
			if err != nil {
				return err
			}
			_ = res.Body.Close()
			if res.StatusCode != limit {
				return fmt.Errorf("status %d", res.StatusCode)
			}
			return nil
		})
	}
}

// statusCurrent waits until the policies' status is of their last generation.
func (c *churn) statusCurrent(t *testing.T) {
	t.Helper()
	waitAncestor(t, c.e, c.f.ns, "pool", "pool", "True", "Accepted", "Applied to Service "+c.f.ns+"/pool")
	waitPolicyAncestor(t, c.e, clientTrafficPolicyGVR, c.f.ns, "side", "gw", "side", "True", "Accepted", "")
}

// policySpec is the pool's CoxswainBackendPolicy in round n: the balancer and the connect
// timeout change every round.
func policySpec(n int) map[string]any {
	return map[string]any{
		"targetRefs":   []any{serviceTarget("pool")},
		"loadBalancer": map[string]any{"algorithm": []string{"round_robin", "least_conn", "ewma"}[n%3]},
		"timeouts":     map[string]any{"connect": fmt.Sprintf("%dms", 1000+n)},
	}
}

// ctpSpec is the side listener's ClientTrafficPolicy in round n: its trusted X-Forwarded-For
// hops change every round.
func ctpSpec(n int) map[string]any {
	return map[string]any{
		"targetRefs":        []any{gatewayTarget("gw", "side")},
		"clientIPDetection": map[string]any{"xForwardedFor": map[string]any{"numTrustedHops": int64(1 + n%5)}},
	}
}

// rotateCert puts a new self-signed certificate for host in the TLS Secret name (creating it the
// first time) and returns it.
func rotateCert(t *testing.T, e *env.Env, ns, name, host string) *x509.Certificate {
	t.Helper()
	pair, leaf := keyPair(t, host)
	keyDER, err := x509.MarshalPKCS8PrivateKey(pair.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	data := map[string][]byte{
		corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw}),
		corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
	secrets := e.Kube.CoreV1().Secrets(ns)
	cur, err := secrets.Get(ctxFor(t), name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = secrets.Create(ctxFor(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Type: corev1.SecretTypeTLS, Data: data}, metav1.CreateOptions{})
	case err == nil:
		cur.Data = data
		_, err = secrets.Update(ctxFor(t), cur, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// servedCertAt is the certificate a TLS handshake with sni at ip:port is answered with.
func servedCertAt(ip string, port int, sni string) (*x509.Certificate, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort(ip, strconv.Itoa(port)),
		&tls.Config{ServerName: sni, InsecureSkipVerify: true}) //nolint:gosec // the caller compares the certificate itself
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}
