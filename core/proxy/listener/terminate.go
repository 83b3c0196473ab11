package listener

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// What listener.https and listener.tls share: every server carries TLS settings, and a server
// that terminates does it with the same TLS versions and a handshake bounded by
// TLSHandshakeTimeout. They keep apart where the certificate comes from (https: the socket's
// current table at each handshake; tls: the server the ClientHello's SNI chose before it), what
// the handshake runs on (https: a goroutine of its own, before the HTTP server sees the
// connection; tls: the connection's, after the peek) and how a failure is counted and logged.

// checkTLSServers is the Check both listeners start with: at least one server, each with TLS
// settings. mode checks the rest of a server's settings for the listener; host is quoted.
func checkTLSServers(l *irv1.Listener, mode func(host string, t *irv1.TLS) error) error {
	if len(l.GetServers()) == 0 {
		return errors.New("no servers")
	}
	for _, s := range l.GetServers() {
		t := s.GetTls()
		if t == nil {
			return fmt.Errorf("server %s has no TLS settings", quote(s.GetHostname()))
		}
		if err := mode(quote(s.GetHostname()), t); err != nil {
			return err
		}
	}
	return nil
}

// terminateConfig is the TLS a terminating listener speaks: 1.2 and later, with the certificate
// cert chooses for each handshake.
func terminateConfig(cert func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cert}
}

// handshake completes tc's server handshake, giving up when ctx ends or after timeout (0: no
// limit). The timeout ends with the handshake: crypto/tls stops watching the context then.
func handshake(ctx context.Context, tc *tls.Conn, timeout time.Duration) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return tc.HandshakeContext(ctx)
}
