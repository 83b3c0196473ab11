package basicauth

import (
	"bytes"
	"crypto/sha1" // {SHA} entries are accepted for compatibility, and reported as weak
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// maxBcryptCost is the highest bcrypt cost accepted: every uncached request pays it, and a cost
// of 31 (which bcrypt allows) would take minutes. htpasswd -B itself stops at 17.
const maxBcryptCost = 17

// shaPrefix starts an unsalted SHA-1 htpasswd hash (htpasswd -s): "{SHA}" + base64(SHA-1).
const shaPrefix = "{SHA}"

// hashKind is what a hash string is.
type hashKind int

const (
	hashUnknown hashKind = iota
	hashBcrypt
	hashSHA
)

// ParseHtpasswd reads an htpasswd file: one "user:hash" per line, blank lines and lines starting
// with "#" ignored, CRLF accepted. It returns the users it accepts, sorted by name, and one
// warning per line it skips (a hash format other than bcrypt and {SHA} — MD5 apr1, crypt,
// plain text —, an empty user name, a repeated user: the first line wins, as in Apache). The
// warnings name the line and the user, never the hash.
func ParseHtpasswd(data []byte) (users []User, warnings []string) {
	seen := map[string]bool{}
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte{'\n'})
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if len(bytes.TrimSpace(line)) == 0 || line[0] == '#' {
			continue
		}
		name, hash, ok := bytes.Cut(line, []byte{':'})
		switch {
		case !ok:
			warnings = append(warnings, fmt.Sprintf("line %d: not user:hash, skipped", n))
			continue
		case len(name) == 0:
			warnings = append(warnings, fmt.Sprintf("line %d: empty user name, skipped", n))
			continue
		case !validName(name):
			warnings = append(warnings, fmt.Sprintf("line %d: the user name has control characters, skipped", n))
			continue
		}
		hash = bytes.TrimRight(hash, " \t")
		user := string(name)
		if seen[user] {
			warnings = append(warnings, fmt.Sprintf("line %d: user %q repeats an earlier line, skipped", n, user))
			continue
		}
		if err := checkHash(string(hash)); err != nil {
			warnings = append(warnings, fmt.Sprintf("line %d: user %q: %v, skipped", n, user, err))
			continue
		}
		seen[user] = true
		users = append(users, User{Name: user, Hash: string(hash)})
	}
	slices.SortFunc(users, func(a, b User) int { return strings.Compare(a.Name, b.Name) })
	return users, warnings
}

// validName rejects control characters, which no client can send in a user name (RFC 7617).
func validName(name []byte) bool {
	for _, c := range name {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// kindOf tells the hash formats apart by their prefix.
func kindOf(hash string) hashKind {
	switch {
	case strings.HasPrefix(hash, "$2a$"), strings.HasPrefix(hash, "$2b$"), strings.HasPrefix(hash, "$2y$"):
		return hashBcrypt
	case strings.HasPrefix(hash, shaPrefix):
		return hashSHA
	}
	return hashUnknown
}

// checkHash says why hash is not an accepted htpasswd hash, naming the format it looks like.
func checkHash(hash string) error {
	switch kindOf(hash) {
	case hashBcrypt:
		if len(hash) != 60 {
			return fmt.Errorf("malformed bcrypt hash (%d characters, want 60)", len(hash))
		}
		cost, err := bcrypt.Cost([]byte(hash))
		if err != nil {
			return fmt.Errorf("malformed bcrypt hash: %w", err)
		}
		if cost > maxBcryptCost {
			return fmt.Errorf("bcrypt cost %d is above %d", cost, maxBcryptCost)
		}
		if !bcryptAlphabet(hash[7:]) {
			return fmt.Errorf("malformed bcrypt hash (a character outside its base64 alphabet)")
		}
		return nil
	case hashSHA:
		if _, err := shaDigest(hash); err != nil {
			return err
		}
		return nil
	}
	switch {
	case strings.HasPrefix(hash, "$apr1$"):
		return fmt.Errorf("MD5 (apr1) hashes are not supported")
	case strings.HasPrefix(hash, "$1$"), strings.HasPrefix(hash, "$5$"), strings.HasPrefix(hash, "$6$"):
		return fmt.Errorf("crypt hashes are not supported")
	case hash == "":
		return fmt.Errorf("empty hash")
	}
	return fmt.Errorf("unsupported hash format (crypt or plain text; use bcrypt: htpasswd -B)")
}

// bcryptAlphabet reports whether s is made of bcrypt's base64 characters.
func bcryptAlphabet(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.', c == '/', c >= '0' && c <= '9', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		default:
			return false
		}
	}
	return true
}

// shaDigest decodes a {SHA} hash to its SHA-1 digest.
func shaDigest(hash string) ([sha1.Size]byte, error) {
	var d [sha1.Size]byte
	raw, err := base64.StdEncoding.Strict().DecodeString(strings.TrimPrefix(hash, shaPrefix))
	if err != nil || len(raw) != sha1.Size {
		return d, fmt.Errorf("malformed {SHA} hash (want base64 of a 20-byte SHA-1 digest)")
	}
	copy(d[:], raw)
	return d, nil
}
