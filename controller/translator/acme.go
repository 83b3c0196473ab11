package translator

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net/url"
	"sort"
	"strings"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// Automatic certificates (docs/https.md). A Gateway opts in with annotations naming its ACME
// issuer; each of its HTTPS listeners that has a hostname and no certificateRefs then gets its
// certificate from the ACME client of the process (Options.ACME), which the translator only
// reads: what it has obtained, and the challenges it is answering now. Until a certificate is
// there the listener is bound (so TLS-ALPN-01 can be answered on it) but not Programmed.
const (
	// ACMEDirectoryAnnotation is the ACME directory URL (https); it turns ACME on.
	ACMEDirectoryAnnotation = "gateway.coxswain-labs.dev/acme-directory"
	// ACMEEmailAnnotation is the account's contact address (optional).
	ACMEEmailAnnotation = "gateway.coxswain-labs.dev/acme-email"
	// ACMECAAnnotation names a ConfigMap in the Gateway's namespace whose ca.crt is trusted for the
	// directory's TLS (a private ACME server); without it the system roots are.
	ACMECAAnnotation = "gateway.coxswain-labs.dev/acme-ca-configmap"
	// ACMEEABAnnotation names a Secret in the Gateway's namespace with the external account
	// binding (keys keyID and hmacKey, base64url as the CA gives it). In a cluster the Secret must
	// carry the label ACMEEABSecretLabel: the controller watches no other non-TLS Secrets.
	ACMEEABAnnotation = "gateway.coxswain-labs.dev/acme-eab-secret"
	// ACMEChallengeAnnotation limits the challenge types offered to the CA to one: "http-01" (on
	// the Gateway's HTTP listener, port 80 for a public CA) or "tls-alpn-01" (on the HTTPS
	// listener, port 443). Without it both are, and the CA's order decides.
	ACMEChallengeAnnotation = "gateway.coxswain-labs.dev/acme-challenge"
	// ACMEDNSProviderAnnotation names the DNS provider module (acme.dns.<name>) that solves DNS-01,
	// which wildcard hostnames need.
	ACMEDNSProviderAnnotation = "gateway.coxswain-labs.dev/acme-dns-provider"

	// ACMEEABSecretLabel selects the EAB Secrets the controller watches.
	ACMEEABSecretLabel = "gateway.coxswain-labs.dev/acme-eab=true"
	// EABKeyIDKey and EABHMACKey are the keys of an EAB Secret.
	EABKeyIDKey = "keyID"
	EABHMACKey  = "hmacKey"

	// ACMEDNSNamespace is the module namespace of DNS-01 providers: a distribution that adds one
	// (a libdns provider wrapped as a module) makes wildcard hostnames work.
	ACMEDNSNamespace = "acme.dns"
)

// ACMEIssuer is an ACME CA account as a Gateway names it.
type ACMEIssuer struct {
	Directory   string
	Email       string
	CAPEM       []byte // trusted for the directory's TLS; nil: the system roots
	EABKeyID    string
	EABHMAC     string
	DNSProvider core.ModuleID // "" without DNS-01
	Challenge   string        // "http-01", "tls-alpn-01", or "" for both
}

// Key identifies the issuer by content: Gateways naming the same account share certificates.
func (i *ACMEIssuer) Key() string {
	h := sha256.New()
	for _, s := range []string{i.Directory, i.Email, string(i.CAPEM), i.EABKeyID, i.EABHMAC, string(i.DNSProvider), i.Challenge} {
		fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// ACMEOrder is one hostname a translation wants a certificate for (Result.ACME).
type ACMEOrder struct {
	Issuer   *ACMEIssuer
	Hostname string
}

// ACMEState is what the ACME client has for one (issuer, hostname).
type ACMEState struct {
	// Certificate and PrivateKey are PEM; nil until one is obtained.
	Certificate, PrivateKey []byte
	// Error is why the last attempt to obtain one failed ("" when none did); it is retried.
	Error string
}

// ACMESource is the process's ACME client as the translator reads it (controller/acme.Manager).
type ACMESource interface {
	State(issuerKey, hostname string) ACMEState
	// Challenges are the validations being answered now, which the snapshot carries.
	Challenges() []*irv1.ACMEChallenge
}

// acmeListener is the ACME side of an HTTPS listener that gets its certificate automatically.
type acmeListener struct {
	issuer  *ACMEIssuer
	pending string // why there is no certificate yet; "" once there is one
}

// acmeIssuer reads the Gateway's ACME annotations; nil when it has none.
func (t *session) acmeIssuer(l *listenerState) (*ACMEIssuer, error) {
	ann := l.gw.gw.Annotations
	dir := ann[ACMEDirectoryAnnotation]
	if dir == "" {
		return nil, nil
	}
	if u, err := url.Parse(dir); err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("annotation %s: %q is not an https URL", ACMEDirectoryAnnotation, dir)
	}
	iss := &ACMEIssuer{Directory: dir, Email: ann[ACMEEmailAnnotation], Challenge: ann[ACMEChallengeAnnotation]}
	switch iss.Challenge {
	case "", "http-01", "tls-alpn-01":
	default:
		return nil, fmt.Errorf("annotation %s: %q is neither http-01 nor tls-alpn-01", ACMEChallengeAnnotation, iss.Challenge)
	}
	ns := l.gw.key.Namespace
	if cm := ann[ACMECAAnnotation]; cm != "" {
		pem, _, err := t.readCA(caSource{kind: "ConfigMap", name: cm, ns: ns})
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %w", ACMECAAnnotation, err)
		}
		iss.CAPEM = pem
	}
	if name := ann[ACMEEABAnnotation]; name != "" {
		sec := t.secrets[nn(ns, name)]
		if sec == nil {
			return nil, fmt.Errorf("annotation %s: Secret %s/%s does not exist (in a cluster it needs the label %s)", ACMEEABAnnotation, ns, name, ACMEEABSecretLabel)
		}
		iss.EABKeyID, iss.EABHMAC = string(secretData(sec, EABKeyIDKey)), string(secretData(sec, EABHMACKey))
		if iss.EABKeyID == "" || iss.EABHMAC == "" {
			return nil, fmt.Errorf("annotation %s: Secret %s/%s needs the keys %s and %s", ACMEEABAnnotation, ns, name, EABKeyIDKey, EABHMACKey)
		}
	}
	if p := ann[ACMEDNSProviderAnnotation]; p != "" {
		id := core.ModuleID(ACMEDNSNamespace + "." + p)
		if _, ok := t.opts.Registry.Lookup(id); !ok {
			return nil, fmt.Errorf("annotation %s: no DNS provider module %s is compiled in", ACMEDNSProviderAnnotation, id)
		}
		iss.DNSProvider = id
	}
	return iss, nil
}

// listenerACME handles an HTTPS listener with no certificateRefs: it is an ACME listener when
// its Gateway names an issuer, and reports true; false leaves it to the certificateRefs rules.
func (t *session) listenerACME(l *listenerState) bool {
	iss, err := t.acmeIssuer(l)
	switch {
	case err != nil:
		t.unresolvedListener(l, "tls", gwapiv1.ListenerReasonInvalidCertificateRef, err.Error())
		return true
	case iss == nil:
		return false
	case l.hostname == "":
		t.unresolvedListener(l, "hostname", gwapiv1.ListenerReasonInvalidCertificateRef,
			"an ACME certificate needs a hostname; this listener has none and no certificateRefs")
		return true
	case strings.HasPrefix(l.hostname, "*.") && iss.DNSProvider == "":
		t.rejectListener(l, "hostname", gwapiv1.ListenerReasonUnsupportedValue, fmt.Sprintf(
			"wildcard hostname %s needs the ACME DNS-01 challenge: name a DNS provider module (%s.*) with annotation %s",
			l.hostname, ACMEDNSNamespace, ACMEDNSProviderAnnotation))
		return true
	}
	l.acme = &acmeListener{issuer: iss}
	t.acmeOrders[iss.Key()+"/"+l.hostname] = &ACMEOrder{Issuer: iss, Hostname: l.hostname}
	if t.opts.ACME == nil {
		l.acme.pending = "no ACME client runs in this process"
		return true
	}
	st := t.opts.ACME.State(iss.Key(), l.hostname)
	if st.Certificate == nil {
		l.acme.pending = "waiting for the certificate for " + l.hostname + " from " + iss.Directory
		if st.Error != "" {
			l.acme.pending += "; the last attempt failed (retried): " + st.Error
			t.listenerProblem(l, "tls", gwapiv1.ListenerReasonPending, l.acme.pending)
		}
		return true
	}
	if _, err := tls.X509KeyPair(st.Certificate, st.PrivateKey); err != nil {
		l.acme.pending = "the ACME certificate for " + l.hostname + " does not load: " + err.Error()
		t.listenerProblem(l, "tls", gwapiv1.ListenerReasonPending, l.acme.pending)
		return true
	}
	name := "acme:" + iss.Key() + "/" + l.hostname
	t.secretsOut[name] = &irv1.Secret{Name: name, CertificatePem: st.Certificate, PrivateKeyPem: st.PrivateKey}
	l.certs = append(l.certs, name)
	return true
}

// awaitingACME reports whether l is bound without being programmed: an ACME listener with no
// certificate yet, which answers TLS-ALPN-01 validations and nothing else.
func (l *listenerState) awaitingACME() bool {
	return l.acme != nil && len(l.certs) == 0 && l.gw.rejectReason == "" && l.gw.addrMsg == "" &&
		l.accepted.ok && l.resolved.ok && !l.conflicted.ok && !l.filtersFailed
}

// bound reports whether l's socket is in the snapshot.
func (l *listenerState) bound() bool { return l.programmed() || l.awaitingACME() }

// acmeResult lists the orders of the translation, sorted.
func (t *session) acmeResult() []*ACMEOrder {
	out := make([]*ACMEOrder, 0, len(t.acmeOrders))
	for _, o := range t.acmeOrders {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Hostname != out[j].Hostname {
			return out[i].Hostname < out[j].Hostname
		}
		return out[i].Issuer.Key() < out[j].Issuer.Key()
	})
	return out
}

// acmeChallenges are the challenges the snapshot carries, sorted.
func (t *session) acmeChallenges() []*irv1.ACMEChallenge {
	if t.opts.ACME == nil {
		return nil
	}
	chs := t.opts.ACME.Challenges()
	sort.Slice(chs, func(i, j int) bool {
		a, b := chs[i], chs[j]
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		if a.Hostname != b.Hostname {
			return a.Hostname < b.Hostname
		}
		return a.Token < b.Token
	})
	return chs
}
