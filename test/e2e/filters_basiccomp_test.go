package e2e

import (
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"golang.org/x/crypto/bcrypt"
)

// TestExamplesBasicAuth serves examples/filters and checks its BasicAuth routes: 401 with the
// object's realm, the backend reached without the credentials, 503 for the rule whose Secret does
// not exist, and a Secret edited in place taking effect without a restart (standalone reads
// Secrets of every type from the files).
func TestExamplesBasicAuth(t *testing.T) {
	port := freePort(t)
	files := exampleFiles(t, "filters", map[string]int{"port: 8090": port, "port: 9331": startBackend(t, "app").port})
	s := startServe(t, files)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	as := func(path, user, password string) (*result, error) {
		r := request{url: url + path}
		if user != "" {
			r.headers = map[string]string{"Authorization": "Basic " + basicCredentials(user, password)}
		}
		return do(context.Background(), noRedirect, r)
	}
	eventually(t, 10*time.Second, "/basicauth asks for credentials", func() error {
		res, err := as("/basicauth/x", "", "")
		if err != nil {
			return err
		}
		if res.code != http.StatusUnauthorized || res.header.Get("WWW-Authenticate") != `Basic realm="default/admin"` {
			return fmt.Errorf("got %d, WWW-Authenticate %q: %s", res.code, res.header.Get("WWW-Authenticate"), res.body)
		}
		return nil
	})
	res, err := as("/basicauth/x", "admin", "coxswain-demo")
	if err != nil || res.code != 200 || res.echo == nil || res.echo.Path != "/basicauth/x" {
		t.Fatalf("the example's credentials: %v %+v", err, res)
	}
	if v, ok := res.echo.Headers["Authorization"]; ok {
		t.Errorf("the backend received Authorization %q", v)
	}
	for _, pw := range []string{"coxswain-dem0", ""} {
		if res, err := as("/basicauth/x", "admin", pw); err != nil || res.code != http.StatusUnauthorized || res.echo != nil {
			t.Errorf("password %q: %v %+v, want 401", pw, err, res)
		}
	}
	if res, err := as("/basicauth-closed/x", "admin", "coxswain-demo"); err != nil || res.code != http.StatusServiceUnavailable || res.echo != nil {
		t.Errorf("a BasicAuth without its Secret: %v %+v, want 503", err, res)
	}
	var problems []string
	for _, p := range s.status().Report.Problems {
		if p.Object == "HTTPRoute default/basicauth" {
			problems = append(problems, p.Field+" "+p.Reason)
		}
	}
	if want := []string{"spec.rules[1].filters[0].extensionRef SecretNotFound"}; !slices.Equal(problems, want) {
		t.Errorf("problems %v, want %v", problems, want)
	}

	// A new password in the Secret: served from the next translation, no restart.
	hash, err := bcrypt.GenerateFromPassword([]byte("rotated"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	old := files["basicauth.yaml"]
	i := strings.Index(old, "    admin:$2y$")
	if i < 0 {
		t.Fatal("examples/filters/basicauth.yaml no longer has admin's htpasswd line")
	}
	s.replace("basicauth.yaml", old[:i]+"    admin:"+string(hash)+"\n")
	eventually(t, 10*time.Second, "the rotated password is accepted", func() error {
		res, err := as("/basicauth/x", "admin", "rotated")
		if err != nil {
			return err
		}
		if res.code != 200 {
			return fmt.Errorf("got %d", res.code)
		}
		return nil
	})
	if res, err := as("/basicauth/x", "admin", "coxswain-demo"); err != nil || res.code != http.StatusUnauthorized {
		t.Errorf("the old password after the rotation: %v %+v, want 401", err, res)
	}
}

func basicCredentials(user, password string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
}

// TestExamplesCompression serves examples/filters and checks its Compression route with clients
// that decode what they get: brotli when accepted, gzip otherwise, identity (with Vary) without
// Accept-Encoding.
func TestExamplesCompression(t *testing.T) {
	port := freePort(t)
	startServe(t, exampleFiles(t, "filters", map[string]int{"port: 8090": port, "port: 9331": startBackend(t, "app").port}))
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}
	fetch := func(accept string) (http.Header, *echo, error) {
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/compression/x?q=%s", port, strings.Repeat("pad", 40)), nil)
		if err != nil {
			return nil, nil, err
		}
		if accept != "" {
			req.Header.Set("Accept-Encoding", accept)
		}
		res, err := client.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer func() { _ = res.Body.Close() }()
		var r io.Reader = res.Body
		switch res.Header.Get("Content-Encoding") {
		case "gzip":
			if r, err = gzip.NewReader(res.Body); err != nil {
				return nil, nil, err
			}
		case "br":
			r = brotli.NewReader(res.Body)
		}
		var e echo
		if err := json.NewDecoder(r).Decode(&e); err != nil {
			return nil, nil, fmt.Errorf("status %d, %q body: %w", res.StatusCode, res.Header.Get("Content-Encoding"), err)
		}
		return res.Header, &e, nil
	}
	eventually(t, 10*time.Second, "/compression answers brotli", func() error {
		h, e, err := fetch("gzip, deflate, br")
		if err != nil {
			return err
		}
		if h.Get("Content-Encoding") != "br" || e.Path != "/compression/x" {
			return fmt.Errorf("Content-Encoding %q, path %q", h.Get("Content-Encoding"), e.Path)
		}
		return nil
	})
	for accept, want := range map[string]string{"gzip": "gzip", "br;q=0, gzip": "gzip", "": "", "identity": ""} {
		h, e, err := fetch(accept)
		if err != nil || h.Get("Content-Encoding") != want || e.Path != "/compression/x" || h.Get("Vary") != "Accept-Encoding" {
			t.Errorf("Accept-Encoding %q: %v, Content-Encoding %q, Vary %q; want %q", accept, err, h.Get("Content-Encoding"), h.Get("Vary"), want)
		}
	}
}
