package standalone

import "testing"

func TestSplitDocuments(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		lines []int // start line of each non-blank document, 0 for a blank one
	}{
		{"single", "a: 1\n", []int{1}},
		{"leading separator", "---\na: 1\n", []int{2}},
		{"two", "a: 1\n---\nb: 2\n", []int{1, 3}},
		{"blank middle", "a: 1\n---\n# c\n---\nb: 2", []int{1, 0, 5}},
		{"separator with comment", "a: 1\n--- # next\nb: 2\n", []int{1, 3}},
		{"dashes in a value are not a separator", "a: |\n  ---x\n----\n", []int{1}},
		{"crlf", "a: 1\r\n---\r\nb: 2\r\n", []int{1, 3}},
		{"trailing separator", "a: 1\n---\n", []int{1, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			docs := splitDocuments([]byte(tc.in))
			if len(docs) != len(tc.lines) {
				t.Fatalf("got %d documents %+v, want %d", len(docs), docs, len(tc.lines))
			}
			for i, d := range docs {
				got := d.line
				if d.body == nil {
					got = 0
				}
				if got != tc.lines[i] {
					t.Errorf("document %d starts at %d, want %d", i+1, got, tc.lines[i])
				}
			}
		})
	}
}

func TestFileLines(t *testing.T) {
	if got := fileLines("yaml: line 3: did not find expected key", 10); got != "yaml: line 12: did not find expected key" {
		t.Errorf("got %q", got)
	}
}
