package coxswaincmd

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
)

// sessionKeyLabel is the HKDF info of the session persistence key (translator.Options.SessionKey),
// whatever it is derived from: a --session-key-file or the discovery CA's private key.
const sessionKeyLabel = "coxswain-labs.dev session persistence v1"

// minSessionKeyFile is the least a --session-key-file must hold: a key guessed is a cookie forged.
const minSessionKeyFile = 16

// sessionKeyFlag is --session-key-file, which serve and controller share.
type sessionKeyFlag struct{ path string }

func (f *sessionKeyFlag) register(fs *flag.FlagSet, without string) {
	fs.StringVar(&f.path, "session-key-file", "",
		"file whose bytes (at least 16, e.g. head -c 32 /dev/urandom) key session persistence cookies: processes given the same file and configuration issue and honour the same cookies; "+without)
}

// key reads the file into a 32-byte key, or returns nil when the flag is unset.
func (f *sessionKeyFlag) key() ([]byte, error) {
	if f.path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return nil, fmt.Errorf("--session-key-file: %w", err)
	}
	if len(b) < minSessionKeyFile {
		return nil, fmt.Errorf("--session-key-file %s holds %d bytes; use at least %d random bytes (head -c 32 /dev/urandom > FILE)", f.path, len(b), minSessionKeyFile)
	}
	return hkdf.Key(sha256.New, b, nil, sessionKeyLabel, 32)
}

// randomSessionKey is the key of a process without a shared one.
func randomSessionKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // crypto/rand.Read never fails
	return k
}
