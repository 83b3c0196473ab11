package discovery

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"

	"go.uber.org/zap"
	"google.golang.org/grpc/credentials"
)

// refusingCreds are the server's TLS credentials, counting and logging the connections refused
// in the handshake, where a stream or bootstrap call never starts and so never reaches the
// refusals Stream and IssueCertificate count: an expired client certificate, one from another CA,
// a client that does not speak TLS at all (plaintext gRPC, HTTP, garbage) or stalls in the
// handshake. A peer that connects and closes without a byte (a TCP health check) is counted but
// logged at debug only.
type refusingCreds struct {
	credentials.TransportCredentials
	log     *zap.Logger
	metrics *metrics
}

func (c *refusingCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		reason := handshakeRefusal(err)
		c.metrics.refused(reason)
		level := zap.WarnLevel
		if reason == "tls_closed" {
			level = zap.DebugLevel
		}
		if ce := c.log.Check(level, "discovery connection refused in the TLS handshake"); ce != nil {
			ce.Write(zap.String("reason", reason), zap.Stringer("peer", raw.RemoteAddr()), zap.Error(err))
		}
	}
	return conn, info, err
}

func (c *refusingCreds) Clone() credentials.TransportCredentials {
	return &refusingCreds{TransportCredentials: c.TransportCredentials.Clone(), log: c.log, metrics: c.metrics}
}

// handshakeRefusal names why a handshake failed (the reason label of
// coxswain_discovery_refusals_total).
func handshakeRefusal(err error) string {
	var invalid x509.CertificateInvalidError
	var unknown x509.UnknownAuthorityError
	switch {
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "tls_expired_certificate"
	case errors.As(err, &unknown):
		return "tls_unknown_ca"
	case errors.As(err, &invalid):
		return "tls_bad_certificate"
	case errors.Is(err, io.EOF):
		return "tls_closed"
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return "tls_timeout"
	}
	return "tls_handshake"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
