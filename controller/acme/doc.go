// Package acme is the ACME client of automatic certificates (docs/https.md): certmagic obtains,
// stores and renews the certificates the translator asks for (translator.Result.ACME), through an
// issuer of its own on github.com/mholt/acmez whose HTTP-01 and TLS-ALPN-01 solvers do not open
// sockets: they add the challenge to what the next snapshot carries (Snapshot.acme_challenges),
// and wait until the proxies serve it, since only they hold the Gateway's ports. The translator
// reads the certificates back (translator.ACMESource) and ships them like any Secret's.
//
// Standalone `serve` keeps the storage on disk (certmagic.FileStorage); the controller keeps it
// in Secrets (SecretStorage), with a lock certmagic takes around every issuance, so two
// controllers, or a leader and its successor, never order the same certificate twice.
//
// DNS-01 (wildcard hostnames) needs a provider module: modules in the namespace acme.dns.*
// implement DNSProvider (a libdns provider, as certmagic takes them).
package acme
