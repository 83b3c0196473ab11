package coxswaincmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSessionKeyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := write("a", "0123456789abcdef-one"), write("b", "0123456789abcdef-two")
	key := func(path string) []byte {
		t.Helper()
		k, err := (&sessionKeyFlag{path: path}).key()
		if err != nil || len(k) != 32 {
			t.Fatalf("key(%s) = %x, %v", path, k, err)
		}
		return k
	}
	if !bytes.Equal(key(a), key(a)) {
		t.Error("one file, two keys: two serve processes would not honour each other's cookies")
	}
	if bytes.Equal(key(a), key(b)) {
		t.Error("two files, one key")
	}
	if k, err := (&sessionKeyFlag{}).key(); k != nil || err != nil {
		t.Errorf("unset: %x, %v", k, err)
	}
	for path, want := range map[string]string{write("short", "too short"): "holds 9 bytes", filepath.Join(dir, "none"): "no such file"} {
		if _, err := (&sessionKeyFlag{path: path}).key(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", path, err, want)
		}
	}
	if bytes.Equal(randomSessionKey(), randomSessionKey()) {
		t.Error("random keys repeat")
	}
}
