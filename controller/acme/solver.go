package acme

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"

	"github.com/mholt/acmez/v3"
	"github.com/mholt/acmez/v3/acme"
	"go.uber.org/zap"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// solver answers HTTP-01 or TLS-ALPN-01 through the proxies: Present puts the challenge in what
// the next snapshot carries, Wait returns once the proxies serve it (the Manager's Served), and
// CleanUp takes it out again.
type solver struct {
	m   *Manager
	typ string
}

var (
	_ acmez.Solver = (*solver)(nil)
	_ acmez.Waiter = (*solver)(nil)
)

func challengeKey(c acme.Challenge) string {
	return c.Type + "/" + c.Identifier.Value + "/" + c.Token
}

// Present implements acmez.Solver.
func (s *solver) Present(_ context.Context, c acme.Challenge) error {
	ch := &irv1.ACMEChallenge{Hostname: c.Identifier.Value, Token: c.Token, KeyAuthorization: c.KeyAuthorization}
	switch s.typ {
	case acme.ChallengeTypeHTTP01:
		ch.Type = irv1.ACMEChallenge_HTTP_01
	case acme.ChallengeTypeTLSALPN01:
		ch.Type = irv1.ACMEChallenge_TLS_ALPN_01
		cert, err := acmez.TLSALPN01ChallengeCert(c)
		if err != nil {
			return err
		}
		der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
		if err != nil {
			return err
		}
		ch.CertificatePem = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
		ch.PrivateKeyPem = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
		ch.KeyAuthorization = "" // the certificate carries it
	default:
		return fmt.Errorf("challenge type %s is not solved here", s.typ)
	}
	s.m.log.Info("answering an ACME challenge", zap.String("type", s.typ), zap.String("hostname", ch.Hostname))
	s.m.addChallenge(challengeKey(c), ch)
	return nil
}

// Wait implements acmez.Waiter: the CA is told to validate only once the proxies answer.
func (s *solver) Wait(ctx context.Context, c acme.Challenge) error {
	ch := s.m.challenge(challengeKey(c))
	if ch == nil {
		return fmt.Errorf("challenge for %s was cleaned up before it was served", c.Identifier.Value)
	}
	if s.m.opts.Served == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.m.opts.ServeTimeout)
	defer cancel()
	if err := s.m.opts.Served(ctx, ch); err != nil {
		return fmt.Errorf("the proxies did not take the %s challenge for %s: %w", c.Type, c.Identifier.Value, err)
	}
	return nil
}

// CleanUp implements acmez.Solver.
func (s *solver) CleanUp(_ context.Context, c acme.Challenge) error {
	s.m.removeChallenge(challengeKey(c))
	return nil
}
