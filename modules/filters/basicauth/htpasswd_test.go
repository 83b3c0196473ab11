package basicauth

import (
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// hashOf is a bcrypt hash of password at the lowest cost, with the version prefix replaced
// (all of $2a$, $2b$ and $2y$ are the same algorithm for passwords under 256 bytes).
func hashOf(t testing.TB, password, prefix string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return prefix + string(h[4:])
}

// shaOf is "{SHA}" + base64(SHA-1(password)), as htpasswd -s writes it.
const shaOfSecret = "{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=" // "secret"

func TestParseHtpasswd(t *testing.T) {
	a, b, y := hashOf(t, "pa", "$2a$"), hashOf(t, "pb", "$2b$"), hashOf(t, "py", "$2y$")
	highCost := "$2y$18$" + a[7:]
	file := strings.Join([]string{
		"# users of the admin area",
		"",
		"carol:" + y + "\r",
		"alice:" + a,
		"bob:" + b + "  ",
		"dave:" + shaOfSecret,
		"alice:" + b,
		"erin:$apr1$x6D3Yf0Z$8qPDuSFK3ctMqMH0D4pKf.",
		"frank:$6$saltsalt$Zq8LrMzl5pyK6bOQ9HHfKrQ4kT8YhVy0W/Q1r7PwOS1",
		"gina:plaintext",
		"hank:rqXexS6ZhobKA", // DES crypt
		":" + a,
		"noseparator",
		"ivan:" + highCost,
		"judy:" + a[:59],
		"kim:{SHA}short",
		"lee:",
		"   ",
	}, "\n")
	users, warnings := ParseHtpasswd([]byte(file))
	names := make([]string, len(users))
	for i, u := range users {
		names[i] = u.Name
	}
	if want := []string{"alice", "bob", "carol", "dave"}; !slices.Equal(names, want) {
		t.Errorf("users %v, want %v (sorted; the first alice line wins)", names, want)
	}
	if users[0].Hash != a || users[1].Hash != b || users[2].Hash != y {
		t.Errorf("hashes %+v: want them as written, without the CR and trailing spaces", users)
	}
	for _, want := range []string{
		`line 7: user "alice" repeats an earlier line`,
		`line 8: user "erin": MD5 (apr1) hashes are not supported`,
		`line 9: user "frank": crypt hashes are not supported`,
		`line 10: user "gina": unsupported hash format`,
		`line 11: user "hank": unsupported hash format`,
		`line 12: empty user name`,
		`line 13: not user:hash`,
		`line 14: user "ivan": bcrypt cost 18 is above 17`,
		`line 15: user "judy": malformed bcrypt hash`,
		`line 16: user "kim": malformed {SHA} hash`,
		`line 17: user "lee": empty hash`,
	} {
		if !slices.ContainsFunc(warnings, func(w string) bool { return strings.HasPrefix(w, want) }) {
			t.Errorf("no warning %q in %q", want, warnings)
		}
	}
	if len(warnings) != 11 {
		t.Errorf("%d warnings, want 11: %q", len(warnings), warnings)
	}
	for _, w := range warnings {
		if strings.Contains(w, "$2") || strings.Contains(w, "plaintext") {
			t.Errorf("warning %q shows a hash", w)
		}
	}
}

// FuzzParseHtpasswd: any input parses without panicking, and what is accepted is usable: names
// without ':' or control characters, each once, sorted, and hashes the module compiles.
func FuzzParseHtpasswd(f *testing.F) {
	f.Add([]byte("alice:$2y$05$" + strings.Repeat("a", 53) + "\nbob:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=\n"))
	f.Add([]byte("# comment\r\n\r\nx:$apr1$abc$def\nx:plain\n:\n:::\n"))
	f.Add([]byte("u:$2a$31$" + strings.Repeat("/", 53)))
	f.Add([]byte("u:{SHA}" + strings.Repeat("=", 28)))
	f.Fuzz(func(t *testing.T, data []byte) {
		users, warnings := ParseHtpasswd(data)
		if len(users) > 0 && !slices.IsSortedFunc(users, func(a, b User) int { return strings.Compare(a.Name, b.Name) }) {
			t.Fatalf("users not sorted: %v", users)
		}
		for i, u := range users {
			if u.Name == "" || strings.ContainsAny(u.Name, ":\n\r") || !validName([]byte(u.Name)) {
				t.Fatalf("accepted user name %q", u.Name)
			}
			if i > 0 && users[i-1].Name == u.Name {
				t.Fatalf("user %q twice", u.Name)
			}
		}
		if len(users) == 0 {
			return
		}
		m := &BasicAuth{Config: Config{Realm: "r", Users: users}}
		if err := m.CheckConfig(); err != nil {
			t.Fatalf("the parser accepted users the module rejects: %v (%v)", err, users)
		}
		_ = warnings
	})
}
