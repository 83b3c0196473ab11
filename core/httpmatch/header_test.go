package httpmatch

import "testing"

func TestEqualJoined(t *testing.T) {
	tests := []struct {
		name string
		vals []string
		want string
		eq   bool
	}{
		{"two values", []string{"a", "b"}, "a,b", true},
		{"missing separator", []string{"a", "b"}, "ab", false},
		{"extra tail", []string{"a", "b"}, "a,b,", false},
		{"empty values", []string{"", ""}, ",", true},
		{"short want", []string{"abc", "d"}, "ab", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := equalJoined(tt.vals, ",", tt.want); got != tt.eq {
				t.Errorf("equalJoined(%q, %q) = %v, want %v", tt.vals, tt.want, got, tt.eq)
			}
		})
	}
}
