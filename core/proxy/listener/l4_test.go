package listener

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

func TestL4Check(t *testing.T) {
	pass := &irv1.TLS{Mode: irv1.TLS_PASSTHROUGH}
	term := &irv1.TLS{Certificates: []string{"ns/cert"}}
	cases := []struct {
		name    string
		sl      proxy.StreamListener
		servers []*irv1.Server
		wantErr string
	}{
		{"tcp catch-all", &TCP{}, []*irv1.Server{{}}, ""},
		{"tcp with a hostname", &TCP{}, []*irv1.Server{{Hostname: "a.example.com"}}, "no hostname"},
		{"tcp with two servers", &TCP{}, []*irv1.Server{{}, {Hostname: "a"}}, "exactly one"},
		{"tcp with TLS", &TCP{}, []*irv1.Server{{Tls: pass}}, "no TLS"},
		{"udp catch-all", &UDP{}, []*irv1.Server{{}}, ""},
		{"udp without servers", &UDP{}, nil, "exactly one"},
		{"tls mixed", &TLS{}, []*irv1.Server{{Hostname: "a.example.com", Tls: pass}, {Hostname: "b.example.com", Tls: term}}, ""},
		{"tls without servers", &TLS{}, nil, "no servers"},
		{"tls server without TLS", &TLS{}, []*irv1.Server{{Hostname: "a"}}, "no TLS"},
		{"tls terminate without certificate", &TLS{}, []*irv1.Server{{Tls: &irv1.TLS{}}}, "without a certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.sl.Check(&irv1.Listener{Servers: tc.servers})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one mentioning %q", err, tc.wantErr)
			}
		})
	}
}

func TestL4RouteAPIs(t *testing.T) {
	for _, tc := range []struct {
		sl   proxy.StreamListener
		want proxy.RouteAPI
	}{{&TCP{}, proxy.RouteAPIStream}, {&TLS{}, proxy.RouteAPIStream}, {&UDP{}, proxy.RouteAPIDatagram}} {
		if got := tc.sl.(proxy.RouteAPIer).RouteAPI(); got != tc.want {
			t.Errorf("%s: route API %v, want %v", tc.sl.CoxswainModule().ID, got, tc.want)
		}
	}
	if _, ok := proxy.StreamListener(&UDP{}).(proxy.PacketListener); !ok {
		t.Error("listener.udp is not a PacketListener")
	}
	if _, ok := proxy.StreamListener(&TCP{}).(proxy.PacketListener); ok {
		t.Error("listener.tcp is a PacketListener")
	}
}

// clientHello is the first flight of a crypto/tls client for sni.
func clientHello(t testing.TB, sni string) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	go func() { _ = tls.Client(a, &tls.Config{ServerName: sni, InsecureSkipVerify: true}).Handshake() }()
	_ = b.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64<<10)
	n, err := b.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	return buf[:n]
}

// peek runs peekClientHello on a connection that delivers input and then EOF.
func peek(input []byte) (string, []byte, error) {
	a, b := net.Pipe()
	go func() {
		_, _ = a.Write(input)
		_ = a.Close()
	}()
	defer b.Close()
	_ = b.SetDeadline(time.Now().Add(5 * time.Second))
	return peekClientHello(b)
}

func TestPeekClientHello(t *testing.T) {
	hello := clientHello(t, "a.example.com")
	noSNI := clientHello(t, "")
	cases := []struct {
		name    string
		input   []byte
		wantSNI string
		wantErr bool
	}{
		{"a ClientHello", hello, "a.example.com", false},
		{"no SNI", noSNI, "", false},
		{"truncated", hello[:len(hello)-10], "", true},
		{"only the record header", hello[:5], "", true},
		{"plain HTTP", []byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), "", true},
		{"nothing", nil, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sni, read, err := peek(tc.input)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if sni != tc.wantSNI {
				t.Errorf("SNI %q, want %q", sni, tc.wantSNI)
			}
			if string(read) != string(tc.input) {
				t.Errorf("recorded %d bytes, want the %d sent (to replay them)", len(read), len(tc.input))
			}
		})
	}
}

// FuzzPeekClientHello: whatever the first flight, the peek returns (no panic, no hang) and what
// it records is a prefix of what was sent.
func FuzzPeekClientHello(f *testing.F) {
	f.Add(clientHello(f, "a.example.com"))
	f.Add([]byte{0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00})
	f.Add([]byte("\x16\x03\x01\xff\xff"))
	f.Fuzz(func(t *testing.T, in []byte) {
		_, read, err := peek(in)
		if err != nil && !errors.Is(err, io.EOF) && read != nil {
			t.Fatalf("error %v with recorded bytes", err)
		}
		if len(read) > len(in) || string(read) != string(in[:len(read)]) {
			t.Fatalf("recorded bytes are not a prefix of the input")
		}
	})
}

func TestValidServerName(t *testing.T) {
	for name, want := range map[string]bool{
		"": true, "a": true, "example.com": true, "A-b_c.example.com": true, "xn--bcher-kva.example": true,
		"a\x00b": false, "a b": false, "a\xffb": false, "a\r\nb": false, "a/b": false, "...": false,
		".a": false, "a..b": false, "a.": false, "*.example.com": false,
		strings.Repeat("a", 64) + ".com": false, strings.Repeat("a.", 127) + "aa": false,
	} {
		if got := validServerName(name); got != want {
			t.Errorf("validServerName(%q) = %v, want %v", name, got, want)
		}
	}
}
